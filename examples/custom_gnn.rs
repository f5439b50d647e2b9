//! # A custom GNN link predictor in burn
//!
//! Write the model as a burn module, implement [`LinkModel`] (how many message-passing
//! hops it reads, how it encodes nodes, how it scores a pair), and let
//! [`BurnLinkPredictor`] train it with the library's trainer (negatives, target masking,
//! validation and early stopping) inside an LP-RAG index. The model here is a two-layer
//! GraphSAGE (mean aggregation) with a Hadamard-product decoder.
//!
//! ```text
//! cargo run --example custom_gnn
//! ```

#[path = "data/logging.rs"]
mod logging;
#[path = "data/mini_corpus.rs"]
mod mini_corpus;

use lprag::extend::{BurnLinkPredictor, GraphBatch, LinkModel, Pairs};
use lprag::model::burn;
use lprag::{LinkPredictor, LpRag, Retriever, Selection, TrainConfig};

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};

#[derive(Module, Debug)]
struct Sage {
    self1: Linear,
    nbr1: Linear,
    self2: Linear,
    nbr2: Linear,
    decoder: Linear,
}

impl Sage {
    fn new(d_in: usize, device: &Device) -> Self {
        let linear = |a, b| LinearConfig::new(a, b).init(device);
        Self {
            self1: linear(d_in, 64),
            nbr1: linear(d_in, 64),
            self2: linear(64, 64),
            nbr2: linear(64, 64),
            decoder: linear(64, 1),
        }
    }
}

impl LinkModel for Sage {
    fn hops(&self) -> usize {
        2
    }

    /// `h = W_self·x + W_nbr·mean(neighbours)`, twice, ReLU between.
    fn encode(&self, x: Tensor<2>, graph: &GraphBatch) -> Tensor<2> {
        let h = relu(self.self1.forward(x.clone()) + self.nbr1.forward(graph.mean(x)));
        self.self2.forward(h.clone()) + self.nbr2.forward(graph.mean(h))
    }

    /// `logit = w·(h_q ⊙ h_c) + b`.
    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
        let n = pairs.len();
        self.decoder.forward(pairs.hadamard(h)).reshape([n])
    }
}

#[tokio::main]
async fn main() -> Result<(), lprag::Report> {
    logging::init();
    let docs = mini_corpus::documents();
    let train = TrainConfig {
        epochs: 40,
        ..TrainConfig::default()
    };
    let predictor = BurnLinkPredictor::new("sage-2", train, Sage::new);
    let rag = LpRag::builder()
        .predictor(Box::new(predictor))
        .build(&docs)
        .await?;
    let report = &rag.stats().train;
    println!(
        "trained '{}': {} epochs, loss {:.3} → {:.3}",
        rag.predictor().name(),
        report.epochs_run,
        report.train_loss.first().unwrap_or(&f32::NAN),
        report.train_loss.last().unwrap_or(&f32::NAN),
    );
    let question = "Who invented dynamite?";
    let hits = rag.retrieve(question, Selection::TopK(3)).await?;
    println!("Q: {question}");
    for hit in &hits {
        println!("  {:.3}  [{}]", hit.score, hit.chunk.provenance.title);
    }

    // Save, then reopen with the same constructor.
    let dir = std::env::temp_dir().join(format!("lprag-custom-gnn-{}", std::process::id()));
    rag.save(&dir)?;
    let reopened = LpRag::load_with(&dir, rag.encoder().clone(), |dir, graph| {
        let p = BurnLinkPredictor::restore(dir, graph, Sage::new)?;
        Ok(Box::new(p) as Box<dyn LinkPredictor>)
    })?;
    let again = reopened.retrieve(question, Selection::TopK(3)).await?;
    let same = hits
        .iter()
        .zip(&again)
        .all(|(a, b)| a.chunk.id == b.chunk.id);
    println!("reopened index ranks the same: {same}");
    std::fs::remove_dir_all(&dir).ok();
    assert!(same, "the reopened index ranked differently");
    Ok(())
}
