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
        let started = std::time::Instant::now();
        let config = self.config.clone().unwrap_or_else(|| {
            if self.device == ComputeDevice::Cpu {
                GfmConfig::cpu()
            } else {
                GfmConfig::default()
            }
        });
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
        let extractions = extract_checked(&*extractor, &chunks, &*progress).await?;
        let Kg {
            kg,
            entity_emb,
            equivalent_pairs,
            edges,
            relation_names,
            relation_emb,
        } = knowledge_graph(
            &extractions,
            extractor.name(),
            &*encoder,
            &config,
            &*progress,
            None,
        )
        .await?;
        let mut model = GfmModel::new(
            edges,
            relation_emb,
            config.model.clone(),
            config.seed,
            &device,
        )?;
        if let Some(path) = &self.weights {
            model.load_weights(path)?;
        }

        let mut stats = GfmStats {
            chunks: chunks.len(),
            entities: kg.names.len(),
            relations: relation_names.len(),
            triples: kg.triples.len() - equivalent_pairs.len(),
            equivalent_pairs: equivalent_pairs.len(),
            edges: model.edges().len(),
            ..GfmStats::default()
        };
        let mentions = kg.mentions_sorted();
        let index = EntityIndex {
            names: kg.names.clone(),
            keys: kg.ids.clone(),
            emb: entity_emb.clone(),
        };

        // Pre-training: KG completion.
        let (questions, pre) = pretrain_queries(&kg, &model, config.pretrain_queries, config.seed);
        if !pre.is_empty() {
            let qemb = embed_all_queries(
                &*encoder,
                &questions,
                "embed pretraining queries",
                &*progress,
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
            let (cfg, p) = (config.pretrain.clone(), progress.clone());
            let dir = self.checkpoints.as_ref().map(|d| d.join("pretrain"));
            let (m, report) = blocking(move || {
                let r =
                    model.train_resumable(&examples, &cfg, "pretrain gfm", &*p, dir.as_deref())?;
                Ok((model, r))
            })
            .await?;
            model = m;
            stats.pretrain = Some(report);
        }

        // Fine-tuning: labelled questions, else synthetic ones (see the module docs).
        let questions: Vec<(String, Vec<usize>)> = if !self.labelled.is_empty() {
            labelled_queries(&chunks, &self.labelled)?
                .into_iter()
                .map(|q| (q.text, q.chunk_ids))
                .collect()
        } else if config.synthetic_queries > 0 {
            let generator = self.query_generator.unwrap_or_else(|| {
                Arc::new(HeuristicQueryGenerator::new(
                    HeuristicQueryGeneratorConfig {
                        queries_per_batch: 1,
                        seed: config.seed,
                        ..HeuristicQueryGeneratorConfig::default()
                    },
                ))
            });
            synthetic_questions(&*generator, &chunks, &config).await?
        } else {
            Vec::new()
        };
        if !questions.is_empty() {
            let examples = finetune_examples(
                &questions,
                (&mentions, chunks.len()),
                &index,
                &*encoder,
                &config,
                &*progress,
            )
            .await?;
            stats.finetune_queries = examples.len();
            stats.finetune_source = if self.labelled.is_empty() {
                "synthetic".into()
            } else {
                "labelled".into()
            };
            if !examples.is_empty() {
                let (cfg, p) = (config.finetune.clone(), progress.clone());
                let dir = self.checkpoints.as_ref().map(|d| d.join("finetune"));
                let (m, report) = blocking(move || {
                    let r = model.train_resumable(
                        &examples,
                        &cfg,
                        "finetune gfm",
                        &*p,
                        dir.as_deref(),
                    )?;
                    Ok((model, r))
                })
                .await?;
                model = m;
                stats.finetune = Some(report);
            }
        }
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
                entities: index.names.clone(),
                entity_emb,
                mentions,
                relations: relation_names,
                relation_emb: model.relations().clone(),
                edges: model.edges().clone(),
                extractions: Some(extractions),
                stats,
            }),
            runtime: GfmRuntime {
                index: Arc::new(index),
                model: Arc::new(model),
            },
            encoder,
        })
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
