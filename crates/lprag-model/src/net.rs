//! burn modules of the link predictors.
//!
//! # Shapes
//! - node features `x`: `[N, d_in]` (rows L2-normalised by the caller)
//! - node representations `h`: `[N, hidden]`
//! - pair logits: `[P]`

use burn::module::{Module, Param};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor};

use crate::config::{Aggregation, Decoder, ModelConfig, PredictorKind};
use crate::dense::{to_vec, Dense};
use crate::host::{MessageGraph, PairBatch};

/// A stack of linear layers with ReLU between them (none after the last).
#[derive(Module, Debug)]
pub(crate) struct Mlp {
    layers: Vec<Linear>,
}

impl Mlp {
    /// The layers, first to last (ReLU between them).
    pub(crate) fn layers(&self) -> &[Linear] {
        &self.layers
    }

    /// `dims = [d0, d1, ..., dk]` gives k layers; the last layer is zero-initialised when
    /// `zero_last` (so the MLP starts as the constant 0).
    pub(crate) fn new(dims: &[usize], zero_last: bool, device: &Device) -> Self {
        let k = dims.len() - 1;
        let layers = (0..k)
            .map(|i| {
                let mut c = LinearConfig::new(dims[i], dims[i + 1]);
                if zero_last && i + 1 == k {
                    c = c.with_initializer(Initializer::Zeros);
                }
                c.init(device)
            })
            .collect();
        Self { layers }
    }

    /// # Shapes
    /// `[P, d0] → [P, dk]`
    pub(crate) fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let k = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            x = l.forward(x);
            if i + 1 < k {
                x = relu(x);
            }
        }
        x
    }

    /// `forward(x[dst] − x[src])` for every edge `(src, dst)`, without building the
    /// `[E, d0]` differences: the first layer is linear, so `(x_dst − x_src)·W + b =
    /// (x·W)[dst] − (x·W)[src] + b`. Costs `N·d0·d1` multiply-adds instead of `E·d0·d1`
    /// (a factor of the mean degree) and `E·d1` floats instead of `E·d0`.
    ///
    /// # Shapes
    /// `x`: `[N, d0]`, `src`/`dst`: `[E]` → `[E, dk]`
    pub(crate) fn forward_differences(
        &self,
        x: Tensor<2>,
        src: Tensor<1, Int>,
        dst: Tensor<1, Int>,
    ) -> Tensor<2> {
        let first = &self.layers[0];
        let xw = x.matmul(first.weight.val());
        let mut h = xw.clone().select(0, dst) - xw.select(0, src);
        if let Some(b) = &first.bias {
            h = h + b.val().unsqueeze::<2>();
        }
        // ReLU between layers: on each earlier layer's output, before the next.
        for l in &self.layers[1..] {
            h = l.forward(relu(h));
        }
        h
    }
}

/// One message-passing layer (GCN or SAGE, see [`Aggregation`]).
#[derive(Module, Debug)]
pub(crate) struct GnnLayer {
    nbr: Linear,
    this: Option<Linear>,
    bias: Option<Param<Tensor<1>>>,
}

impl GnnLayer {
    /// A layer `d_in → d_out`.
    pub(crate) fn new(
        d_in: usize,
        d_out: usize,
        aggregation: Aggregation,
        device: &Device,
    ) -> Self {
        let nbr = LinearConfig::new(d_in, d_out).with_bias(false).init(device);
        match aggregation {
            Aggregation::Sage => Self {
                nbr,
                this: Some(LinearConfig::new(d_in, d_out).init(device)),
                bias: None,
            },
            Aggregation::Gcn => Self {
                nbr,
                this: None,
                bias: Some(Param::from_tensor(Tensor::zeros([d_out], device))),
            },
        }
    }

    /// # Shapes
    /// `x: [N, d_in] → [N, d_out]`
    pub(crate) fn forward(&self, x: Tensor<2>, g: &MessageGraph) -> Tensor<2> {
        let p = self.nbr.forward(x.clone());
        let [n, h] = p.dims();
        let mut agg = Tensor::<2>::zeros([n, h], &p.device());
        if g.num_edges > 0 {
            let msgs = p.clone().select(0, g.src.clone()) * g.coef.clone();
            agg = agg.select_assign(0, g.dst.clone(), msgs, IndexingUpdateOp::Add);
        }
        match (&self.this, &self.bias) {
            (Some(this), _) => this.forward(x) + agg,
            (None, Some(b)) => agg + p * g.self_coef.clone() + b.val().unsqueeze::<2>(),
            (None, None) => agg + p * g.self_coef.clone(),
        }
    }
}

