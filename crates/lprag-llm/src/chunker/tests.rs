//! Tests of the LLM chunker.

use super::windows::MESSAGE_OVERHEAD;
use super::*;
use crate::{ChatRequest, ChatResponse, TokenMeter};

/// What a scripted model does with a window's paragraph.
type Script =
    dyn Fn(&str, &ChatRequest) -> std::result::Result<ChatResponse, LlmError> + Send + Sync;

/// A model that records every request and answers through its script.
struct Scripted {
    requests: Mutex<Vec<ChatRequest>>,
    context: Option<u32>,
    script: Box<Script>,
}

impl Scripted {
    fn new(
        script: impl Fn(&str, &ChatRequest) -> std::result::Result<ChatResponse, LlmError>
            + Send
            + Sync
            + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            requests: Mutex::new(Vec::new()),
            context: None,
            script: Box::new(script),
        })
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// The paragraphs sent, in the order sent.
    fn paragraphs(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| paragraph(r).to_string())
            .collect()
    }
}

#[async_trait]
impl ChatModel for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn context_tokens(&self) -> Option<u32> {
        self.context
    }
    async fn complete(&self, request: &ChatRequest) -> std::result::Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        (self.script)(paragraph(request), request)
    }
}

/// The paragraph of a C-PROMPT request.
fn paragraph(r: &ChatRequest) -> &str {
    let user = &r.messages[1].content;
    let start = user.find("[The Start of Paragraph text]\n").unwrap() + 30;
    let end = user.rfind("\n[The End of Paragraph text]").unwrap();
    &user[start..end]
}

/// The sentences of a paragraph (each ends with a full stop).
fn sentences(paragraph: &str) -> Vec<&str> {
    paragraph
        .split_inclusive('.')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A well-behaved C-PROMPT answer: each sentence is its own statement.
fn answer(paragraph: &str) -> String {
    sentences(paragraph)
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n = i + 1;
            format!("[Sentence {n}]\n{s}\n[Extracted Chunks in Sentence {n}]\n[{s}]\n")
        })
        .collect()
}

fn stop(content: String) -> ChatResponse {
    ChatResponse {
        finish_reason: Some("stop".into()),
        ..ChatResponse::text(content)
    }
}

