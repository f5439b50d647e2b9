//! LP-RAG's ranking around the link predictor: documents competing as one
//! (`LpRagConfig::parents`) and the dense anchor chosen on held-out questions
//! (`LpRagConfig::anchor`).

use std::collections::HashSet;
use std::sync::Arc;

use crate::common;
use lprag::choose_anchor;
use lprag::{
    Anchor, Document, LpRag, LpRagConfig, ParentScoring, Retriever, Selection, SentenceChunker,
    ANCHOR_WEIGHTS,
};

/// Forty short articles of two sentences each (each sentence a chunk under the sentence
/// chunker), about towns with rivers, products and mayors.
fn towns() -> Vec<Document> {
    let rivers = [
        "Vistula", "Danube", "Rhine", "Elbe", "Oder", "Loire", "Tagus",
    ];
    let products = ["glass", "cheese", "steel", "lace", "clocks"];
    let mayors = [
        "Anna Berg",
        "Piotr Nowak",
        "Lena Vogt",
        "Marek Zielinski",
        "Clara Moreau",
        "Jonas Keller",
        "Ines Duarte",
        "Tomas Novak",
        "Eva Lindqvist",
    ];
    (0..40)
        .map(|i| {
            let name = format!("Town{i}");
            Document::new(
                name.to_lowercase(),
                name.clone(),
                format!(
                    "{name} lies on the {} river and is known for its {}. The mayor of {name} \
                     is {}, elected in {}.",
                    rivers[i % rivers.len()],
                    products[i % products.len()],
                    mayors[i % mayors.len()],
                    1990 + i
                ),
            )
        })
        .collect()
}

fn config(parents: ParentScoring, anchor: Anchor) -> LpRagConfig {
    LpRagConfig {
        parents,
        anchor,
        ..common::lprag_config(3)
    }
}

async fn build(config: LpRagConfig) -> LpRag {
    LpRag::builder()
        .encoder(common::hashing())
        .chunker(Arc::new(SentenceChunker::default()))
        .config(config)
        .build(&towns())
        .await
        .expect("build")
}

#[tokio::test]
async fn documents_compete_as_one_and_keep_their_chunks() {
    let best = build(config(ParentScoring::Best, Anchor::Off)).await;
    assert!(best.chunks().len() > towns().len(), "sentence chunks");
    let q = "Which town is known for its lace and has mayor Lena Vogt?";
    let hits = best.retrieve(q, Selection::TopK(3)).await.unwrap();
    // Three documents, each one's chunks next to each other, scores never rising.
    let mut docs: Vec<&str> = Vec::new();
    for h in &hits {
        let d = h.chunk.provenance.document_id.as_str();
        if docs.last() != Some(&d) {
            assert!(
                !docs.contains(&d),
                "{d}'s chunks are not together: {hits:?}"
            );
            docs.push(d);
        }
    }
    assert_eq!(docs.len(), 3);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));

    // Ranked one by one, the same query may give a document two of the three places.
    let chunks = build(config(ParentScoring::Chunks, Anchor::Off)).await;
    assert_eq!(
        chunks.retrieve(q, Selection::TopK(3)).await.unwrap().len(),
        3
    );

    // Mean scores every chunk of a candidate's document: both sentences of each document.
    let mean = build(config(ParentScoring::Mean, Anchor::Off)).await;
    let hits = mean.retrieve(q, Selection::TopK(2)).await.unwrap();
    let docs: HashSet<&str> = hits
        .iter()
        .map(|h| h.chunk.provenance.document_id.as_str())
        .collect();
    assert_eq!(docs.len(), 2);
    assert_eq!(hits.len(), 4, "two sentences per document: {hits:?}");
}

#[tokio::test]
async fn weight_zero_is_the_dense_order_of_the_candidates() {
    let rag = build(config(ParentScoring::Chunks, Anchor::Fixed { weight: 0.0 })).await;
    let enc = common::hashing();
    let q = "Who is the mayor of Town7?";
    let qv = enc.embed(&[q.to_string()]).await.unwrap();
    let hits = rag.retrieve(q, Selection::TopK(8)).await.unwrap();
    let texts: Vec<String> = hits.iter().map(|h| h.chunk.embedding_text()).collect();
    let cv = enc.embed(&texts).await.unwrap();
    let cos: Vec<f32> = cv
        .iter()
        .map(|row| row.iter().zip(qv.row(0)).map(|(a, b)| a * b).sum())
        .collect();
    assert_eq!(cos.len(), 8);
    assert!(
        cos.windows(2).all(|w| w[0] >= w[1] - 1e-5),
        "not in dense order: {cos:?}"
    );
}

#[tokio::test]
async fn the_anchor_is_chosen_on_held_out_questions_and_kept_on_save() {
    let anchor = Anchor::Selected {
        holdout: 0.3,
        max_questions: 100,
        min_questions: 5,
    };
    let rag = build(config(ParentScoring::Best, anchor)).await;
    let chosen = rag.stats().anchor.clone().expect("a selection");
    assert!(chosen.skipped.is_empty(), "{}", chosen.skipped);
    assert!(chosen.questions >= 5);
    assert_eq!(chosen.measured.len(), ANCHOR_WEIGHTS.len());
    assert_eq!(chosen.measured[0].0, 0.0);
    assert_eq!(chosen.versus_dense.len(), ANCHOR_WEIGHTS.len());
    assert_eq!(chosen.versus_dense[0], (0, 0));
    assert_eq!(
        chosen.weight,
        choose_anchor(&chosen.measured, &chosen.versus_dense)
    );
    let kept = chosen
        .measured
        .iter()
        .find(|m| m.0 == chosen.weight)
        .unwrap();
    assert!(kept.1 >= chosen.measured[0].1 && kept.2 >= chosen.measured[0].2);
    for &(_, r2, r5) in &chosen.measured {
        assert!((0.0..=100.0).contains(&r2) && (0.0..=100.0).contains(&r5));
        assert!(r5 >= r2 - 1e-9, "Recall@5 below Recall@2");
    }

    let dir = tempfile::tempdir().unwrap();
    rag.save(dir.path().join("index")).unwrap();
    let back = LpRag::load(dir.path().join("index"), common::hashing()).unwrap();
    assert_eq!(back.stats().anchor, Some(chosen));
    let q = "Which river does Town3 lie on?";
    assert_eq!(
        rag.retrieve(q, Selection::TopK(5)).await.unwrap(),
        back.retrieve(q, Selection::TopK(5)).await.unwrap()
    );

    // Too few questions to hold out: the predictor ranks alone, and the index says why.
    let few = Anchor::Selected {
        holdout: 0.01,
        max_questions: 100,
        min_questions: 50,
    };
    let rag = build(config(ParentScoring::Best, few)).await;
    let chosen = rag.stats().anchor.clone().unwrap();
    assert_eq!(chosen.weight, 1.0);
    assert!(chosen.skipped.contains("fewer"), "{}", chosen.skipped);

    // A bad anchor is refused before anything is paid for.
    let bad = LpRag::builder()
        .encoder(common::hashing())
        .config(config(ParentScoring::Best, Anchor::Fixed { weight: 2.0 }))
        .build(&towns())
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("anchor"), "{bad}");
}
