//! Building a G²RAG index: chunks embedded, clustered into communities (`cluster`),
//! merged, and the state assembled.

use super::*;

impl G2Rag {
    /// A builder with the offline defaults (no LLM: the θ rule merges).
    pub fn builder() -> G2RagBuilder {
        G2RagBuilder {
            inputs: BuildInputs::default(),
            llm: None,
            judge: None,
            config: G2Config::default(),
        }
    }
}

/// Assembles a [`G2Rag`].
pub struct G2RagBuilder {
    inputs: BuildInputs,
    llm: Option<Arc<dyn ChatModel>>,
    judge: Option<LlmMergeJudge>,
    config: G2Config,
}

impl G2RagBuilder {
    input_setters!(G2Config);

    /// Let this model decide the merges (the paper's M_LLM) with lprag's default merge
    /// prompt, `llm_max_chunks` passages of `llm_chunk_chars` characters per subgroup.
    /// One call per subgroup pair; wrap the model in a
    /// [`CachedChat`](lprag_llm::CachedChat) so a rebuild pays nothing. Without a model the
    /// θ rule decides.
    pub fn llm(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.llm = Some(model);
        self
    }

    /// Let this judge decide the merges, used as given (custom prompts, concurrency,
    /// token meter); it overrides [`G2RagBuilder::llm`].
    pub fn merge_judge(mut self, judge: LlmMergeJudge) -> Self {
        self.judge = Some(judge);
        self
    }

    /// Chunk, embed, cluster, split, merge: the communities.
    pub async fn build(self, documents: &[Document]) -> Result<G2Rag> {
        let config = self.config.clone();
        config.validate()?;
        let Started {
            progress,
            at: started,
            chunks,
            encoder,
            chunk_emb: mut emb,
            embed_seconds,
            ..
        } = self.inputs.start(documents).await?;
        emb.normalize();
        let mut stats = G2Stats {
            chunks: chunks.len(),
            seconds_embed: embed_seconds,
            ..G2Stats::default()
        };

        // 2. HDBSCAN.
        let t = std::time::Instant::now();
        progress.start("HDBSCAN", None);
        let labels = {
            let (e, c) = (emb.clone(), config.clone());
            blocking(move || hdbscan_clusters(&e, &c)).await?
        };
        progress.finish("HDBSCAN");
        let (clusters, outliers) = group_labels(&labels);
        stats.clusters = clusters.len();
        stats.outliers = outliers.len();
        stats.seconds_cluster = t.elapsed().as_secs_f64();

        // 3–4. k-NN graphs, components, δ split.
        let t = std::time::Instant::now();
        let split: Vec<Vec<Vec<Vec<ChunkId>>>> = {
            let (e, cl, k, delta) = (
                emb.clone(),
                clusters.clone(),
                config.knn_k,
                config.split_distance,
            );
            blocking(move || Ok(cl.iter().map(|m| split_cluster(&e, m, k, delta)).collect()))
                .await?
        };
        stats.components = split.iter().map(Vec::len).sum();
        stats.subgroups = split.iter().flatten().map(Vec::len).sum();
        stats.seconds_graph = t.elapsed().as_secs_f64();

        // 5. Merge decisions on every subgroup pair of a component.
        let t = std::time::Instant::now();
        let pairs = subgroup_pairs(&split);
        let judge = self.judge.or_else(|| {
            self.llm.map(|m| {
                LlmMergeJudge::new(m)
                    .max_passages(config.llm_max_chunks)
                    .max_chars(config.llm_chunk_chars)
                    .with_progress(progress.clone())
            })
        });
        let verdicts: Vec<bool> = match &judge {
            Some(judge) => {
                // Each subgroup shown by its most central passages first.
                let central = |g: &[ChunkId]| -> Vec<&str> {
                    let c = centroid(&emb, g);
                    let mut order: Vec<(ChunkId, f32)> =
                        g.iter().map(|&x| (x, dot(&c, emb.row(x)))).collect();
                    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    order
                        .into_iter()
                        .map(|(x, _)| chunks[x].text.as_str())
                        .collect()
                };
                let shown: Vec<(Vec<&str>, Vec<&str>)> = pairs
                    .iter()
                    .map(|&(ci, mi, r, s)| (central(&split[ci][mi][r]), central(&split[ci][mi][s])))
                    .collect();
                let verdicts = judge.judge_all(&shown).await?;
                stats.merge_fallbacks = verdicts.iter().filter(|v| v.is_none()).count();
                pairs
                    .iter()
                    .zip(verdicts)
                    .map(|(&pair, v)| {
                        v.unwrap_or_else(|| {
                            theta_merges(&emb, &split, pair, config.merge_threshold)
                        })
                    })
                    .collect()
            }
            None => pairs
                .iter()
                .map(|&pair| theta_merges(&emb, &split, pair, config.merge_threshold))
                .collect(),
        };
        stats.merge_pairs = pairs.len();
        stats.merges_accepted = verdicts.iter().filter(|&&v| v).count();
        stats.llm_merge = judge.is_some();

        let mut communities = merged_communities(&emb, &split, &pairs, &verdicts);
        if config.outliers == OutlierPolicy::Singletons {
            for &c in &outliers {
                communities.push(Community {
                    members: vec![c],
                    centroid: centroid(&emb, &[c]),
                    cluster: None,
                });
            }
        }
        stats.seconds_merge = t.elapsed().as_secs_f64();
        stats.communities = communities.len();
        stats.largest_community = communities
            .iter()
            .map(|c| c.members.len())
            .max()
            .unwrap_or(0);
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(G2Rag {
            runtime: (),
            state: Arc::new(G2State {
                version: G2_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                config,
                chunks,
                chunk_emb: emb,
                communities,
                outliers,
                stats,
            }),
            encoder,
        })
    }
}

