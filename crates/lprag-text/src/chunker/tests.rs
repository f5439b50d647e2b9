//! Tests of the sentence and passage chunkers.

#[test]
fn a_one_megabyte_sentence_of_clauses_is_split_in_linearithmic_time() {
    // 1 MB of "word; " with no sentence end: every "; " is a clause cut. Both sides
    // of every cut used to be counted whole (quadratic: 7.4 s here, hours at 10 MB);
    // now 0.4 s. The bound is a cost-attack guard with headroom for a loaded machine.
    let text = "word; ".repeat(1 << 20 >> 3);
    let t = std::time::Instant::now();
    let spans = SentenceChunker::default().split(&text);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
    assert!(spans.len() > 1000, "{}", spans.len());
    assert!(spans.iter().all(|r| text[r.clone()].chars().count() <= 200));
}

#[test]
fn ten_megabyte_documents_of_hostile_shapes_split_in_bounded_time() {
    // Each is 10 MB: no punctuation at all, abbreviations and initials everywhere,
    // unbalanced quotes, decimals, and a clause cut every few bytes. A quadratic step
    // would take hours; the bound is a cost-attack guard with ample headroom.
    const MB10: usize = 10 << 20;
    let fill = |unit: &str| unit.repeat(MB10 / unit.len());
    for (what, text) in [
        ("no punctuation", fill("word ")),
        ("abbreviations", fill("Dr. J. R. Smith et al. vs. Mr. ")),
        ("quotes", fill("\"He said. \"no ")),
        ("decimals", fill("3.14 2.71 1.41 ")),
        ("clause cuts", fill("a; b, ")),
    ] {
        let t = std::time::Instant::now();
        let spans = SentenceChunker::default().split(&text);
        let took = t.elapsed();
        assert!(
            took < std::time::Duration::from_secs(60),
            "{what}: {took:?}"
        );
        assert!(!spans.is_empty(), "{what}");
        assert!(
            spans
                .iter()
                .all(|r| text.is_char_boundary(r.start) && text.is_char_boundary(r.end)),
            "{what}"
        );
    }
}

use super::*;

fn split_with(cfg: SentenceChunkerConfig, text: &str) -> Vec<&str> {
    SentenceChunker::new(cfg)
        .split(text)
        .into_iter()
        .map(|r| &text[r])
        .collect()
}