/// Every link predictor of the crate in one module; which parts exist depends on
/// [`ModelConfig::kind`].
impl GnnLayer {
    /// The layer's output for nodes whose inputs were aggregated beforehand (see
    /// `Subgraph::aggregate_inputs`): `x` their own features, `ax` their aggregated
    /// neighbourhood (with the GCN self loop folded in). Equal to [`GnnLayer::forward`]'s
    /// rows for those nodes, as the linear maps commute with the aggregation.
    pub(crate) fn forward_aggregated(&self, x: Tensor<2>, ax: Tensor<2>) -> Tensor<2> {
        let agg = self.nbr.forward(ax);
        match (&self.this, &self.bias) {
            (Some(this), _) => this.forward(x) + agg,
            (None, Some(b)) => agg + b.val().unsqueeze::<2>(),
            (None, None) => agg,
        }
    }
}

#[derive(Module, Debug)]
pub(crate) struct LinkNet {
    gnn: Vec<GnnLayer>,
    node_mlp: Option<Mlp>,
    pair_mlp: Option<Mlp>,
    cn_mlp: Option<Mlp>,
    out_mlp: Option<Mlp>,
    beta: Option<Param<Tensor<1>>>,
    residual: Option<Param<Tensor<1>>>,
    dot: bool,
}

impl LinkNet {
    /// Build the module for `cfg` with input width `d_in`.
    pub(crate) fn new(cfg: &ModelConfig, d_in: usize, device: &Device) -> Self {
        let h = cfg.hidden;
        let zero = cfg.residual;
        let layers = cfg.layers.max(1);
        let gnn_layers = |aggregation| {
            (0..layers)
                .map(|i| GnnLayer::new(if i == 0 { d_in } else { h }, h, aggregation, device))
                .collect::<Vec<_>>()
        };
        let residual = cfg
            .residual
            .then(|| Param::from_tensor(Tensor::from_floats([10.0, -5.0], device)));
        match cfg.kind {
            PredictorKind::Ncn => Self {
                gnn: gnn_layers(cfg.aggregation),
                node_mlp: None,
                pair_mlp: Some(Mlp::new(&[h, h, h], false, device)),
                cn_mlp: Some(Mlp::new(&[h, h, h], false, device)),
                out_mlp: Some(Mlp::new(&[h, h, 1], zero, device)),
                beta: Some(Param::from_tensor(Tensor::ones([1], device))),
                residual,
                dot: false,
            },
            PredictorKind::Gae(decoder) => Self {
                gnn: gnn_layers(cfg.aggregation),
                node_mlp: None,
                pair_mlp: (decoder == Decoder::Hadamard)
                    .then(|| Mlp::new(&[h, h, 1], zero, device)),
                cn_mlp: None,
                out_mlp: None,
                beta: None,
                residual,
                dot: decoder == Decoder::Dot,
            },
            PredictorKind::Mlp => {
                let mut dims = vec![d_in];
                dims.extend(std::iter::repeat_n(h, layers));
                Self {
                    gnn: Vec::new(),
                    node_mlp: Some(Mlp::new(&dims, false, device)),
                    pair_mlp: Some(Mlp::new(&[h, h, 1], zero, device)),
                    cn_mlp: None,
                    out_mlp: None,
                    beta: None,
                    residual,
                    dot: false,
                }
            }
        }
    }

    /// Whether scoring needs common neighbours.
    /// `true` for a one-layer GNN encoder, which [`LinkNet::encode_aggregated`] can run.
    pub(crate) fn single_gnn_layer(&self) -> bool {
        self.node_mlp.is_none() && self.gnn.len() == 1
    }

    /// [`LinkNet::encode`] of a one-layer GNN for nodes with pre-aggregated inputs.
    pub(crate) fn encode_aggregated(&self, x: Tensor<2>, ax: Tensor<2>) -> Tensor<2> {
        self.gnn[0].forward_aggregated(x, ax)
    }

