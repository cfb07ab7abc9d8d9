//! Names as a case-folding folder compares them, as far as the names the walls protect go
//! (decisions 0046 and 0094): a folder with the casefold flag (ext4, f2fs, a tmpfs mounted with
//! `casefold`) or a vfat or exFAT one gives a program that asks for `.envrc` the entry
//! `.ENVRC`. Every protected name and git dir piece is ASCII, so what can stand for one is:
//! ASCII letters in either case; the non-ASCII code points whose full case folding (the
//! kernel's: Unicode's `CaseFolding.txt`, status C and F, after NFD) is ASCII — U+017F (ſ, `s`),
//! U+212A (the Kelvin sign, `k`), ß and ẞ (`ss`) and the Latin ligatures U+FB00–FB06 (`ff`,
//! `fi`, `fl`, `ffi`, `ffl`, `st`, `st`); and the code points Unicode calls default-ignorable (a
//! zero-width space, a soft hyphen), which the kernel's folding drops. [`folded`] maps them all
//! the same way for every check, so `.lfſconfig`, `.lfscon\u{FB01}g`, `hooKs` and
//! `.env\u{200B}rc` meet the rules their folder would hand them to (each found by its ASCII
//! name in an ext4 folder with the casefold flag on Debian's 6.1, 6.12 and 7.2 kernels). The
//! list was made by folding every code point (`unicodedata`: NFD, `casefold`, NFD) and keeping
//! those that came out ASCII: the two more it gave, U+037E (`;`) and U+1FEF (a backtick), are
//! in no name the walls protect.
//!
//! Trailing dots go too: vfat and exFAT (without `keep_last_dots`) ignore them when they compare
//! names, so `config.` there is `config` and `.git./HEAD` is `.git/HEAD` (found attacking this:
//! `write .git/config.` and a command's `.envrc.` were made). A name of dots only stays itself.

use std::borrow::Cow;

/// `name` folded for comparison with the protected rules and git's names (all ASCII,
/// lowercase): ASCII letters lowercased, the code points whose full case folding is ASCII
/// made that (ſ `s`, the Kelvin sign `k`, ß `ss`, the ligature ﬁ `fi`, ...), default-ignorable
/// code points dropped, trailing dots dropped (not from a name of dots only). Bytes that are
/// not UTF-8 are only ASCII-lowercased.
pub fn folded(name: &[u8]) -> Cow<'_, [u8]> {
    let name = undotted(name);
    if name.is_ascii() {
        if !name.iter().any(u8::is_ascii_uppercase) {
            return Cow::Borrowed(name);
        }
        return Cow::Owned(name.to_ascii_lowercase());
    }
    let Ok(text) = std::str::from_utf8(name) else {
        return Cow::Owned(name.to_ascii_lowercase());
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{17F}' => out.push('s'),
            '\u{212A}' => out.push('k'),
            '\u{DF}' | '\u{1E9E}' => out.push_str("ss"),
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            c if ignorable(c) => {}
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    let kept = undotted(out.as_bytes()).len();
    out.truncate(kept);
    Cow::Owned(out.into_bytes())
}

/// `name` without its trailing dots, unless it is dots only (`.`, `..`).
fn undotted(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|b| *b != b'.') {
        Some(last) => &name[..=last],
        None => name,
    }
}

/// `path` with each of its components [`folded`], joined by `/` as given.
pub fn folded_path(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for (i, c) in path.split(|b| *b == b'/').enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(&folded(c));
    }
    out
}

/// Whether `a` and `b` fold to the same name ([`folded`]); two ASCII names are compared in
/// place (the in-run walls ask this several times of every create).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return undotted(a).eq_ignore_ascii_case(undotted(b));
    }
    folded(a) == folded(b)
}

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15).
fn ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0xAD | 0x34F
            | 0x61C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_folding_folder_would_hand_over_folds_to_the_protected_name() {
        for (name, want) in [
            (".ENVRC", ".envrc"),
            (".lf\u{17F}config", ".lfsconfig"),
            ("hoo\u{212A}s", "hooks"),
            (".env\u{200B}rc", ".envrc"),
            ("\u{FEFF}.Claude", ".claude"),
            ("HEAD\u{AD}", "head"),
            // Full case folding: one code point, two or three ASCII letters.
            (".lfscon\u{FB01}g", ".lfsconfig"),
            ("con\u{FB01}g.worktree", "config.worktree"),
            (".pro\u{FB01}le", ".profile"),
            (".\u{DF}h", ".ssh"),
            (".\u{1E9E}H", ".ssh"),
            ("\u{FB00}\u{FB02}\u{FB03}\u{FB04}\u{FB05}\u{FB06}", "ffflffifflstst"),
        ] {
            assert_eq!(folded(name.as_bytes()).as_ref(), want.as_bytes(), "{name:?}");
        }
        assert!(same(b".VSCode", b".vscode"));
        // Other letters stay what they are: an accented `e` is not `e`.
        assert!(!same(".\u{E9}nvrc".as_bytes(), b".envrc"));
        // Not UTF-8: only ASCII folds.
        assert_eq!(folded(b"\xFF.ENVRC").as_ref(), b"\xFF.envrc");
        assert!(matches!(folded(b"plain.txt"), Cow::Borrowed(_)));
        // Trailing dots, as vfat and exFAT ignore them; a name of dots only is itself.
        for (name, want) in
            [("config.", "config"), (".ENVRC..", ".envrc"), (".git.", ".git"), ("..", "..")]
        {
            assert_eq!(folded(name.as_bytes()).as_ref(), want.as_bytes(), "{name:?}");
        }
        assert_eq!(folded(".env\u{200B}rc.\u{200B}".as_bytes()).as_ref(), b".envrc");
        assert!(same(b"HEAD.", b"head") && !same(b".", b""));
        assert_eq!(folded_path(b"/p/.Git./Config."), b"/p/.git/config");
    }
}