/// Sentence splitting alone (no clause splits, no merging).
fn sentences(text: &str) -> Vec<&str> {
    split_with(
        SentenceChunkerConfig {
            max_chars: usize::MAX,
            min_chars: 0,
            min_clause_chars: 40,
        },
        text,
    )
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn word_lists_are_sorted() {
    for l in [TITLES, NUMERIC_ABBREVS, OTHER_ABBREVS] {
        assert!(l.windows(2).all(|w| w[0] < w[1]), "{l:?}");
    }
}

#[test]
fn abbreviations_do_not_split() {
    assert_eq!(
        sentences(
            "Mr. Smith met Dr. Jones at St. Paul's on Jan. 5. They talked about the U.S. \
             economy, e.g. taxes, i.e. money, etc. and left. J. R. R. Tolkien arrived."
        ),
        [
            "Mr. Smith met Dr. Jones at St. Paul's on Jan. 5.",
            "They talked about the U.S. economy, e.g. taxes, i.e. money, etc. and left.",
            "J. R. R. Tolkien arrived."
        ]
    );
    assert_eq!(
        sentences("Apple Inc. The company grew. He works at Acme Inc. He is Martin Luther King Jr. of Atlanta."),
        ["Apple Inc.", "The company grew.", "He works at Acme Inc.", "He is Martin Luther King Jr. of Atlanta."]
    );
    assert_eq!(
        sentences("It peaked at No. 7 on the chart. The answer was No. He left."),
        [
            "It peaked at No. 7 on the chart.",
            "The answer was No.",
            "He left."
        ]
    );
    assert_eq!(
        sentences("He lived in Washington, D.C. for years. Malcolm X. He spoke."),
        [
            "He lived in Washington, D.C. for years.",
            "Malcolm X.",
            "He spoke."
        ]
    );
}

#[test]
fn decimals_ellipses_and_quotes() {
    let text = "It has 2.1 million people and costs $3.5 billion. Its 2018 Impact Factor is \
                1.355. Wait... What? \"Stop!\" he said. She said \"Go.\" Then (the end.) Next \
                ``quoted.'' Last";
    assert_eq!(
        sentences(text),
        [
            "It has 2.1 million people and costs $3.5 billion.",
            "Its 2018 Impact Factor is 1.355.",
            "Wait...",
            "What?",
            "\"Stop!\" he said.",
            "She said \"Go.\"",
            "Then (the end.)",
            "Next ``quoted.''",
            "Last"
        ]
    );
    // An ellipsis before a lower-case word does not end the sentence; "?!" is one end.
    assert_eq!(
        sentences("He paused... then went on. Really?! Yes … Indeed."),
        ["He paused... then went on.", "Really?!", "Yes …", "Indeed."]
    );
    // Tokenised text: a detached period still ends a sentence, a detached closing
    // `''` stays with the sentence it closes.
    assert_eq!(
        sentences("He warned ``expect ruin. ''Three days later it fell. ''"),
        [
            "He warned ``expect ruin. ''",
            "Three days later it fell. ''"
        ]
    );
    assert_eq!(
        sentences("The area of the district is . Its center is Kiev ."),
        ["The area of the district is .", "Its center is Kiev ."]
    );
}

#[test]
fn non_ascii_text_spans_on_char_boundaries() {
    let text = "  Zürich liegt am Zürichsee. Ça va? 東京は日本の首都です。大阪も大きい。Ωmega ends… Ünïcode!  ";
    let spans = SentenceChunker::new(SentenceChunkerConfig {
        min_chars: 0,
        ..Default::default()
    })
    .split(text);
    let pieces: Vec<&str> = spans.iter().map(|r| &text[r.clone()]).collect();
    assert_eq!(
        pieces,
        [
            "Zürich liegt am Zürichsee.",
            "Ça va?",
            "東京は日本の首都です。",
            "大阪も大きい。",
            "Ωmega ends…",
            "Ünïcode!"
        ]
    );
    for r in &spans {
        assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
    }
    assert_eq!(spans[0], 2..30);
}

#[test]
fn blank_lines_are_boundaries() {
    assert_eq!(
        sentences("Heading\n\nBody text here.\nStill body"),
        ["Heading", "Body text here.", "Still body"]
    );
}

#[test]
fn long_sentences_split_at_clauses() {
    let text = "The journal was first published bimonthly beginning in January 1960; it \
                became a monthly publication in 1963 and is read widely, and the current \
                editor is Jan Philip Solovej from the University of Copenhagen.";
    let cfg = SentenceChunkerConfig {
        max_chars: 100,
        min_chars: 20,
        min_clause_chars: 30,
    };
    assert_eq!(
        split_with(cfg.clone(), text),
        [
            "The journal was first published bimonthly beginning in January 1960",
            "it became a monthly publication in 1963 and is read widely",
            "the current editor is Jan Philip Solovej from the University of Copenhagen."
        ]
    );
    // A list: the pieces around ", and" would be too short, so no cut.
    let list = "It is a sister of Adweek, Billboard, and The Hollywood Reporter.";
    assert_eq!(split_with(cfg.clone(), list), [list]);
    // Subordinating conjunctions stay with their clause; commas inside brackets don't cut.
    let t =
        "Liszt wrote thirteen symphonic poems over his long career (in Weimar, and elsewhere), \
             which illustrate the content of poems, paintings and other non-musical sources.";
    assert_eq!(
        split_with(cfg, t),
        [
            "Liszt wrote thirteen symphonic poems over his long career (in Weimar, and elsewhere)",
            "which illustrate the content of poems, paintings and other non-musical sources."
        ]
    );
}

#[test]
fn tiny_pieces_merge() {
    let text =
        "Yes. The film was released in 1999 by Warner. It was a hit. Sequels followed in 2003.";
    assert_eq!(
        split_with(SentenceChunkerConfig::default(), text),
        [
            "Yes. The film was released in 1999 by Warner. It was a hit.",
            "Sequels followed in 2003."
        ]
    );
    assert_eq!(
        split_with(SentenceChunkerConfig::default(), "Ok. No."),
        ["Ok. No."]
    );
}

#[test]
fn chunks_have_ids_titles_and_exact_spans() {
    let docs = vec![
        Document::new(
            "a",
            "Paris",
            "Paris is the capital of France. It has 2.1 million people.",
        ),
        Document::new("empty", "Nothing", "   \n\t "),
        Document::new("b", "Zürich", "  Zürich is a city in Switzerland.  "),
    ];
    let chunks = block_on(SentenceChunker::default().chunk(&docs)).unwrap();
    assert_eq!(chunks.len(), 3);
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.id, i);
        let doc = docs
            .iter()
            .find(|d| d.id == c.provenance.document_id)
            .unwrap();
        assert_eq!(&doc.text[c.provenance.span.clone()], c.text);
        assert_eq!(c.provenance.title, doc.title);
        assert_eq!(c.text, c.text.trim());
    }
    assert_eq!(chunks[1].text, "It has 2.1 million people.");
    assert_eq!(chunks[1].provenance.span, 32..58);
    assert_eq!(chunks[2].provenance.span, 2..35);
    assert_eq!(
        chunks[2].embedding_text(),
        "Zürich\nZürich is a city in Switzerland."
    );
}

