//! Building a GFM-RAG index: chunks embedded, triples extracted, the knowledge graph
//! built (`kg`), the GNN pretrained and fine-tuned or its weights loaded, and the state
//! assembled.

use super::*;

impl GfmRag {
    /// A builder with the offline defaults.
    pub fn builder() -> GfmRagBuilder {
        GfmRagBuilder {
            inputs: BuildInputs::default(),
            extractor: None,
            labelled: Vec::new(),
            query_generator: None,
            weights: None,
            device: ComputeDevice::Cpu,
            config: None,
            checkpoints: None,
        }
    }
}

/// Builder of [`GfmRag`].
pub struct GfmRagBuilder {
    inputs: BuildInputs,
    extractor: Option<Arc<dyn TripleExtractor>>,
    labelled: Labelled,
    query_generator: Option<Arc<dyn QueryGenerator>>,
    weights: Option<std::path::PathBuf>,
    device: ComputeDevice,
    config: Option<GfmConfig>,
    checkpoints: Option<std::path::PathBuf>,
}

impl GfmRagBuilder {
    input_setters!();

    /// Who reads triples out of chunks (default: the offline [`CooccurrenceExtractor`];
    /// `lprag::llm::LlmTripleExtractor` for the paper's OpenIE).
    pub fn extractor(mut self, extractor: Arc<dyn TripleExtractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// Labelled `(question, gold document ids)` pairs for supervised fine-tuning.
    pub fn labelled(mut self, pairs: Labelled) -> Self {
        self.labelled = pairs;
        self
    }

    /// Who writes the synthetic fine-tuning questions when there are no labels (default:
    /// the offline [`HeuristicQueryGenerator`]; an `lprag::llm::LlmQueryGenerator` writes
    /// better ones).
    pub fn query_generator(mut self, generator: Arc<dyn QueryGenerator>) -> Self {
        self.query_generator = Some(generator);
        self
    }

    /// Start from weights saved by [`GfmRag::save`] (`dir/gfm.bpk`) of a model with the
    /// same shape and encoder width, e.g. trained on another corpus; training continues
    /// from them (set `pretrain_queries` to 0 and add no labels to use them as they are).
    pub fn weights(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.weights = Some(path.into());
        self
    }

    /// Where the GNN trains and runs (default [`ComputeDevice::Cpu`]).
    pub fn device(mut self, device: ComputeDevice) -> Self {
        self.device = device;
        self
    }

    /// Checkpoint pre-training and fine-tuning after every epoch in `dir/pretrain` and
    /// `dir/finetune` ([`lprag_model::gfm::GfmModel::train_resumable`]): a build
    /// interrupted during training and started again with the same documents and settings
    /// resumes after the last finished epoch (a finished stage returns at once). Default
    /// none. Triples written by an LLM are kept by the LLM's own response cache.
    pub fn checkpoints(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.checkpoints = Some(dir.into());
        self
    }

    /// The settings. Default: [`GfmConfig::cpu`] on the CPU device (the paper's d = 512,
    /// L = 6 network trains for hours on two cores) and [`GfmConfig::default`], the
    /// paper's setting, on any other device.
    pub fn config(mut self, config: GfmConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Chunk, extract, resolve entities, build the KG and train the GNN.
    pub async fn build(self, documents: &[Document]) -> Result<GfmRag> {
        self.build_docs(Docs::Slice(documents)).await
    }

    build_from!(GfmRag);

    /// [`Self::build`] and [`Self::build_from`]: the documents held or read in blocks.
    async fn build_docs(self, documents: Docs<'_>) -> Result<GfmRag> {
        let started = std::time::Instant::now();
        let config = self
            .config
            .clone()
            .unwrap_or_else(|| default_config(self.device));
        config.validate()?;
        // The device is checked before anything is paid for.
        let device = self.device.to_burn()?;
        let Started {
            progress,
            chunks,
            encoder,
            chunk_emb,
            ..
        } = self.inputs.start(documents).await?;

        let extractor = self.extractor.unwrap_or_else(|| {
            Arc::new(CooccurrenceExtractor::new(config.offline_extractor.clone()))
        });
        let stages = Stages {
            chunks: &chunks,
            encoder: &*encoder,
            config: &config,
            progress: &progress,
            checkpoints: self.checkpoints.as_deref(),
        };
        let (g, model, mut stats) = stages
            .graph_stage(&*extractor, &device, &self.weights)
            .await?;
        let supervision = (&self.labelled, self.query_generator);
        let model = stages.train_all(model, &g, supervision, &mut stats).await?;
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(GfmRag {
            state: Arc::new(GfmState {
                weights_file: None,
                version: GFM_FORMAT_VERSION,
                encoder: encoder.name().to_string(),
                encoder_fingerprint: encoder.fingerprint(),
                config,
                chunks,
                chunk_emb,
                entities: g.index.names.clone(),
                entity_emb: g.entity_emb,
                mentions: g.mentions,
                relations: g.relation_names,
                relation_emb: model.relations().clone(),
                edges: model.edges().clone(),
                extractions: Some(g.extractions),
                stats,
            }),
            runtime: GfmRuntime {
                index: Arc::new(g.index),
                model: Arc::new(model),
            },
            encoder,
        })
    }
}

/// The default settings on `device`: [`GfmConfig::cpu`] on the CPU, else the paper's.
fn default_config(device: ComputeDevice) -> GfmConfig {
    if device == ComputeDevice::Cpu {
        GfmConfig::cpu()
    } else {
        GfmConfig::default()
    }
}

/// What the graph stage of a build made besides the network and the statistics: the
/// extractions, the knowledge graph, and what the index keeps of them.
struct GraphStage {
    /// One extraction per chunk.
    extractions: Vec<lprag_core::Extraction>,
    /// The knowledge graph.
    kg: KgBuilder,
    /// The entities' name embeddings.
    entity_emb: Embeddings,
    /// The relations' names.
    relation_names: Vec<String>,
    /// The chunks that mention each entity.
    mentions: Vec<Vec<u32>>,
    /// The entity index.
    index: EntityIndex,
}

/// What the stages of a build share.
struct Stages<'a> {
    /// The chunks.
    chunks: &'a [Chunk],
    /// Embeds names and training queries.
    encoder: &'a dyn Encoder,
    /// The build's settings.
    config: &'a GfmConfig,
    /// Progress of extraction, embedding and training.
    progress: &'a Arc<dyn lprag_core::Progress>,
    /// The builder's checkpoint directory, if any.
    checkpoints: Option<&'a std::path::Path>,
}

/// Where fine-tuning questions come from: the builder's labelled pairs, else its query
/// generator (default: the heuristic one).
type Supervision<'a> = (&'a Labelled, Option<Arc<dyn QueryGenerator>>);

