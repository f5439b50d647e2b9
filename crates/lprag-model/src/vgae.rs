//! VGAE (Kipf & Welling 2016, "Variational Graph Auto-Encoders"), one of LP-RAG's Table 6
//! predictors, written as a [`LinkModel`] and trained by [`BurnLinkPredictor`].
//!
//! Encoder: `h = ReLU(GCN(x) W₁)`, then `μ = GCN(h) W_μ` and `log σ = GCN(h) W_σ` (GCN with
//! self loops, `D^-½(A+I)D^-½`, weighted). Training samples `z = μ + σ ⊙ ε`, `ε ~ N(0, I)`,
//! and adds `KL(q(z|x) ‖ N(0, I)) / N` to the link loss, as PyG's `VGAE` example does;
//! scoring uses `z = μ`. Decoder: `⟨z_i, z_j⟩`.
//!
//! # Shapes
//! `x: [N, d_in]`, `h: [N, 2·hidden]`, `μ, log σ, z: [N, hidden]`, logits `[P]`

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::link_model::{BurnLinkPredictor, GraphBatch, LinkModel, Pairs};

/// Most `log σ` may reach (keeps `σ²` finite in the KL term; PyG clamps at the same value).
const MAX_LOGSTD: f32 = 10.0;

/// Sizes of a [`Vgae`]. Default: LP-RAG Table 8 (2 layers, hidden 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VgaeConfig {
    /// Width of `μ` and `σ` (Table 8: 32); the first layer is twice as wide, as in the
    /// reference implementation.
    pub hidden: usize,
}

impl VgaeConfig {
    /// Check the sizes (widths in `1..=MAX_HIDDEN`, at most `MAX_LAYERS` layers); the
    /// predictor checks them before training and when restoring.
    pub fn validate(&self) -> lprag_core::Result<()> {
        crate::config::check_sizes("VgaeConfig", self.hidden, 2)
    }

    /// A lower bound on the weights of a [`Vgae`] for `d_in`-wide features (its matrices;
    /// biases are the rest), saturating: restoring compares it with the weights file's
    /// size before the model is built.
    pub fn min_parameters(&self, d_in: usize) -> u128 {
        let (d, h) = (d_in as u128, self.hidden.max(1) as u128);
        // base: d × 2h; μ and log σ: 2h × h each.
        d.saturating_mul(h)
            .saturating_mul(2)
            .saturating_add(h.saturating_mul(h).saturating_mul(4))
    }
}

impl Default for VgaeConfig {
    fn default() -> Self {
        Self { hidden: 32 }
    }
}

/// The VGAE link model (see the module documentation).
#[derive(Module, Debug)]
pub struct Vgae {
    base: Linear,
    mu: Linear,
    logstd: Linear,
}

impl Vgae {
    /// A fresh model for `d_in`-wide features on `device`.
    pub fn new(d_in: usize, config: &VgaeConfig, device: &Device) -> Self {
        let h = config.hidden.max(1);
        Self {
            base: LinearConfig::new(d_in, 2 * h).init(device),
            mu: LinearConfig::new(2 * h, h).init(device),
            logstd: LinearConfig::new(2 * h, h).init(device),
        }
    }

    /// `(μ, log σ)` of every node.
    ///
    /// # Shapes
    /// `x: [N, d_in] → ([N, hidden], [N, hidden])`
    pub fn moments(&self, x: Tensor<2>, graph: &GraphBatch) -> (Tensor<2>, Tensor<2>) {
        let h = graph.gcn(relu(self.base.forward(graph.gcn(x))));
        let mu = self.mu.forward(h.clone());
        let logstd = self.logstd.forward(h).clamp_max(MAX_LOGSTD);
        (mu, logstd)
    }
}

/// `KL(N(μ, σ²) ‖ N(0, I))` per node, averaged over the nodes:
/// `−½ · mean_i Σ_d (1 + 2 log σ − μ² − σ²)`.
///
/// # Shapes
/// `[N, hidden], [N, hidden] → [1]`
pub fn vgae_kl(mu: Tensor<2>, logstd: Tensor<2>) -> Tensor<1> {
    let var = logstd.clone().mul_scalar(2.0).exp();
    let per_node = (logstd.mul_scalar(2.0).add_scalar(1.0) - mu.clone() * mu - var).sum_dim(1);
    per_node.mean().mul_scalar(-0.5)
}

impl LinkModel for Vgae {
    fn hops(&self) -> usize {
        2
    }

