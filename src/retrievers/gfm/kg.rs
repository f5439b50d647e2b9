//! GFM-RAG's knowledge graph: triples extracted and checked, entities merged by name and
//! resolved by embedding, names embedded once; the pretraining queries drawn from it; and
//! the entity index that links a query's entities to it.

use super::*;

/// `extractor`'s findings in `chunks`, one per chunk (another count is an error naming the
/// extractor).
pub(crate) async fn extract_checked(
    extractor: &dyn TripleExtractor,
    chunks: &[Chunk],
    progress: &dyn lprag_core::Progress,
) -> Result<Vec<lprag_core::Extraction>> {
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    progress.start("extract triples", Some(chunks.len() as u64));
    let extractions = extractor.extract(chunks).await?;
    progress.finish("extract triples");
    if extractions.len() != chunks.len() {
        return Err(Error::invalid(
            format!("triple extractor {:?}", extractor.name()),
            format!(
                "returned {} extractions for {} chunks",
                extractions.len(),
                chunks.len()
            ),
        ));
    }
    Ok(extractions)
}

/// A knowledge graph with its embeddings, as a build or an update makes it.
pub(crate) struct Kg {
    pub(crate) kg: KgBuilder,
    pub(crate) entity_emb: Embeddings,
    pub(crate) equivalent_pairs: Vec<(u32, u32)>,
    pub(crate) edges: KgEdges,
    pub(crate) relation_names: Vec<String>,
    pub(crate) relation_emb: Embeddings,
}

/// The entity index of `kg`, whose names have the embeddings `entity_emb`.
pub(crate) fn entity_index(kg: &KgBuilder, entity_emb: &Embeddings) -> EntityIndex {
    EntityIndex {
        names: kg.names.clone(),
        keys: kg.ids.clone(),
        emb: entity_emb.clone(),
    }
}

/// The statistics of a graph and the network on it, as a build and an update count them:
/// `n_chunks` chunks, the graph `kg` with its relations and resolution pairs.
pub(crate) fn set_graph_stats(
    stats: &mut GfmStats,
    n_chunks: usize,
    kg: &KgBuilder,
    (relation_names, equivalent_pairs): (&[String], &[(u32, u32)]),
    model: &GfmModel,
) {
    stats.chunks = n_chunks;
    stats.entities = kg.names.len();
    stats.relations = relation_names.len();
    stats.triples = kg.triples.len() - equivalent_pairs.len();
    stats.equivalent_pairs = equivalent_pairs.len();
    stats.edges = model.edges().len();
}

/// Entity and relation embeddings already computed, by name (an update's old index).
type KnownNames<'a> = (&'a [String], &'a Embeddings);

/// The knowledge graph of `extractions` (one per chunk, by chunk id): entities merged by
/// name, their embeddings (names in `known_entities` reuse their row), entity resolution,
/// inverse edges, and the relations' embeddings (likewise reused from `known_relations`).
/// A build and an update both come here, so an update makes the graph a build on the
/// same chunks makes.
pub(crate) async fn knowledge_graph(
    extractions: &[lprag_core::Extraction],
    extractor: &str,
    encoder: &dyn Encoder,
    config: &GfmConfig,
    progress: &dyn lprag_core::Progress,
    known: Option<(KnownNames<'_>, KnownNames<'_>)>,
) -> Result<Kg> {
    let mut kg = merged_names(extractions);
    if kg.names.is_empty() {
        return Err(Error::EmptyCorpus(format!(
            "the triple extractor {extractor:?} found no entity in {} chunks",
            extractions.len()
        )));
    }
    let entity_emb = embed_names(
        encoder,
        &kg.names,
        known.map(|k| k.0),
        "embed entities",
        progress,
    )
    .await?;

    // Entity resolution among each entity's nearest names.
    let equivalent_pairs = if kg.names.len() > 1 {
        resolved_pairs(&entity_emb, config).await?
    } else {
        Vec::new()
    };
    if !equivalent_pairs.is_empty() {
        let eq = kg.relation(EQUIVALENT);
        for &(a, b) in &equivalent_pairs {
            kg.triples.insert((a, eq, b));
        }
    }
    let (edges, relation_names) = kg.edges()?;
    let relation_emb = embed_names(
        encoder,
        &relation_names,
        known.map(|k| k.1),
        "embed relations",
        progress,
    )
    .await?;
    Ok(Kg {
        kg,
        entity_emb,
        equivalent_pairs,
        edges,
        relation_names,
        relation_emb,
    })
}