/// The untrained network on `edges` and `relation_emb` with `config`'s shape and seed on
/// `device`, started from the saved `weights` if any.
fn new_model(
    edges: KgEdges,
    relation_emb: Embeddings,
    config: &GfmConfig,
    device: &lprag_model::Device,
    weights: &Option<std::path::PathBuf>,
) -> Result<GfmModel> {
    let mut model = GfmModel::new(
        edges,
        relation_emb,
        config.model.clone(),
        config.seed,
        device,
    )?;
    if let Some(path) = weights {
        model.load_weights(path)?;
    }
    Ok(model)
}

/// Fine-tuning questions as `(question, gold chunks)`: the labelled ones, else
/// synthetic ones from `generator` (default: the heuristic one) when
/// `config.synthetic_queries` asks for some, else none.
async fn finetune_questions(
    labelled: &Labelled,
    generator: Option<Arc<dyn QueryGenerator>>,
    chunks: &[Chunk],
    config: &GfmConfig,
) -> Result<Vec<(String, Vec<usize>)>> {
    Ok(if !labelled.is_empty() {
        labelled_queries(chunks, labelled)?
            .into_iter()
            .map(|q| (q.text, q.chunk_ids))
            .collect()
    } else if config.synthetic_queries > 0 {
        let generator = generator.unwrap_or_else(|| {
            Arc::new(HeuristicQueryGenerator::new(
                HeuristicQueryGeneratorConfig {
                    queries_per_batch: 1,
                    seed: config.seed,
                    ..HeuristicQueryGeneratorConfig::default()
                },
            ))
        });
        synthetic_questions(&*generator, chunks, config).await?
    } else {
        Vec::new()
    })
}

