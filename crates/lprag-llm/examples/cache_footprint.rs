//! What the response cache costs on disk per 1,000 LLM calls.
//!
//! Writes 1,000 C-PROMPT-style answers (each passage's sentences echoed under
//! `[Sentence i]` and restated as `[chunk]` lines, the shape of LP-RAG's chunking output)
//! plus 1,000 S-PROMPT-style answers (four bracketed questions) into a fresh cache and
//! prints bytes and filesystem blocks. Passages come from MuSiQue-100 when
//! `LPRAG_DATA` (or `../shared/data`) holds it, else from a built-in paragraph.
//!
//! Run: `cargo run -p lprag-llm --release --example cache_footprint`

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use lprag_llm::{ChatMessage, ChatRequest, ChatResponse, ResponseCache, Usage};

fn passages() -> Vec<String> {
    let dirs = [
        std::env::var("LPRAG_DATA").map(PathBuf::from).ok(),
        Some(PathBuf::from("../shared/data")),
        Some(PathBuf::from("../../../shared/data")),
    ];
    for d in dirs.into_iter().flatten() {
        let f = d.join("musique-100/corpus.json");
        if let Ok(text) = std::fs::read_to_string(&f) {
            if let Ok(v) = serde_json::from_str::<Vec<serde_json::Value>>(&text) {
                eprintln!("passages from {}", f.display());
                return v
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_string))
                    .collect();
            }
        }
    }
    eprintln!("MuSiQue-100 not found; using a built-in paragraph");
    vec!["Pakistan Super League (Urdu: PSL) is a Twenty20 cricket league, founded in Lahore on 9 September 2015 with five teams and now comprises six teams. Instead of operating as an association of independently owned teams, the league is a single entity in which each franchise is owned and controlled by investors.".into()]
}

fn usage_of(dir: &Path) -> (u64, u64, u64) {
    let (mut n, mut bytes, mut blocks) = (0, 0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            blocks += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
                bytes += m.len();
            }
        }
    }
    (n, bytes, blocks)
}

fn main() {
    let passages = passages();
    let dir = tempfile::tempdir().unwrap();
    let cache = ResponseCache::open(dir.path()).unwrap();
    let mut answer_bytes = 0usize;
    for kind in ["chunking", "queries"] {
        for i in 0..1000 {
            let p = &passages[i % passages.len()];
            let sentences: Vec<&str> = p.split_inclusive(". ").collect();
            let content = if kind == "chunking" {
                sentences
                    .iter()
                    .enumerate()
                    .map(|(s, t)| {
                        format!(
                            "[Sentence {}]\n{}\n[Extracted Chunks in Sentence {}]\n[{}]\n",
                            s + 1,
                            t.trim(),
                            s + 1,
                            t.trim()
                        )
                    })
                    .collect::<String>()
            } else {
                "[Questions Chunk 1]\n[What is the first question about this chunk?]\n[What is the second question about it?]\n[Questions Chunk 2]\n[What is the third question?]\n[And the fourth question?]".to_string()
            };
            answer_bytes += content.len();
            let request = ChatRequest::new(vec![ChatMessage::user(format!("{kind} {i} {p}"))]);
            let key = ResponseCache::key("openai", "gpt-4o-mini", &request);
            let response = ChatResponse {
                content,
                usage: Some(Usage {
                    prompt_tokens: 900,
                    completion_tokens: 250,
                }),
                finish_reason: Some("stop".into()),
                cached: false,
            };
            cache.put(&key, "openai", "gpt-4o-mini", &response).unwrap();
        }
        let (n, bytes, blocks) = usage_of(dir.path());
        println!(
            "after 1,000 {kind} answers: {n} entries, {:.1} KiB of files ({:.0} B/entry), {:.1} KiB on disk (blocks)",
            bytes as f64 / 1024.0,
            bytes as f64 / n as f64,
            blocks as f64 / 1024.0
        );
    }
    println!(
        "answer text alone: {:.1} KiB for 2,000 answers",
        answer_bytes as f64 / 1024.0
    );
}