/// The entities of `extractions` (one per chunk, by chunk id) merged by name, with their
/// mentions and triples.
fn merged_names(extractions: &[lprag_core::Extraction]) -> KgBuilder {
    let mut kg = KgBuilder::default();
    for (c, ex) in extractions.iter().enumerate() {
        for e in &ex.entities {
            kg.mention(e, c);
        }
        for t in &ex.triples {
            kg.triple(&t.subject, &t.relation, &t.object, c);
        }
    }
    kg
}

/// Entity resolution: the `(a, b)` pairs, `a < b`, ascending, of entities among each
/// other's `resolution_neighbors` nearest names (by `entity_emb`) with cosine at least
/// `resolution_threshold`.
async fn resolved_pairs(entity_emb: &Embeddings, config: &GfmConfig) -> Result<Vec<(u32, u32)>> {
    let (emb, k, th) = (
        entity_emb.clone(),
        config.resolution_neighbors.max(1),
        config.resolution_threshold,
    );
    let lists = blocking(move || Ok(lprag_graph::knn(&emb, k, &KnnBackend::default())?)).await?;
    let mut pairs = HashSet::new();
    for (a, list) in lists.iter().enumerate() {
        for &(b, cos) in list {
            if cos >= th {
                let (x, y) = (a.min(b as usize), a.max(b as usize));
                pairs.insert((x as u32, y as u32));
            }
        }
    }
    let mut pairs: Vec<(u32, u32)> = pairs.into_iter().collect();
    pairs.sort_unstable();
    Ok(pairs)
}

/// Embeddings of `names`, rows of `known` names reused and only the others embedded.
pub(crate) async fn embed_names(
    encoder: &dyn Encoder,
    names: &[String],
    known: Option<KnownNames<'_>>,
    stage: &str,
    progress: &dyn lprag_core::Progress,
) -> Result<Embeddings> {
    let Some((known_names, known_emb)) = known else {
        return embed_all(encoder, names, stage, progress).await;
    };
    let row: HashMap<&str, usize> = known_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let fresh: Vec<String> = names
        .iter()
        .filter(|n| !row.contains_key(n.as_str()))
        .cloned()
        .collect();
    let dim = known_emb.dim();
    if fresh.is_empty() {
        let rows: Vec<usize> = names.iter().map(|n| row[n.as_str()]).collect();
        return Ok(known_emb.select(&rows));
    }
    let new_emb = embed_all(encoder, &fresh, stage, progress).await?;
    if new_emb.dim() != dim {
        return Err(Error::DimensionMismatch {
            location: format!("encoder '{}' ({stage})", encoder.name()),
            expected: dim,
            actual: new_emb.dim(),
        });
    }
    let mut next = 0;
    let mut rows = Vec::with_capacity(names.len() * dim);
    for n in names {
        match row.get(n.as_str()) {
            Some(&i) => rows.extend_from_slice(known_emb.row(i)),
            None => {
                rows.extend_from_slice(new_emb.row(next));
                next += 1;
            }
        }
    }
    Embeddings::new(dim, rows)
}

