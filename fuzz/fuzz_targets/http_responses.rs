#![no_main]
//! An LLM server's response (status, `Retry-After` headers, body) through everything the
//! HTTP clients do with it: no panic (a huge `Retry-After` once panicked here).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let status = 100 + u16::from_le_bytes([data[0], data[1]]) % 500;
    let rest = String::from_utf8_lossy(&data[2..]);
    // Two header values and the body, split at the first two newlines.
    let mut parts = rest.splitn(3, '\n');
    let retry_after = parts.next().unwrap_or("");
    let retry_after_ms = parts.next().unwrap_or("");
    let body = parts.next().unwrap_or("");
    lprag_llm::http::fuzzing::response(status, retry_after, retry_after_ms, body);
});