    /// The GNN layers' aggregation (SAGE layers have a self transform; GCN for an MLP,
    /// which passes no messages).
    pub(crate) fn aggregation(&self) -> Aggregation {
        match self.gnn.first() {
            Some(layer) if layer.this.is_some() => Aggregation::Sage,
            _ => Aggregation::Gcn,
        }
    }

    /// Message-passing layers (0 for the MLP).
    pub(crate) fn gnn_layers(&self) -> usize {
        self.gnn.len()
    }

    pub(crate) fn uses_common_neighbors(&self) -> bool {
        self.cn_mlp.is_some()
    }

    /// Node representations.
    ///
    /// # Shapes
    /// `x: [N, d_in] → [N, hidden]`
    pub(crate) fn encode(&self, x: Tensor<2>, g: &MessageGraph) -> Tensor<2> {
        if let Some(mlp) = &self.node_mlp {
            return mlp.forward(x);
        }
        let k = self.gnn.len();
        let mut h = x;
        for (i, layer) in self.gnn.iter().enumerate() {
            h = layer.forward(h, g);
            if i + 1 < k {
                h = relu(h);
            }
        }
        h
    }

    /// Link logits for the pairs of `pairs`.
    ///
    /// # Shapes
    /// `h: [N, hidden]`, `x: [N, d_in]` (normalised features, for the residual) `→ [P]`
    pub(crate) fn score_pairs(&self, h: Tensor<2>, x: &Tensor<2>, pairs: &PairBatch) -> Tensor<1> {
        self.score_pairs_parts(h, x, pairs).0
    }

    /// Link logits and, separately, the learned part of them: with the dense residual the
    /// logit is `correction + a·cos + b`, without it the two are the same.
    ///
    /// # Shapes
    /// as [`LinkNet::score_pairs`], both outputs `[P]`
    pub(crate) fn score_pairs_parts(
        &self,
        h: Tensor<2>,
        x: &Tensor<2>,
        pairs: &PairBatch,
    ) -> (Tensor<1>, Tensor<1>) {
        let hi = h.clone().select(0, pairs.src.clone());
        let hj = h.clone().select(0, pairs.dst.clone());
        let had = hi.clone() * hj.clone();
        let logit: Tensor<2> = if self.dot {
            had.sum_dim(1)
        } else if let (Some(cn), Some(out)) = (&self.cn_mlp, &self.out_mlp) {
            let [p, d] = had.dims();
            let device = had.device();
            // The MLP of the common neighbours' sum: on the pairs that have any, and once
            // on the zero row that every other pair's sum is.
            let at_zero = cn.forward(Tensor::<2>::zeros([1, d], &device));
            let mut cn_out = at_zero.clone().repeat_dim(0, p);
            if let Some(c) = &pairs.cn {
                let sums = Tensor::<2>::zeros([c.count, d], &device).select_assign(
                    0,
                    c.slot.clone(),
                    h.select(0, c.node.clone()),
                    IndexingUpdateOp::Add,
                );
                let shift = cn.forward(sums) - at_zero.repeat_dim(0, c.count);
                cn_out = cn_out.select_assign(0, c.rows.clone(), shift, IndexingUpdateOp::Add);
            }
            let beta = self
                .beta
                .as_ref()
                .expect("NCN has beta")
                .val()
                .unsqueeze::<2>();
            let pair_mlp = self.pair_mlp.as_ref().expect("NCN has a pair MLP");
            out.forward(cn_out * beta + pair_mlp.forward(had))
        } else {
            self.pair_mlp.as_ref().expect("decoder").forward(had)
        };
        let correction = logit.reshape([pairs.len]);
        match &self.residual {
            Some(res) => {
                let xi = x.clone().select(0, pairs.src.clone());
                let xj = x.clone().select(0, pairs.dst.clone());
                let cos: Tensor<1> = (xi * xj).sum_dim(1).reshape([pairs.len]);
                let r = res.val();
                let a = r.clone().narrow(0, 0, 1);
                let b = r.narrow(0, 1, 1);
                (correction.clone() + cos * a + b, correction)
            }
            None => (correction.clone(), correction),
        }
    }
}

