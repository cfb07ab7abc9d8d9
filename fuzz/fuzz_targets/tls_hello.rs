//! libFuzzer target: the proxy's ClientHello reader (`hands_sandbox::proxy::sni`) on any bytes
//! and on every prefix of them: it must never panic, and a server name it returns is clean
//! ASCII.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    use hands_sandbox::proxy::sni::{Hello, client_hello};
    for end in [data.len(), data.len() / 2, data.len().saturating_sub(1)] {
        if let Hello::Done(h) = client_hello(&data[..end]) {
            assert!(h.server_name.is_none_or(|n| n.bytes().all(|b| b.is_ascii_graphic())));
        }
    }
});
