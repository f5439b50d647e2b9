#![no_main]
//! The offline chunkers on arbitrary text: no panic, spans on character boundaries and in
//! order; libFuzzer's `-timeout` catches a super-linear input.

use libfuzzer_sys::fuzz_target;
use lprag_text::{SentenceChunker, SentenceChunkerConfig};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for config in [
        SentenceChunkerConfig::default(),
        SentenceChunkerConfig {
            max_chars: 40,
            min_chars: 5,
            ..SentenceChunkerConfig::default()
        },
    ] {
        let spans = SentenceChunker::new(config).split(&text);
        let mut end = 0;
        for r in &spans {
            assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
            assert!(r.start >= end && r.start <= r.end && r.end <= text.len());
            end = r.end;
        }
    }
});