impl Stages<'_> {
    /// Triples extracted by `extractor`, the knowledge graph built and the untrained
    /// network made on `device` (from the saved `weights` if any), with the graph's
    /// statistics.
    async fn graph_stage(
        &self,
        extractor: &dyn TripleExtractor,
        device: &lprag_model::Device,
        weights: &Option<std::path::PathBuf>,
    ) -> Result<(GraphStage, GfmModel, GfmStats)> {
        let (chunks, config) = (self.chunks, self.config);
        let progress = &**self.progress;
        let extractions = extract_checked(extractor, chunks, progress).await?;
        let graph = knowledge_graph(
            &extractions,
            extractor.name(),
            self.encoder,
            config,
            progress,
            None,
        )
        .await?;
        let model = new_model(graph.edges, graph.relation_emb, config, device, weights)?;
        let (kg, entity_emb, relation_names) = (graph.kg, graph.entity_emb, graph.relation_names);
        let mut stats = GfmStats::default();
        let counted = (&relation_names[..], &graph.equivalent_pairs[..]);
        set_graph_stats(&mut stats, chunks.len(), &kg, counted, &model);
        let mentions = kg.mentions_sorted();
        let index = entity_index(&kg, &entity_emb);
        let g = GraphStage {
            extractions,
            kg,
            entity_emb,
            relation_names,
            mentions,
            index,
        };
        Ok((g, model, stats))
    }

    /// Pre-training on `g`'s graph, then fine-tuning on the questions of `supervision`,
    /// the counts and reports written to `stats`.
    async fn train_all(
        &self,
        model: GfmModel,
        g: &GraphStage,
        (labelled, generator): Supervision<'_>,
        stats: &mut GfmStats,
    ) -> Result<GfmModel> {
        let model = self.pretrain(model, &g.kg, stats).await?;
        let questions = finetune_questions(labelled, generator, self.chunks, self.config).await?;
        self.finetune(model, &questions, g, labelled, stats).await
    }

    /// Pre-training: KG completion on `config.pretrain_queries` queries drawn from `kg`,
    /// its count and report written to `stats`; `model` as it was when there are none.
    async fn pretrain(
        &self,
        mut model: GfmModel,
        kg: &KgBuilder,
        stats: &mut GfmStats,
    ) -> Result<GfmModel> {
        let config = self.config;
        let (questions, pre) = pretrain_queries(kg, &model, config.pretrain_queries, config.seed);
        if !pre.is_empty() {
            let qemb = embed_all_queries(
                self.encoder,
                &questions,
                "embed pretraining queries",
                &**self.progress,
            )
            .await?;
            let examples: Vec<GfmExample> = pre
                .into_iter()
                .enumerate()
                .map(|(i, mut ex)| {
                    ex.query = qemb.row(i).to_vec();
                    ex
                })
                .collect();
            stats.pretrain_queries = examples.len();
            let (m, report) = self
                .train(model, examples, config.pretrain.clone(), "pretrain")
                .await?;
            model = m;
            stats.pretrain = Some(report);
        }
        Ok(model)
    }

    /// Fine-tuning on `questions` (`labelled` ones or synthetic, see the module docs)
    /// aimed at the entities `g`'s gold chunks mention, the counts, source and report
    /// written to `stats`; `model` as it was when there is nothing to train on.
    async fn finetune(
        &self,
        mut model: GfmModel,
        questions: &[(String, Vec<usize>)],
        g: &GraphStage,
        labelled: &Labelled,
        stats: &mut GfmStats,
    ) -> Result<GfmModel> {
        if !questions.is_empty() {
            let examples = finetune_examples(
                questions,
                (&g.mentions, self.chunks.len()),
                &g.index,
                self.encoder,
                self.config,
                &**self.progress,
            )
            .await?;
            stats.finetune_queries = examples.len();
            stats.finetune_source = if labelled.is_empty() {
                "synthetic".into()
            } else {
                "labelled".into()
            };
            if !examples.is_empty() {
                let (m, report) = self
                    .train(model, examples, self.config.finetune.clone(), "finetune")
                    .await?;
                model = m;
                stats.finetune = Some(report);
            }
        }
        Ok(model)
    }

    /// `model` trained on `examples` with `cfg` off the async runtime, as stage
    /// `"{stage} gfm"`, checkpointed in `checkpoints/{stage}` when there is a directory.
    async fn train(
        &self,
        mut model: GfmModel,
        examples: Vec<GfmExample>,
        cfg: GfmTrainConfig,
        stage: &'static str,
    ) -> Result<(GfmModel, TrainReport)> {
        let p = self.progress.clone();
        let dir = self.checkpoints.map(|d| d.join(stage));
        let label = format!("{stage} gfm");
        blocking(move || {
            let r = model.train_resumable(&examples, &cfg, &label, &*p, dir.as_deref())?;
            Ok((model, r))
        })
        .await
    }
}