/// One GNN layer's weights on the host.
#[derive(Debug, Clone)]
pub(crate) struct HostGnnLayer {
    /// The neighbour transform (no bias).
    pub nbr: Dense,
    /// SAGE's self transform (with its bias).
    pub this: Option<Dense>,
    /// GCN's bias.
    pub bias: Option<Vec<f32>>,
}

/// [`LinkNet`]'s weights on the host (see [`crate::cached`]).
#[derive(Debug, Clone)]
pub(crate) struct HostLinkNet {
    pub gnn: Vec<HostGnnLayer>,
    pub node_mlp: Option<Vec<Dense>>,
    pub pair_mlp: Option<Vec<Dense>>,
    pub cn_mlp: Option<Vec<Dense>>,
    pub out_mlp: Option<Vec<Dense>>,
    pub beta: Option<f32>,
    /// `(a, b)` of the dense residual `a·cos + b`.
    pub residual: Option<(f32, f32)>,
    pub dot: bool,
}

fn export_mlp(m: &Option<Mlp>) -> lprag_core::Result<Option<Vec<Dense>>> {
    m.as_ref()
        .map(|m| m.layers().iter().map(Dense::export).collect())
        .transpose()
}

impl LinkNet {
    /// Copy the weights to the host.
    pub(crate) fn to_host(&self) -> lprag_core::Result<HostLinkNet> {
        let gnn = self
            .gnn
            .iter()
            .map(|l| {
                Ok(HostGnnLayer {
                    nbr: Dense::export(&l.nbr)?,
                    this: l.this.as_ref().map(Dense::export).transpose()?,
                    bias: l.bias.as_ref().map(|b| to_vec(b.val())).transpose()?,
                })
            })
            .collect::<lprag_core::Result<_>>()?;
        let scalar = |p: &Option<Param<Tensor<1>>>| -> lprag_core::Result<Option<Vec<f32>>> {
            p.as_ref().map(|p| to_vec(p.val())).transpose()
        };
        Ok(HostLinkNet {
            gnn,
            node_mlp: export_mlp(&self.node_mlp)?,
            pair_mlp: export_mlp(&self.pair_mlp)?,
            cn_mlp: export_mlp(&self.cn_mlp)?,
            out_mlp: export_mlp(&self.out_mlp)?,
            beta: scalar(&self.beta)?.map(|v| v[0]),
            residual: scalar(&self.residual)?.map(|v| (v[0], v[1])),
            dot: self.dot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    /// The first layer applied to the node rows and gathered per edge equals the MLP on
    /// each edge's difference, for one, two and three layers (ReLU in between).
    #[test]
    fn forward_differences_equals_the_mlp_on_each_difference() {
        let device = Device::flex();
        let (n, d) = (5, 3);
        let x: Vec<f32> = (0..n * d)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
            .collect();
        let edges = [(0usize, 1usize), (2, 1), (4, 0), (3, 3), (1, 4)];
        let mut diff = Vec::new();
        for &(s, t) in &edges {
            diff.extend((0..d).map(|k| x[t * d + k] - x[s * d + k]));
        }
        let idx = |v: Vec<i64>| {
            Tensor::<1, Int>::from_data(TensorData::new(v.clone(), [v.len()]), &device)
        };
        for dims in [vec![d, 1], vec![d, 4, 1], vec![d, 4, 3, 2]] {
            let mlp = Mlp::new(&dims, false, &device);
            let xs = Tensor::<2>::from_data(TensorData::new(x.clone(), [n, d]), &device);
            let got = to_vec(mlp.forward_differences(
                xs,
                idx(edges.iter().map(|e| e.0 as i64).collect()),
                idx(edges.iter().map(|e| e.1 as i64).collect()),
            ))
            .unwrap();
            let want = to_vec(mlp.forward(Tensor::<2>::from_data(
                TensorData::new(diff.clone(), [edges.len(), d]),
                &device,
            )))
            .unwrap();
            assert_eq!(got.len(), edges.len() * dims[dims.len() - 1]);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "{dims:?}: {a} vs {b}");
            }
        }
    }

    /// NCN's common-neighbour MLP run on the pairs that have common neighbours (and once
    /// on the zero row) gives the logits and gradients of running it on every pair's sum.
    #[test]
    fn compacted_common_neighbours_match_the_mlp_on_every_pair() {
        let device = Device::flex().autodiff();
        let cfg = ModelConfig {
            hidden: 8,
            ..ModelConfig::ncn()
        };
        let (n, d_in) = (6, 4);
        let values = |len: usize, k: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * k % 13) as f32 - 6.0) / 5.0)
                .collect()
        };
        let pairs = [(0u32, 1u32), (2, 3), (4, 5), (1, 2)];
        // Pair 0 has common neighbours 2 and 3, pair 2 has 0; pairs 1 and 3 have none.
        let (cn_pair, cn_node) = (vec![0i64, 0, 2], vec![2i64, 3, 0]);
        // One network for both ways (its parameters are drawn at their first use).
        let net = LinkNet::new(&cfg, d_in, &device);
        let run = |compact: bool| {
            let h = Tensor::<2>::from_data(TensorData::new(values(n * 8, 7), [n, 8]), &device);
            let x =
                Tensor::<2>::from_data(TensorData::new(values(n * d_in, 5), [n, d_in]), &device);
            let logits = if compact {
                let batch = PairBatch::from_parts(
                    &pairs,
                    Some((cn_pair.clone(), cn_node.clone())),
                    &device,
                );
                net.score_pairs_parts(h, &x, &batch).1
            } else {
                // Every pair's sum of common-neighbour rows, zero where there are none.
                let mut z = vec![0f32; pairs.len() * 8];
                let hv = values(n * 8, 7);
                for (&p, &u) in cn_pair.iter().zip(&cn_node) {
                    for k in 0..8 {
                        z[p as usize * 8 + k] += hv[u as usize * 8 + k];
                    }
                }
                let z = Tensor::<2>::from_data(TensorData::new(z, [pairs.len(), 8]), &device);
                let batch = PairBatch::from_parts(&pairs, None, &device);
                let hi = h.clone().select(0, batch.src.clone());
                let hj = h.select(0, batch.dst.clone());
                let beta = net.beta.as_ref().unwrap().val().unsqueeze::<2>();
                let out = net.out_mlp.as_ref().unwrap();
                out.forward(
                    net.cn_mlp.as_ref().unwrap().forward(z) * beta
                        + net.pair_mlp.as_ref().unwrap().forward(hi * hj),
                )
                .reshape([pairs.len()])
            };
            let grads = logits.clone().sum().backward();
            let w = net.cn_mlp.as_ref().unwrap().layers()[0].weight.val();
            let grad = to_vec(w.grad(&grads).expect("the MLP's weight has a gradient")).unwrap();
            (to_vec(logits).unwrap(), grad)
        };
        let (got, got_grad) = run(true);
        let (want, want_grad) = run(false);
        assert_eq!(got.len(), pairs.len());
        for (a, b) in got.iter().zip(&want).chain(got_grad.iter().zip(&want_grad)) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        assert!(want_grad.iter().any(|g| g.abs() > 1e-6), "a gradient flows");
    }

    /// The bound the loader checks weights files against is a true lower bound, and a
    /// tight one (biases and scalars are the rest).
    #[test]
    fn min_parameters_bounds_every_architecture_from_below() {
        let device = Device::default();
        for kind in [
            PredictorKind::Ncn,
            PredictorKind::Gae(Decoder::Dot),
            PredictorKind::Gae(Decoder::Hadamard),
            PredictorKind::Mlp,
        ] {
            for (hidden, layers, d_in) in [(8, 1, 16), (16, 2, 8), (12, 3, 20)] {
                let cfg = ModelConfig {
                    kind,
                    hidden,
                    layers,
                    ..ModelConfig::default()
                };
                let actual = LinkNet::new(&cfg, d_in, &device).num_params() as u128;
                let bound = cfg.min_parameters(d_in);
                assert!(
                    bound <= actual,
                    "{kind:?} {hidden}/{layers}: {bound} > {actual}"
                );
                assert!(
                    bound * 10 >= actual * 7,
                    "{kind:?} {hidden}/{layers}: {bound} ≪ {actual}"
                );
            }
            // Any numbers a file may hold give a bound, never an overflow.
            let huge = ModelConfig {
                kind,
                hidden: usize::MAX,
                layers: usize::MAX,
                ..ModelConfig::default()
            };
            assert!(huge.min_parameters(usize::MAX) > 1 << 100);
        }
    }
}