/// KG-completion queries: the texts to embed and the examples (query vectors unset).
pub(crate) fn pretrain_queries(
    kg: &KgBuilder,
    model: &GfmModel,
    count: usize,
    seed: u64,
) -> (Vec<String>, Vec<GfmExample>) {
    let edges = model.edges();
    let forward = edges.len() / 2;
    if forward == 0 || count == 0 {
        return (Vec::new(), Vec::new());
    }
    // (head, relation) → [(tail, edge id)] and (relation, tail) → [(head, edge id)].
    let mut by_head: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
    let mut by_tail: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
    for i in 0..forward {
        let (s, r, o) = edges.edge(i);
        by_head.entry((s, r)).or_default().push((o, i as u32));
        by_tail.entry((r, o)).or_default().push((s, i as u32));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut picks: Vec<usize> = (0..forward).collect();
    picks.shuffle(&mut rng);
    let mut texts = Vec::new();
    let mut out = Vec::new();
    for &i in picks.iter().take(count) {
        let (s, r, o) = edges.edge(i);
        let rel = &kg.relation_names[r as usize];
        let (text, start, answers) = if rng.random_bool(0.5) {
            (
                format!("{} {rel}", kg.names[s as usize]),
                s,
                &by_head[&(s, r)],
            )
        } else {
            (
                format!("{rel} {}", kg.names[o as usize]),
                o,
                &by_tail[&(r, o)],
            )
        };
        let targets: Vec<u32> = answers.iter().map(|&(e, _)| e).collect();
        // Hide the asked edges and their inverses (stored `forward` places later).
        let hidden: Vec<u32> = answers
            .iter()
            .flat_map(|&(_, id)| [id, id + forward as u32])
            .collect();
        texts.push(text);
        out.push(GfmExample {
            query: Vec::new(),
            query_entities: vec![start],
            targets,
            hidden_edges: hidden,
        });
    }
    (texts, out)
}

/// Entity names, keys and embeddings, for linking queries.
pub(crate) struct EntityIndex {
    pub(crate) names: Vec<String>,
    pub(crate) keys: HashMap<String, u32>,
    pub(crate) emb: Embeddings,
}

impl EntityIndex {
    pub(crate) fn from_names(names: Vec<String>, emb: Embeddings) -> Self {
        let keys = names
            .iter()
            .enumerate()
            .map(|(i, n)| (entity_key(n), i as u32))
            .collect();
        Self { names, keys, emb }
    }

    /// The entity most similar to `v` and its cosine.
    pub(crate) fn nearest(&self, v: &[f32]) -> Option<(u32, f32)> {
        self.emb
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u32, lprag_core::cosine(v, row)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    }

    pub(crate) fn nearest_k(&self, v: &[f32], k: usize) -> Vec<u32> {
        let mut all: Vec<(u32, f32)> = self
            .emb
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u32, lprag_core::cosine(v, row)))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.into_iter().take(k).map(|(i, _)| i).collect()
    }
}

/// Query entities of `question` (see the module docs) and whether the fallback was used.
pub(crate) async fn link_query(
    index: &EntityIndex,
    encoder: &dyn Encoder,
    question: &str,
    question_emb: &[f32],
    config: &GfmConfig,
) -> Result<(Vec<u32>, bool)> {
    let spans = CooccurrenceExtractor::default().spans(question);
    let mut linked = Vec::new();
    let mut unmatched = Vec::new();
    for s in spans {
        match index.keys.get(&entity_key(&s)) {
            Some(&id) => linked.push(id),
            None => unmatched.push(s),
        }
    }
    if !unmatched.is_empty() {
        let emb = encoder.embed(&unmatched).await?;
        for row in emb.iter() {
            if let Some((id, cos)) = index.nearest(row) {
                if cos >= config.link_threshold {
                    linked.push(id);
                }
            }
        }
    }
    linked.sort_unstable();
    linked.dedup();
    if linked.is_empty() {
        return Ok((
            index.nearest_k(question_emb, config.fallback_entities.max(1)),
            true,
        ));
    }
    Ok((linked, false))
}