    fn encode(&self, x: Tensor<2>, graph: &GraphBatch) -> Tensor<2> {
        self.moments(x, graph).0
    }

    fn encode_train(&self, x: Tensor<2>, graph: &GraphBatch) -> (Tensor<2>, Option<Tensor<1>>) {
        let (mu, logstd) = self.moments(x, graph);
        let eps = graph.standard_normal_like(&mu);
        let z = mu.clone() + logstd.clone().exp() * eps;
        let kl = vgae_kl(mu, logstd).div_scalar(graph.graph_nodes().max(1) as f32);
        (z, Some(kl))
    }

    fn decode(&self, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
        pairs.dot(h)
    }
}

impl TrainConfig {
    /// VGAE's training as LP-RAG Table 8 gives it: Adam with learning rate 1e-2 and
    /// weight decay 1e-4 for 400 epochs; the rest as [`TrainConfig::paper_ncn`] (loss over
    /// every edge, no early stopping or step limit, query joined to all chunks).
    pub fn paper_vgae() -> Self {
        Self {
            learning_rate: 1e-2,
            weight_decay: 1e-4,
            epochs: 400,
            ..Self::paper_ncn()
        }
    }
}

/// A [`BurnLinkPredictor`] named `"vgae"` running [`Vgae`] of `config` with `train`.
pub fn vgae_predictor(config: VgaeConfig, train: TrainConfig) -> BurnLinkPredictor<Vgae> {
    BurnLinkPredictor::new("vgae", train, move |d, device| {
        Vgae::new(d, &config, device)
    })
}

/// Restore a [`vgae_predictor`] saved under `dir` onto `graph`.
pub fn restore_vgae(
    dir: &std::path::Path,
    graph: &lprag_core::LinkGraph,
    config: VgaeConfig,
    device: Device,
) -> lprag_core::Result<BurnLinkPredictor<Vgae>> {
    config.validate()?;
    BurnLinkPredictor::<Vgae>::check_capacity(dir, config.min_parameters(graph.features.dim()))?;
    BurnLinkPredictor::restore_on(
        dir,
        graph,
        move |d, device| Vgae::new(d, &config, device),
        device,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_into_vec::<f32>().unwrap()
    }

    #[test]
    fn kl_is_the_closed_form_of_two_gaussians() {
        let device = Device::flex();
        let zero = Tensor::<2>::zeros([3, 4], &device);
        let kl0 = crate::shared::scalar(vgae_kl(zero.clone(), zero));
        assert!(kl0.abs() < 1e-7, "KL(N(0, I) ‖ N(0, I)) = {kl0}");
        // One node, μ = (1, 2), σ = (1, 2): ½ Σ (σ² + μ² − 1 − 2 log σ) = 4 − ln 2.
        let mu = Tensor::<2>::from_floats([[1.0, 2.0]], &device);
        let logstd = Tensor::<2>::from_floats([[0.0, 2f32.ln()]], &device);
        let kl = crate::shared::scalar(vgae_kl(mu, logstd));
        assert!((kl - (4.0 - 2f32.ln())).abs() < 1e-5, "{kl}");
    }

    #[test]
    fn training_samples_around_the_mean_and_adds_kl_over_n() {
        let device = Device::flex();
        let _draws = crate::seeding::seed_generator(&device, 3);
        let model = Vgae::new(6, &VgaeConfig { hidden: 4 }, &device);
        let x = Tensor::<2>::random([5, 6], Distribution::Normal(0.0, 1.0), &device);
        let g = crate::link_model::GraphBatch::isolated(5, 50, &device);
        let mu = model.encode(x.clone(), &g);
        assert_eq!(
            values(mu.clone()),
            values(model.encode(x.clone(), &g)),
            "scoring is deterministic"
        );
        let (mu2, logstd) = model.moments(x.clone(), &g);
        assert_eq!(values(mu.clone()), values(mu2));
        let (z, extra) = model.encode_train(x.clone(), &g);
        assert_ne!(
            values(z.clone()),
            values(mu.clone()),
            "training samples z = μ + σ ε"
        );
        assert_eq!(
            values(z),
            values(model.encode_train(x, &g).0),
            "ε comes from the batch's own seed, not burn's shared generator"
        );
        let extra = crate::shared::scalar(extra.expect("VGAE adds a KL term"));
        let kl = crate::shared::scalar(vgae_kl(mu, logstd));
        assert!((extra - kl / 50.0).abs() < 1e-6, "{extra} vs {kl}/50");
    }
}
