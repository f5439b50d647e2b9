#![no_main]
//! Every LLM answer parser on arbitrary text: no panic, no hang.

use libfuzzer_sys::fuzz_target;
use lprag_llm::parse;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse::strip_code_fences(&text);
    if let Ok(items) = parse::chunk_statements(&text) {
        let _ = parse::drop_prompt_echoes(items, "prompt text");
    }
    let _ = parse::grouped_questions(&text);
    let _ = parse::is_question(&text);
    let _ = parse::json_array(&text);
    let _ = parse::query_answer_pairs(&text);
    let _ = parse::yes_no(&text);
    let _ = parse::openie(&text);
});
