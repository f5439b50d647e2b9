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
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(G2Rag);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<G2Rag> {
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
        let (clusters, outliers) = cluster_stage(&emb, &config, &*progress, &mut stats).await?;
        let split = split_stage(&emb, &clusters, &config, &mut stats).await?;

        // 5. Merge decisions on every subgroup pair of a component.
        let t = std::time::Instant::now();
        let pairs = subgroup_pairs(&split);
        let judge = self
            .judge
            .or_else(|| self.llm.map(|m| default_judge(m, &config, &progress)));
        let merging = Merging {
            emb: &emb,
            chunks: &chunks,
            split: &split,
            pairs: &pairs,
            threshold: config.merge_threshold,
        };
        let verdicts = merging.verdicts(judge.as_ref(), &mut stats).await?;
        stats.merge_pairs = pairs.len();
        stats.merges_accepted = verdicts.iter().filter(|&&v| v).count();
        stats.llm_merge = judge.is_some();

        let communities = merging.communities(&verdicts, &outliers, config.outliers);
        stats.seconds_merge = t.elapsed().as_secs_f64();
        set_community_stats(&mut stats, &communities);
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

/// Step 2, HDBSCAN over the normalised `emb`: the clusters and the outliers, their counts
/// and the time taken written to `stats`.
async fn cluster_stage(
    emb: &Embeddings,
    config: &G2Config,
    progress: &dyn lprag_core::Progress,
    stats: &mut G2Stats,
) -> Result<(Vec<Vec<ChunkId>>, Vec<ChunkId>)> {
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
    Ok((clusters, outliers))
}

/// Steps 3–4: each cluster's k-NN graph, its components and their δ split into subgroups
/// (by cluster, component, subgroup), the counts and the time taken written to `stats`.
async fn split_stage(
    emb: &Embeddings,
    clusters: &[Vec<ChunkId>],
    config: &G2Config,
    stats: &mut G2Stats,
) -> Result<Vec<Vec<Vec<Vec<ChunkId>>>>> {
    let t = std::time::Instant::now();
    let split: Vec<Vec<Vec<Vec<ChunkId>>>> = {
        let (e, cl, k, delta) = (
            emb.clone(),
            clusters.to_vec(),
            config.knn_k,
            config.split_distance,
        );
        blocking(move || Ok(cl.iter().map(|m| split_cluster(&e, m, k, delta)).collect())).await?
    };
    stats.components = split.iter().map(Vec::len).sum();
    stats.subgroups = split.iter().flatten().map(Vec::len).sum();
    stats.seconds_graph = t.elapsed().as_secs_f64();
    Ok(split)
}

/// The judge made for the builder's `model`: lprag's default merge prompt with
/// `config`'s passage limits, reporting to `progress`.
fn default_judge(
    model: Arc<dyn ChatModel>,
    config: &G2Config,
    progress: &Arc<dyn lprag_core::Progress>,
) -> LlmMergeJudge {
    LlmMergeJudge::new(model)
        .max_passages(config.llm_max_chunks)
        .max_chars(config.llm_chunk_chars)
        .with_progress(progress.clone())
}

/// The community counts of `communities` written to `stats`.
fn set_community_stats(stats: &mut G2Stats, communities: &[Community]) {
    stats.communities = communities.len();
    stats.largest_community = communities
        .iter()
        .map(|c| c.members.len())
        .max()
        .unwrap_or(0);
}

/// What the merge decisions of step 5 are made on.
struct Merging<'a> {
    /// The chunks' normalised embeddings.
    emb: &'a Embeddings,
    /// The chunks, whose texts a judge is shown.
    chunks: &'a [Chunk],
    /// The subgroups by cluster and component.
    split: &'a [Vec<Vec<Vec<ChunkId>>>],
    /// The subgroup pairs to decide.
    pairs: &'a [SubgroupPair],
    /// The θ rule's threshold.
    threshold: f32,
}

impl Merging<'_> {
    /// One verdict per pair: the `judge`'s, the θ rule where it gave none (their count in
    /// `stats.merge_fallbacks`), or the θ rule's alone without a judge.
    async fn verdicts(
        &self,
        judge: Option<&LlmMergeJudge>,
        stats: &mut G2Stats,
    ) -> Result<Vec<bool>> {
        let (emb, split) = (self.emb, self.split);
        Ok(match judge {
            Some(judge) => {
                let shown = self.shown();
                let verdicts = judge.judge_all(&shown).await?;
                stats.merge_fallbacks = verdicts.iter().filter(|v| v.is_none()).count();
                self.pairs
                    .iter()
                    .zip(verdicts)
                    .map(|(&pair, v)| {
                        v.unwrap_or_else(|| theta_merges(emb, split, pair, self.threshold))
                    })
                    .collect()
            }
            None => self
                .pairs
                .iter()
                .map(|&pair| theta_merges(emb, split, pair, self.threshold))
                .collect(),
        })
    }

    /// The communities once the pairs whose `verdicts` are yes are merged, then, under
    /// [`OutlierPolicy::Singletons`], one per outlier, in order.
    fn communities(
        &self,
        verdicts: &[bool],
        outliers: &[ChunkId],
        policy: OutlierPolicy,
    ) -> Vec<Community> {
        let mut communities = merged_communities(self.emb, self.split, self.pairs, verdicts);
        if policy == OutlierPolicy::Singletons {
            for &c in outliers {
                communities.push(Community {
                    members: vec![c],
                    centroid: centroid(self.emb, &[c]),
                    cluster: None,
                });
            }
        }
        communities
    }

    /// The passages a judge is shown for each pair: each subgroup by its most central
    /// passages first.
    fn shown(&self) -> Vec<(Vec<&str>, Vec<&str>)> {
        let (emb, split) = (self.emb, self.split);
        let central = |g: &[ChunkId]| -> Vec<&str> {
            let c = centroid(emb, g);
            let mut order: Vec<(ChunkId, f32)> =
                g.iter().map(|&x| (x, dot(&c, emb.row(x)))).collect();
            order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            order
                .into_iter()
                .map(|(x, _)| self.chunks[x].text.as_str())
                .collect()
        };
        self.pairs
            .iter()
            .map(|&(ci, mi, r, s)| (central(&split[ci][mi][r]), central(&split[ci][mi][s])))
            .collect()
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
