//! The ranking model of an index: the built-in predictors, a user's predictor or scorer,
//! and where each came from.

use super::anchor::{hold_out, select_weight};
use super::search::RankView;
use super::{
    Anchor, AnchorSelection, BuiltinPredictor, CandidateSearch, IndexStats, LpRagConfig, Manifest,
    GRAPH, PREDICTOR_DIR,
};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lprag_core::{
    ChunkId, Error, LinkGraph, LinkPredictor, LinkScorer, Progress, Result, ScoreContext,
    TrainReport,
};

use lprag_model::ComputeDevice;
use serde::{Deserialize, Serialize};

use crate::retrievers::common::{blocking, Parents};

/// The ranking model a builder was given.
pub(super) enum ModelChoice {
    Predictor(Box<dyn LinkPredictor>),
    Scorer(Arc<dyn LinkScorer>),
    /// The built-in predictor of a saved index, attached without training.
    Transfer(PathBuf),
}

/// Which kind of ranking model an index was built with (recorded in its manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PredictorSource {
    /// The built-in [`GnnLinkPredictor`] ([`LpRag::open`], [`LpRag::load`]).
    #[default]
    Builtin,
    /// A custom [`LinkPredictor`] ([`LpRag::load_with`]).
    Custom,
    /// A training-free [`LinkScorer`] ([`LpRag::load_with_scorer`]).
    Scorer,
}

impl PredictorSource {
    /// How to reopen an index built with this kind of model.
    pub(super) fn how_to_load(self) -> &'static str {
        match self {
            PredictorSource::Builtin => "LpRag::open or LpRag::load",
            PredictorSource::Custom => "LpRag::load_with",
            PredictorSource::Scorer => "LpRag::load_with_scorer",
        }
    }
}

/// A [`LinkScorer`] as the index's [`LinkPredictor`]: it shares the index's graph and
/// adjacency lists and has nothing to train or save.
pub(super) struct ScorerPredictor {
    pub(super) scorer: Arc<dyn LinkScorer>,
    pub(super) graph: Arc<LinkGraph>,
    pub(super) search: Arc<CandidateSearch>,
}

impl ScorerPredictor {
    fn check(&self, query: &[f32], candidates: &[ChunkId]) -> Result<()> {
        lprag_core::check_score_args(
            &format!("LinkScorer '{}'", self.scorer.name()),
            self.graph.features.dim(),
            self.graph.num_chunks,
            query,
            candidates,
        )
    }
}

impl LinkPredictor for ScorerPredictor {
    fn name(&self) -> &str {
        self.scorer.name()
    }

    /// Nothing to train: the scorer takes `graph` as its graph.
    fn fit(&mut self, graph: &LinkGraph, _progress: &dyn Progress) -> Result<TrainReport> {
        self.attach(graph)?;
        Ok(TrainReport::default())
    }

    fn attach(&mut self, graph: &LinkGraph) -> Result<()> {
        graph.validate()?;
        self.search = Arc::new(CandidateSearch::exact(graph));
        self.graph = Arc::new(graph.clone());
        Ok(())
    }

    fn copies_on_attach(&self) -> bool {
        true
    }

    fn attach_copy(&self, graph: &LinkGraph) -> Option<Result<Box<dyn LinkPredictor>>> {
        let mut copy = ScorerPredictor {
            scorer: self.scorer.clone(),
            graph: self.graph.clone(),
            search: self.search.clone(),
        };
        Some(
            copy.attach(graph)
                .map(|()| Box::new(copy) as Box<dyn LinkPredictor>),
        )
    }

    fn score(&self, query: &[f32], candidates: &[ChunkId]) -> Result<Vec<f32>> {
        self.score_near(query, &[], candidates)
    }

    fn score_near(
        &self,
        query: &[f32],
        nearest: &[ChunkId],
        candidates: &[ChunkId],
    ) -> Result<Vec<f32>> {
        self.check(query, candidates)?;
        let ctx = ScoreContext::new(&self.graph, self.search.neighbour_lists(), nearest);
        let logits = self.scorer.score(&ctx, query, candidates)?;
        if logits.len() != candidates.len() {
            return Err(Error::DimensionMismatch {
                location: format!("LinkScorer '{}' (logits)", self.scorer.name()),
                expected: candidates.len(),
                actual: logits.len(),
            });
        }
        Ok(logits)
    }