/// A document of 50 paragraphs of three distinct sentences each.
fn long_document() -> Document {
    let text = (0..50)
        .map(|p| {
            (0..3)
                .map(|s| {
                    format!("Paragraph {p} states fact {s} about river {p}x{s} flowing north.")
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    Document::new("long", "Rivers", text)
}

/// The estimated size of a request against `budget`, answer limit included.
fn estimated(r: &ChatRequest) -> u64 {
    r.messages
        .iter()
        .map(|m| estimate_tokens(&m.content) + MESSAGE_OVERHEAD)
        .sum::<u64>()
        + u64::from(r.max_tokens.unwrap())
}

#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

impl lprag_core::Progress for Warnings {
    fn warn(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_string());
    }
}

#[tokio::test]
async fn a_long_document_is_chunked_in_windows_that_fit_with_spans_in_the_whole_document() {
    let doc = long_document();
    let model = Scripted::new(|p, _| Ok(stop(answer(p))));
    let meter = Arc::new(TokenMeter::new());
    let warnings = Arc::new(Warnings::default());
    let chunker = LlmChunker::new(model.clone())
        .context_tokens(2048)
        .concurrency(3)
        .with_meter(meter.clone())
        .with_progress(warnings.clone());
    let chunks = chunker
        .chunk(&[doc.clone(), Document::new("short", "", "A short note.")])
        .await
        .unwrap();

    // Every request fits the context with its answer limit, and the answer limit is
    // 3 tokens per window token + 128 (at least 1,024 where there is room).
    let requests = model.requests();
    assert!(requests.len() > 5, "{} requests", requests.len());
    for r in &requests {
        assert!(estimated(r) <= 2048, "{} > 2048", estimated(r));
        let own = estimate_tokens(paragraph(r));
        assert!(u64::from(r.max_tokens.unwrap()) >= (3 * own + 128).min(2048 - own));
    }
    // The windows are the document in order, nothing dropped but the whitespace
    // between paragraphs; they end at paragraph breaks.
    let mut sent = model.paragraphs();
    sent.sort_by_key(|p| doc.text.find(p.as_str()).unwrap_or(usize::MAX));
    let windows = chunker.windows(&doc.text).unwrap();
    assert_eq!(windows.len() + 1, sent.len());
    let mut covered: Vec<&str> = windows.iter().map(|r| &doc.text[r.clone()]).collect();
    assert!(covered.iter().all(|w| !w.starts_with(char::is_whitespace)));
    covered.push("A short note.");
    assert_eq!(sent, covered);
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(
        squeeze(&covered[..windows.len()].concat()),
        squeeze(&doc.text)
    );
    for w in &windows {
        assert!(w.end == doc.text.len() || doc.text[w.end..].starts_with("\n\n"));
    }

    // Every sentence is a statement, in document order, its span exact in the whole
    // document.
    let expected: Vec<&str> = sentences(&doc.text);
    let got: Vec<&str> = chunks
        .iter()
        .filter(|c| c.provenance.document_id == "long")
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(got, expected);
    for c in &chunks {
        let source = if c.provenance.document_id == "long" {
            &doc.text
        } else {
            "A short note."
        };
        assert_eq!(&source[c.provenance.span.clone()], c.text);
    }
    assert_eq!(
        chunks.iter().map(|c| c.id).collect::<Vec<_>>(),
        (0..chunks.len()).collect::<Vec<_>>()
    );

    let stats = chunker.stats();
    assert_eq!(stats.documents, 2);
    assert_eq!(stats.documents_windowed, 1);
    assert_eq!(stats.windows, requests.len() as u64);
    assert_eq!(
        (
            stats.truncated_retries,
            stats.context_retries,
            stats.fallback_windows
        ),
        (0, 0, 0)
    );
    let usage = meter.snapshot()["chunking"];
    assert_eq!(
        (usage.windowed_items, usage.windows, usage.truncated_retries),
        (1, requests.len() as u64, 0)
    );
    let w = warnings.0.lock().unwrap().clone();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("1 of 2 documents") && w[0].contains("2048 tokens"),
        "{w:?}"
    );
}

#[tokio::test]
async fn a_short_document_is_sent_whole_with_the_old_answer_limit() {
    let model = Scripted::new(|p, _| Ok(stop(answer(p))));
    let chunker = LlmChunker::new(model.clone());
    let text = "Marie Curie was born in Warsaw. She won two Nobel Prizes.";
    let whole: Vec<Range<usize>> = std::iter::once(0..text.len()).collect();
    assert_eq!(chunker.windows(text).unwrap(), whole);
    assert_eq!(chunker.request(text).unwrap().max_tokens, Some(1024));
    let chunks = chunker
        .chunk(&[Document::new("d", "", text)])
        .await
        .unwrap();
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunker.stats().documents_windowed, 0);
    assert_eq!(chunker.stats().windows, 1);
    assert_eq!(chunker.context_budget(), LlmChunker::DEFAULT_CONTEXT_TOKENS);
}

#[tokio::test]
async fn answers_cut_at_the_token_limit_are_split_and_asked_again_never_read() {
    let doc = long_document();
    // Windows over 600 bytes get an answer cut short, as a model with too small a
    // limit would give.
    let model = Scripted::new(|p, _| {
        let full = answer(p);
        Ok(if p.len() > 600 {
            ChatResponse {
                finish_reason: Some("length".into()),
                ..ChatResponse::text(full[..full.len() / 3].to_string())
            }
        } else {
            stop(full)
        })
    });
    let meter = Arc::new(TokenMeter::new());
    let chunker = LlmChunker::new(model.clone())
        .context_tokens(2048)
        .with_meter(meter.clone());
    let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
    let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(got, sentences(&doc.text), "nothing lost, in order");
    for c in &chunks {
        assert_eq!(&doc.text[c.provenance.span.clone()], c.text);
    }
    let stats = chunker.stats();
    let planned = chunker.windows(&doc.text).unwrap().len() as u64;
    let cut = model.paragraphs().iter().filter(|p| p.len() > 600).count() as u64;
    assert!(cut > 0);
    assert_eq!(stats.truncated_retries, cut);
    assert!(stats.windows > planned);
    assert_eq!(stats.windows, model.requests().len() as u64);
    assert_eq!(stats.fallback_windows, 0);
    assert_eq!(meter.snapshot()["chunking"].truncated_retries, cut);
}

#[tokio::test]
async fn a_window_still_cut_at_the_smallest_size_falls_back_or_fails() {
    let doc = long_document();
    // Never stops.
    let model = Scripted::new(|p, _| {
        Ok(ChatResponse {
            finish_reason: Some("length".into()),
            ..ChatResponse::text(answer(p))
        })
    });
    let chunker = LlmChunker::new(model.clone()).context_tokens(2048);
    let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
    // The offline chunker took every smallest window: all text is still there, in
    // order, with spans in the whole document.
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(squeeze(&joined), squeeze(&doc.text));
    for c in &chunks {
        assert_eq!(&doc.text[c.provenance.span.clone()], c.text);
    }
    let stats = chunker.stats();
    assert!(
        stats.fallback_windows > 0 && stats.truncated_retries > 0,
        "{stats:?}"
    );
    for p in model.paragraphs() {
        assert!(estimate_tokens(&p) <= chunker.budget().unwrap().window);
    }

    let err = LlmChunker::new(model)
        .context_tokens(2048)
        .on_unparseable(OnUnparseable::Fail)
        .chunk(std::slice::from_ref(&doc))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("token limit") && err.contains("bytes"),
        "{err}"
    );
}

