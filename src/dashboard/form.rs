//! `application/x-www-form-urlencoded` bodies and query strings, as the dashboard's forms and
//! filters send them.

/// `application/x-www-form-urlencoded` (or a query string) into pairs.
pub(super) fn form_pairs(text: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(text.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

pub(super) fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_percent_and_plus() {
        let p = form_pairs("a=1+2&b=%3Cscript%3E&c=%zz&d=%4&e");
        assert_eq!(field(&p, "a"), Some("1 2"));
        assert_eq!(field(&p, "b"), Some("<script>"));
        assert_eq!(field(&p, "c"), Some("%zz"));
        assert_eq!(field(&p, "d"), Some("%4"));
        assert_eq!(field(&p, "e"), Some(""));
    }
}
