//! GFM-RAG's configuration: the offline extractor, entity resolution, the GNN and its
//! training, retrieval, and the checks a configuration must pass.

use super::*;

/// GFM-RAG's settings; the defaults are the paper's where it gives one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GfmConfig {
    /// The GNN's shape. Default: d = 512, L = 6.
    pub model: GfmModelConfig,
    /// KG-completion pre-training. Default [`GfmTrainConfig::default`] (10 epochs,
    /// AdamW 5e-4, batch 4, α = 0.3).
    pub pretrain: GfmTrainConfig,
    /// Supervised fine-tuning on labelled questions (when there are any). Same default.
    pub finetune: GfmTrainConfig,
    /// Triples sampled for pre-training queries (each asked once, head or tail masked at
    /// random). Default 2,000; 0 skips pre-training.
    pub pretrain_queries: usize,
    /// Entity resolution: cosine at or above which two entities get an `equivalent` edge.
    /// Default 0.8 (the paper's).
    pub resolution_threshold: f32,
    /// Entity resolution looks at this many nearest entities per entity. Default 10.
    pub resolution_neighbors: usize,
    /// Query spans link to an entity whose name embedding has at least this cosine (when
    /// no entity has the same name). Default 0.8.
    pub link_threshold: f32,
    /// Entities nearest the whole question used as query entities when no span links.
    /// Default 5.
    pub fallback_entities: usize,
    /// Top entities T that rank documents. Default 20 (the paper's).
    pub top_entities: usize,
    /// Fill a top-k list that the entities cannot fill with dense chunk search. Default
    /// true.
    pub pad_with_dense: bool,
    /// Without labelled questions, fine-tune on this many synthetic questions, one per
    /// sampled chunk, from the builder's query generator (default: the offline heuristic
    /// one), the chunk's entities as targets. Default 500; 0 skips it.
    pub synthetic_queries: usize,
    /// Seed of weight initialisation and pre-training sampling. Default 0.
    pub seed: u64,
    /// Settings of the offline [`CooccurrenceExtractor`], used when the builder is given
    /// no other extractor.
    pub offline_extractor: CooccurrenceConfig,
    /// The longest query, in bytes of UTF-8, that `retrieve` and `explain` embed; a longer
    /// one is [`lprag_core::Error::InvalidInput`] before any work. Default
    /// [`lprag_core::DEFAULT_MAX_QUERY_BYTES`] (32 KiB, ≈ 8k tokens: far above an encoder's
    /// 512-token window).
    pub max_query_bytes: usize,
}

impl Default for GfmConfig {
    fn default() -> Self {
        Self {
            model: GfmModelConfig::default(),
            pretrain: GfmTrainConfig::default(),
            finetune: GfmTrainConfig::default(),
            pretrain_queries: 2000,
            resolution_threshold: 0.8,
            resolution_neighbors: 10,
            link_threshold: 0.8,
            fallback_entities: 5,
            top_entities: 20,
            pad_with_dense: true,
            synthetic_queries: 500,
            seed: 0,
            offline_extractor: CooccurrenceConfig::default(),
            max_query_bytes: lprag_core::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}

impl GfmConfig {
    /// The CPU setting measured in `docs/benchmarks.md`: a smaller network (d = 32,
    /// L = 3), 400 pre-training queries and 300 synthetic fine-tuning questions, one epoch
    /// each (everything else as the default). About 8 minutes on 1,890 passages on two
    /// cores.
    pub fn cpu() -> Self {
        let mut c = Self {
            model: GfmModelConfig {
                hidden: 32,
                layers: 3,
            },
            pretrain_queries: 400,
            synthetic_queries: 300,
            ..Self::default()
        };
        c.pretrain.epochs = 1;
        c.finetune.epochs = 1;
        c
    }

    /// Check the numbers.
    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        self.pretrain.validate()?;
        self.finetune.validate()?;
        for (name, v) in [
            ("resolution_threshold", self.resolution_threshold),
            ("link_threshold", self.link_threshold),
        ] {
            if !(-1.0..=1.0).contains(&v) {
                return Err(Error::invalid(
                    format!("GfmConfig.{name}"),
                    format!("{v} is not a cosine in [-1, 1]"),
                ));
            }
        }
        if self.top_entities == 0 {
            return Err(Error::invalid(
                "GfmConfig.top_entities",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}