/// A subgroup pair: cluster, component, and the two subgroups of that component.
type SubgroupPair = (usize, usize, usize, usize);

/// HDBSCAN's labels as clusters (the non-empty ones, in label order, members ascending)
/// and outliers (the noise, ascending).
fn group_labels(labels: &[Option<usize>]) -> (Vec<Vec<ChunkId>>, Vec<ChunkId>) {
    let n_clusters = labels.iter().flatten().map(|&l| l + 1).max().unwrap_or(0);
    let mut clusters: Vec<Vec<ChunkId>> = vec![Vec::new(); n_clusters];
    let mut outliers = Vec::new();
    for (c, l) in labels.iter().enumerate() {
        match l {
            Some(l) => clusters[*l].push(c),
            None => outliers.push(c),
        }
    }
    clusters.retain(|c| !c.is_empty());
    (clusters, outliers)
}

/// Every pair of subgroups within one component of `split` (by cluster, then component):
/// the merge decisions to make.
fn subgroup_pairs(split: &[Vec<Vec<Vec<ChunkId>>>]) -> Vec<SubgroupPair> {
    let mut pairs = Vec::new();
    for (ci, comps) in split.iter().enumerate() {
        for (mi, subs) in comps.iter().enumerate() {
            for r in 0..subs.len() {
                for s in r + 1..subs.len() {
                    pairs.push((ci, mi, r, s));
                }
            }
        }
    }
    pairs
}

/// The communities of `split` once the `pairs` whose verdict is yes are merged, each with
/// its centroid, in cluster and component order.
fn merged_communities(
    emb: &Embeddings,
    split: &[Vec<Vec<Vec<ChunkId>>>],
    pairs: &[SubgroupPair],
    verdicts: &[bool],
) -> Vec<Community> {
    let mut communities = Vec::new();
    for (ci, comps) in split.iter().enumerate() {
        for (mi, subs) in comps.iter().enumerate() {
            let yes: Vec<(usize, usize)> = pairs
                .iter()
                .zip(verdicts)
                .filter(|&(&(c, m, _, _), &v)| v && c == ci && m == mi)
                .map(|(&(_, _, r, s), _)| (r, s))
                .collect();
            for members in merge_groups(subs, &yes) {
                communities.push(Community {
                    centroid: centroid(emb, &members),
                    members,
                    cluster: Some(ci),
                });
            }
        }
    }
    communities
}

/// The θ rule: merge the two subgroups of `pair` when their centroids' cosine is at least
/// `threshold`.
fn theta_merges(
    emb: &Embeddings,
    split: &[Vec<Vec<Vec<ChunkId>>>],
    (ci, mi, r, s): SubgroupPair,
    threshold: f32,
) -> bool {
    let a = centroid(emb, &split[ci][mi][r]);
    let b = centroid(emb, &split[ci][mi][s]);
    dot(&a, &b) >= threshold
}
