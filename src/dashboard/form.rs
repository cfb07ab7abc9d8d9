//! `application/x-www-form-urlencoded` bodies and query strings, as the dashboard's forms and
//! filters send them.

/// `application/x-www-form-urlencoded` (or a query string) into pairs.
pub(super) fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