#[test]
fn corpus_errors() {
    for chunker in [
        &SentenceChunker::default() as &dyn Chunker,
        &PassageChunker as &dyn Chunker,
    ] {
        let e = block_on(chunker.chunk(&[])).unwrap_err();
        assert!(matches!(e, Error::EmptyCorpus(_)), "{e}");
        let blank = [Document::new("x", "X", ""), Document::new("y", "Y", " \n ")];
        let e = block_on(chunker.chunk(&blank)).unwrap_err();
        assert!(matches!(e, Error::EmptyCorpus(_)), "{e}");
        let dup = [
            Document::new("d1", "A", "One."),
            Document::new("d2", "B", "Two."),
            Document::new("d1", "C", "Three."),
        ];
        let e = block_on(chunker.chunk(&dup)).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
        assert!(e.to_string().contains("'d1'"), "{e}");
    }
}

#[test]
fn one_chunk_corpora() {
    let docs = [Document::new("only", "", "  A single short statement  ")];
    for chunker in [
        &SentenceChunker::default() as &dyn Chunker,
        &PassageChunker as &dyn Chunker,
    ] {
        let chunks = block_on(chunker.chunk(&docs)).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].text, "A single short statement");
        assert_eq!(chunks[0].provenance.span, 2..26);
        assert_eq!(chunks[0].embedding_text(), "A single short statement");
    }
}

#[test]
fn passage_chunker_keeps_whole_documents() {
    let docs = [
        Document::new("a", "A", " First. Second sentence here. "),
        Document::new("b", "B", ""),
        Document::new("c", "C", "Third."),
    ];
    let chunks = block_on(PassageChunker.chunk(&docs)).unwrap();
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["First. Second sentence here.", "Third."]);
    assert_eq!(chunks[0].provenance.span, 1..29);
    assert_eq!(
        (chunks[1].id, chunks[1].provenance.document_id.as_str()),
        (1, "c")
    );
}

#[test]
fn never_panics_on_odd_text() {
    let odd = [
        ".",
        "...",
        "?!",
        " . . . ",
        "a.b.c.",
        "Mr.",
        "U.S.",
        "(",
        "))).",
        "''",
        "``",
        ";;;;",
        ", and , and",
        "日本。",
        "\n\n\n",
        "e\u{301}. x",
        "🦀. 🦀! 🦀?",
    ];
    let c = SentenceChunker::new(SentenceChunkerConfig {
        max_chars: 3,
        min_chars: 2,
        min_clause_chars: 1,
    });
    for t in odd {
        for r in c.split(t) {
            let piece = &t[r];
            assert!(
                !piece.is_empty() && piece.trim() == piece,
                "{t:?} -> {piece:?}"
            );
        }
    }
}

/// A large corpus is split off the async worker: on a current-thread runtime another
/// task makes progress while it is, and the chunks are those of the inline path.
#[tokio::test(flavor = "current_thread")]
async fn a_large_chunk_call_leaves_the_async_worker_free() {
    let text = "Warsaw lies on the Vistula. It is the capital of Poland. ".repeat(4_000);
    let docs = [Document::new("d", "", text.as_str())];
    let chunker = SentenceChunker::default();
    let (chunks, during) = crate::test_support::turns_beside(chunker.chunk(&docs)).await;
    let chunks = chunks.unwrap();
    assert!(
        during > 0,
        "the other task never ran while {} bytes were split",
        text.len()
    );
    let inline = chunk_corpus(&docs, |t| chunker.split(t)).unwrap();
    assert_eq!(chunks, inline);
}

/// Blocks of any size give the whole corpus's chunks, numbered in order.
#[tokio::test]
async fn chunks_made_a_block_at_a_time_are_the_whole_corpus_chunks() {
    let docs: Vec<Document> = (0..40)
        .map(|i| {
            let text = "Warsaw lies on the Vistula. It is the capital of Poland. ".repeat(i % 7);
            Document::new(format!("d{i}"), format!("T{i}"), text)
        })
        .collect();
    let chunker = SentenceChunker::default();
    let whole = chunk_corpus(&docs, |t| chunker.split(t)).unwrap();
    assert!(whole.len() > 60, "{} chunks", whole.len());
    for block_bytes in [0, 1, 100, 1_000, usize::MAX] {
        let me = chunker.clone();
        let got = chunk_in_blocks(&docs, block_bytes, move |b| {
            chunk_documents(b, |t| me.split(t))
        })
        .await
        .unwrap();
        assert_eq!(got, whole, "blocks of {block_bytes} bytes");
    }
}