/// Synthetic fine-tuning questions: one from each of `config.synthetic_queries` chunks
/// drawn with the configured seed, as `(question, gold chunks)`; a blank one is dropped,
/// one that links a chunk out of range is an error.
async fn synthetic_questions(
    generator: &dyn QueryGenerator,
    chunks: &[Chunk],
    config: &GfmConfig,
) -> Result<Vec<(String, Vec<usize>)>> {
    let mut rng = StdRng::seed_from_u64(config.seed ^ 0x5eed);
    let mut order: Vec<usize> = (0..chunks.len()).collect();
    order.shuffle(&mut rng);
    let batches: Vec<Vec<ChunkId>> = order
        .into_iter()
        .take(config.synthetic_queries)
        .map(|c| vec![c])
        .collect();
    generator
        .generate(chunks, &batches)
        .await?
        .into_iter()
        .filter(|q| !q.text.trim().is_empty())
        .map(|q| {
            if let Some(&c) = q.chunk_ids.iter().find(|&&c| c >= chunks.len()) {
                return Err(Error::invalid(
                    "GFM-RAG query generator output",
                    format!("query {:?} links to chunk {c}, out of range", q.text),
                ));
            }
            Ok((q.text, q.chunk_ids))
        })
        .collect::<Result<_>>()
}

/// Fine-tuning examples: each question embedded, linked to its entities, and aimed at the
/// entities its gold chunks mention (`mentions` by entity, over `n_chunks` chunks); a
/// question whose gold chunks mention none is dropped.
async fn finetune_examples(
    questions: &[(String, Vec<usize>)],
    (mentions, n_chunks): (&[Vec<u32>], usize),
    index: &EntityIndex,
    encoder: &dyn Encoder,
    config: &GfmConfig,
    progress: &dyn lprag_core::Progress,
) -> Result<Vec<GfmExample>> {
    let mut chunk_entities: Vec<Vec<u32>> = vec![Vec::new(); n_chunks];
    for (e, docs) in mentions.iter().enumerate() {
        for &c in docs {
            chunk_entities[c as usize].push(e as u32);
        }
    }
    let qtexts: Vec<String> = questions.iter().map(|(q, _)| q.clone()).collect();
    let qemb = embed_all_queries(encoder, &qtexts, "embed fine-tuning questions", progress).await?;
    let mut examples = Vec::new();
    for (k, (question, gold)) in questions.iter().enumerate() {
        let mut targets: Vec<u32> = gold
            .iter()
            .flat_map(|&c| chunk_entities[c].iter().copied())
            .collect();
        targets.sort_unstable();
        targets.dedup();
        if targets.is_empty() {
            continue;
        }
        let (query_entities, _) = link_query(index, encoder, question, qemb.row(k), config).await?;
        examples.push(GfmExample {
            query: qemb.row(k).to_vec(),
            query_entities,
            targets,
            hidden_edges: Vec::new(),
        });
    }
    Ok(examples)
}