    /// A scorer keeps no state of its own: only its name is written.
    fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("scorer.json");
        let body = serde_json::json!({ "scorer": self.scorer.name() }).to_string();
        std::fs::write(&path, body).map_err(|e| Error::io(&path, e))
    }
}

/// The last stage of a build: the ranking model the builder was given (trained here
/// unless it is a scorer or a transferred predictor).
pub(super) struct RankModel<'a> {
    pub(super) model: Option<ModelChoice>,
    /// The transferred predictor's index and manifest (checked before the other stages).
    pub(super) transfer: Option<(PathBuf, Manifest)>,
    pub(super) config: &'a LpRagConfig,
    pub(super) work_dir: Option<&'a Path>,
    /// Where the built-in GNN keeps its cached representations (the work directory's
    /// file, with the features on disk); `None`: on the heap.
    pub(super) representations: Option<PathBuf>,
    pub(super) device: ComputeDevice,
    /// The chunks' documents (for the anchor's passage recall).
    pub(super) parents: Arc<Parents>,
}

impl RankModel<'_> {
    /// Train (on a blocking thread), attach or wrap the model on `graph`; a training's
    /// report goes into `stats`.
    pub(super) async fn make(
        self,
        graph: &Arc<LinkGraph>,
        search: &Arc<CandidateSearch>,
        progress: &Arc<dyn Progress>,
        stats: &mut IndexStats,
    ) -> Result<(Arc<dyn LinkPredictor>, PredictorSource)> {
        let device = self.device;
        match self.model {
            Some(ModelChoice::Scorer(scorer)) => Ok((
                Arc::new(ScorerPredictor {
                    scorer,
                    graph: graph.clone(),
                    search: search.clone(),
                }),
                PredictorSource::Scorer,
            )),
            Some(ModelChoice::Transfer(_)) => {
                let Some((dir, manifest)) = self.transfer else {
                    return Err(Error::invalid(
                        "LpRagBuilder::transfer_from",
                        "the source index was not checked",
                    ));
                };
                let graph = graph.clone();
                let predictor = blocking(move || {
                    let source_graph = lprag_graph::load_link_graph(dir.join(GRAPH))?;
                    let mut p = BuiltinPredictor::make_restored(
                        &manifest.config,
                        &dir.join(PREDICTOR_DIR),
                        &source_graph,
                        device,
                        None,
                    )?;
                    p.attach(&graph)?;
                    Ok(p)
                })
                .await?;
                Ok((Arc::from(predictor), PredictorSource::Builtin))
            }
            choice => {
                let (mut predictor, source) = match choice {
                    Some(ModelChoice::Predictor(p)) => (p, PredictorSource::Custom),
                    _ => (
                        BuiltinPredictor::make(
                            self.config,
                            self.work_dir,
                            device,
                            self.representations.as_deref(),
                        )?,
                        PredictorSource::Builtin,
                    ),
                };
                // Under a selected anchor, a share of the questions is left out of training
                // to choose the anchor's weight on.
                let selected = matches!(self.config.anchor, Anchor::Selected { .. });
                let (train, questions, skipped) =
                    match hold_out(graph, &self.config.anchor, self.config.seed) {
                        Ok((g, q)) => (Arc::new(g), q, String::new()),
                        Err(why) => (graph.clone(), Vec::new(), why),
                    };
                let fit_progress = progress.clone();
                let (predictor, report) = blocking(move || {
                    let report = predictor.fit(&train, &*fit_progress)?;
                    Ok((predictor, report))
                })
                .await?;
                stats.train = report;
                let predictor: Arc<dyn LinkPredictor> = Arc::from(predictor);
                if selected {
                    stats.anchor = Some(if questions.is_empty() {
                        AnchorSelection {
                            weight: 1.0,
                            skipped,
                            ..AnchorSelection::default()
                        }
                    } else {
                        let view = RankView {
                            graph: graph.clone(),
                            search: search.clone(),
                            predictor: predictor.clone(),
                            parents: self.parents.clone(),
                            config: self.config.clone(),
                        };
                        select_weight(view, questions, progress.clone()).await?
                    });
                }
                Ok((predictor, source))
            }
        }
    }
}