#[tokio::test]
async fn a_request_refused_as_too_long_is_split_and_asked_again() {
    let doc = long_document();
    let model = Scripted::new(|p, _| {
        if p.len() > 500 {
            Err(LlmError::ContextLength("4155 tokens > 4096".into()))
        } else {
            Ok(stop(answer(p)))
        }
    });
    let chunker = LlmChunker::new(model.clone()).context_tokens(2048);
    let chunks = chunker.chunk(std::slice::from_ref(&doc)).await.unwrap();
    let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(got, sentences(&doc.text));
    assert!(chunker.stats().context_retries > 0);
    assert_eq!(chunker.stats().truncated_retries, 0);
}

#[tokio::test]
async fn windows_follow_the_context_and_an_explicit_answer_limit() {
    let mut model = Scripted::new(|p, _| Ok(stop(answer(p))));
    Arc::get_mut(&mut model).unwrap().context = Some(4096);
    let text = long_document().text;
    let chunker = LlmChunker::new(model.clone());
    assert_eq!(
        chunker.context_budget(),
        4096,
        "the model's context is used"
    );
    let b = chunker.budget().unwrap();
    assert_eq!(b.window, (4096 - b.prompt - 128) / 4);
    assert!(chunker
        .windows(&text)
        .unwrap()
        .iter()
        .all(|r| r.len() as u64 <= b.window * 3));
    // The explicit setting beats the model's.
    assert_eq!(chunker.context_tokens(16384).context_budget(), 16384);
    // An explicit answer limit is sent as it is, and windows are made small enough
    // for it.
    let chunker = LlmChunker::new(model.clone()).max_tokens(Some(600));
    let b = chunker.budget().unwrap();
    assert_eq!(b.window, (600 - 128) / 3);
    assert_eq!(chunker.request("x").unwrap().max_tokens, Some(600));
    let none = LlmChunker::new(model.clone()).max_tokens(None);
    assert_eq!(none.request("x").unwrap().max_tokens, None);
    // A context too small for any window is refused before any call.
    let err = LlmChunker::new(model.clone())
        .context_tokens(900)
        .chunk(&[Document::new("d", "", "Text.")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("context_tokens"), "{err}");
    assert!(model.requests().is_empty());
}

#[test]
fn the_fingerprint_follows_the_context_and_the_answer_limit() {
    let model = Scripted::new(|p, _| Ok(stop(answer(p))));
    let fp = |c: LlmChunker| c.fingerprint().unwrap();
    let default = fp(LlmChunker::new(model.clone()));
    assert_ne!(
        default,
        fp(LlmChunker::new(model.clone()).context_tokens(4096))
    );
    assert_ne!(
        default,
        fp(LlmChunker::new(model.clone()).max_tokens(Some(1024)))
    );
    assert_eq!(
        default,
        fp(LlmChunker::new(model.clone()).context_tokens(8192))
    );
}

#[test]
fn windows_split_at_paragraphs_and_cover_the_text() {
    let text = "First paragraph here.\n\nSecond one, a bit longer.\n\nThird.";
    let whole: Vec<Range<usize>> = std::iter::once(0..text.len()).collect();
    assert_eq!(split_windows(text, 100), whole);
    let w = split_windows(text, 30);
    let pieces: Vec<&str> = w.iter().map(|r| &text[r.clone()]).collect();
    assert_eq!(
        pieces,
        [
            "First paragraph here.",
            "Second one, a bit longer.",
            "Third."
        ]
    );
    assert!(w.iter().all(|r| r.len() <= 30));
    // Multi-byte text is cut on char boundaries, by bytes.
    let cjk = "居里夫人出生于华沙。她获得了两次诺贝尔奖。".repeat(5);
    for r in split_windows(&cjk, 40) {
        assert!(r.len() <= 40);
        assert!(cjk.is_char_boundary(r.start) && cjk.is_char_boundary(r.end));
    }
    assert_eq!(estimate_tokens("abcd"), 2);
    assert_eq!(estimate_tokens("居"), 1);
}

#[test]
fn statements_are_located_in_their_document() {
    let text = "Marie Curie was born in Warsaw. She won two Nobel Prizes.";
    let sentences = SentenceChunker::default().split(text);
    assert_eq!(
        locate("Marie Curie was born in Warsaw.", text, &sentences),
        0..31
    );
    let r = locate("Marie Curie won two Nobel Prizes.", text, &sentences);
    assert_eq!(&text[r], "She won two Nobel Prizes.");
    assert_eq!(locate("Unrelated.", text, &sentences), 0..text.len());
}
