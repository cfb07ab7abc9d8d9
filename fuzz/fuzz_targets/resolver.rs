//! libFuzzer target: random symlink layouts and paths inside a temp root; nothing the roots
//! resolver returns may lie outside it (the check is `hands_fuzz::check`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hands_fuzz::check(data);
});
