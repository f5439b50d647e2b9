//! Tests of the query generator.

use super::words::*;
use super::*;
use lprag_core::Provenance;

fn chunk(id: usize, title: &str, text: &str) -> Chunk {
    Chunk {
        id,
        text: text.into(),
        provenance: Provenance {
            document_id: format!("d{id}"),
            title: title.into(),
            span: 0..text.len(),
        },
        metadata: Default::default(),
    }
}

fn cands(title: &str, text: &str) -> Vec<String> {
    analyse(0, &chunk(0, title, text), 32)
        .cands
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn word_lists_are_sorted() {
    for l in [
        &AUX,
        &BE,
        &PREPOSITIONS,
        &CLAUSE_WORDS,
        &FUNCTION_WORDS,
        &NON_ENTITY_CAPS,
        &ENTITY_CONNECTORS,
        &TYPE_WORDS,
        &PERSON_NOUNS,
        &WHERE_PARTICIPLES,
        &DROP_OPENERS,
    ] {
        let l = l.words();
        assert!(l.windows(2).all(|w| w[0] < w[1]), "{l:?}");
    }
}

#[test]
fn date_place_and_life_questions() {
    let c = cands("Kim Il-chol", "He was born in Pyongyang in 1933.");
    assert!(
        c.contains(&"When was Kim Il-chol born in Pyongyang?".to_string()),
        "{c:?}"
    );
    assert!(
        c.contains(&"Where was Kim Il-chol born?".to_string()),
        "{c:?}"
    );
    let c = cands(
        "Hans Næss (sailor)",
        "Hans Henrik Stoermann-Næss (3 November 1886 – 10 December 1958) was a Norwegian sailor who competed in the 1920 Summer Olympics.",
    );
    assert!(
        c.contains(&"When was Hans Henrik Stoermann-Næss born?".to_string()),
        "{c:?}"
    );
    assert!(
        c.contains(&"When did Hans Henrik Stoermann-Næss die?".to_string()),
        "{c:?}"
    );
    assert!(
        c.contains(&"What kind of sailor was Hans Henrik Stoermann-Næss?".to_string()),
        "{c:?}"
    );
    let c = cands(
        "Machu Picchu",
        "Machu Picchu was declared a Peruvian Historic Sanctuary in 1981 and a UNESCO World Heritage Site in 1983.",
    );
    assert_eq!(
        c[0],
        "When was Machu Picchu declared a Peruvian Historic Sanctuary?"
    );
}

#[test]
fn agent_copula_and_count_questions() {
    let c = cands(
        "Person-centered therapy",
        "Person - centered therapy, also known as client - centered therapy, is a form of psychotherapy developed by psychologist Carl Rogers beginning in the 1940s.",
    );
    assert!(
        c.contains(&"Who developed Person-centered therapy?".to_string()),
        "{c:?}"
    );
    assert!(
        c.contains(&"What kind of psychotherapy is Person-centered therapy?".to_string()),
        "{c:?}"
    );
    assert!(c.contains(&"What is a form of psychotherapy developed by psychologist Carl Rogers beginning in the 1940s?".to_string()), "{c:?}");
    let c = cands(
        "Action Police CFTC",
        "Its general secretary is Michel Thooris.",
    );
    assert!(
        c.contains(&"Who is Action Police CFTC's general secretary?".to_string()),
        "{c:?}"
    );
    let c = cands("Publix", "In 2017, Publix had 35 stores in Tennessee.");
    assert!(
        c.contains(&"How many stores did Publix have in Tennessee in 2017?".to_string()),
        "{c:?}"
    );
    let c = cands(
        "Journal of Mathematical Physics",
        "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute of Physics.",
    );
    assert!(
        c.contains(
            &"Which institute published the Journal of Mathematical Physics monthly?".to_string()
        ),
        "{c:?}"
    );
    assert!(
        c.contains(&"What kind of journal is the Journal of Mathematical Physics?".to_string()),
        "{c:?}"
    );
    let c = cands(
        "Pakistan Super League",
        "The league was founded in Lahore on 9 September 2015 with five teams.",
    );
    assert!(
        c.contains(
            &"When was Pakistan Super League founded in Lahore with five teams?".to_string()
        ),
        "{c:?}"
    );
    assert!(
        c.contains(
            &"Pakistan Super League was founded in Lahore on 9 September 2015 with how many teams?"
                .to_string()
        ),
        "{c:?}"
    );
}

#[test]
fn shared_title_multi_hop() {
    let a = analyse(
        0,
        &chunk(
            0,
            "Journal of Mathematical Physics",
            "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute of Physics.",
        ),
        32,
    );
    let b = analyse(
        1,
        &chunk(
            1,
            "Journal of Mathematical Physics",
            "The current editor is Jan Philip Solovej from University of Copenhagen.",
        ),
        32,
    );
    let texts: Vec<&str> = b.cands.iter().map(|c| c.text.as_str()).collect();
    assert!(
        texts.contains(&"Who is the current editor of Journal of Mathematical Physics?"),
        "{texts:?}"
    );
    let multi: Vec<String> = multi_hop_candidates(&[&a, &b], 32)
        .into_iter()
        .filter(|(_, pair)| *pair == (0, 1))
        .map(|(c, _)| c.text)
        .collect();
    assert!(
        multi.contains(&"Who is the current editor of the journal that is a peer-reviewed journal published monthly by the American Institute of Physics?".to_string()),
        "{multi:?}"
    );
}

#[test]
fn questions_keep_the_title() {
    let c = cands(
        "Tully Falls",
        "The current editor is somebody from a university.",
    );
    assert!(c.iter().all(|q| q.contains("Tully Falls")), "{c:?}");
    assert!(c.iter().all(|q| q.ends_with('?')), "{c:?}");
}

#[tokio::test]
async fn batches_and_links() {
    let chunks = vec![
        chunk(0, "Journal of Psychotherapy Integration", "The Journal of Psychotherapy Integration is a quarterly journal published by the Society for the Exploration of Psychotherapy Integration."),
        chunk(1, "Society for the Exploration of Psychotherapy Integration", "The Society for the Exploration of Psychotherapy Integration was founded in 1983."),
        chunk(2, "Machu Picchu", "Machu Picchu was declared a Peruvian Historic Sanctuary in 1981."),
    ];
    let g = HeuristicQueryGenerator::default();
    let batches = vec![vec![0, 1], vec![2], vec![1, 0, 1]];
    let qs = g.generate(&chunks, &batches).await.unwrap();
    assert_eq!(qs.len(), 6);
    // Multi-hop: the society described through the journal it publishes.
    assert_eq!(
        qs[0].text,
        "When was the society by which the Journal of Psychotherapy Integration is a quarterly journal published founded?"
            .replace(" by which the Journal of Psychotherapy Integration is a quarterly journal published", " that published the Journal of Psychotherapy Integration")
    );
    assert_eq!(qs[0].chunk_ids, vec![0, 1]);
    assert_eq!(qs[0].answer.as_deref(), Some("1983"));
    assert_eq!(qs[1].chunk_ids.len(), 1);
    assert!(qs[2..4].iter().all(|q| q.chunk_ids == [2]));
    for (q, b) in qs.iter().zip([0usize, 0, 1, 1, 2, 2]) {
        assert!(q.chunk_ids.iter().all(|id| batches[b].contains(id)));
        assert!(q.text.ends_with('?') && !q.text.is_empty());
        assert!(chunks.iter().all(|c| c.text != q.text));
    }
    // Determinism, and seed sensitivity of the choice.
    assert_eq!(g.generate(&chunks, &batches).await.unwrap(), qs);
    // Written a group of batches at a time, as large inputs are: chunks named by
    // batches of several groups are analysed again, to the same questions.
    for group in [1, 2] {
        assert_eq!(g.write_groups(&chunks, &batches, group), qs);
    }
    let texts = |qs: &[SyntheticQuery]| qs.iter().map(|q| q.text.clone()).collect::<Vec<_>>();
    let mut differs = false;
    for seed in 1..20 {
        let g2 = HeuristicQueryGenerator::new(HeuristicQueryGeneratorConfig {
            seed,
            ..Default::default()
        });
        let q2 = g2.generate(&chunks, &batches).await.unwrap();
        assert_eq!(q2.len(), 6);
        differs |= texts(&q2) != texts(&qs);
    }
    assert!(differs);
}

#[test]
fn errors_are_typed() {
    let chunks = vec![chunk(0, "A", "Alpha is a letter.")];
    let g = HeuristicQueryGenerator::default();
    assert!(matches!(
        g.generate_sync(&chunks, &[vec![]]),
        Err(Error::InvalidInput { .. })
    ));
    let e = g.generate_sync(&chunks, &[vec![0], vec![3]]).unwrap_err();
    assert!(e.to_string().contains("batches[1]"), "{e}");
    let g0 = HeuristicQueryGenerator::new(HeuristicQueryGeneratorConfig {
        queries_per_batch: 0,
        ..Default::default()
    });
    assert!(g0.generate_sync(&chunks, &[vec![0]]).is_err());
    assert!(g.generate_sync(&chunks, &[]).unwrap().is_empty());
}

#[test]
fn odd_chunks_still_get_questions() {
    let chunks = vec![
        chunk(0, "", "..."),
        chunk(1, "", "東京は日本の首都です。"),
        chunk(2, "Ωmega", "x"),
        chunk(3, "", "Who is there?"),
    ];
    let g = HeuristicQueryGenerator::new(HeuristicQueryGeneratorConfig {
        queries_per_batch: 3,
        ..Default::default()
    });
    let qs = g
        .generate_sync(
            &chunks,
            &[vec![0], vec![1], vec![2], vec![3], vec![0, 1, 2, 3]],
        )
        .unwrap();
    assert!(qs.len() >= 5, "{qs:?}");
    for q in &qs {
        assert!(q.text.ends_with('?') && q.text.len() > 3, "{q:?}");
        assert!(chunks.iter().all(|c| c.text != q.text), "{q:?}");
    }
}
