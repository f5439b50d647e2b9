//! Training steps over the targets' neighbourhood (`StepGraph::Neighbourhood`) see the
//! same forward pass as steps over the whole graph (`StepGraph::Full`).

use lprag_core::{LinkPredictor, NoProgress};
use lprag_model::{
    Aggregation, Decoder, GnnLinkPredictor, ModelConfig, PredictorKind, StepGraph, Targets,
    TrainConfig,
};

use crate::common::graph;

/// A one-layer GCN GAE (its self loop is folded into the host-side aggregation).
fn gcn_one_layer() -> ModelConfig {
    ModelConfig {
        kind: PredictorKind::Gae(Decoder::Hadamard),
        aggregation: Aggregation::Gcn,
        hidden: 16,
        layers: 1,
        residual: false,
    }
}

/// With the learning rate at 0 every step sees the initial weights, so each epoch's loss is
/// the mean loss of its batches: equal losses mean the neighbourhood subgraph (target
/// masking, degrees, common neighbours included) gives the same forward pass as the full
/// graph on every batch.
#[test]
fn neighbourhood_steps_see_the_same_forward_pass_as_full_graph_steps() {
    let g = graph();
    let configs = [
        (ModelConfig::default(), Targets::QueryChunk),
        (ModelConfig::ncn(), Targets::QueryChunk),
        (
            ModelConfig {
                kind: PredictorKind::Gae(Decoder::Hadamard),
                aggregation: Aggregation::Gcn,
                hidden: 16,
                layers: 2,
                residual: false,
            },
            Targets::All,
        ),
        (
            ModelConfig {
                kind: PredictorKind::Ncn,
                aggregation: Aggregation::Gcn,
                hidden: 16,
                layers: 2,
                residual: false,
            },
            Targets::QueryChunk,
        ),
        (gcn_one_layer(), Targets::QueryChunk),
        (ModelConfig::mlp(), Targets::QueryChunk),
    ];
    for (model, targets) in configs {
        let losses = |step_graph, mask_targets, batch_size| {
            let tc = TrainConfig {
                epochs: 2,
                batch_size,
                learning_rate: 0.0,
                targets,
                step_graph,
                mask_targets,
                validation_fraction: 0.0,
                ..TrainConfig::default()
            };
            let mut p = GnnLinkPredictor::new(model.clone(), tc);
            p.fit(&g, &NoProgress).unwrap().train_loss
        };
        for batch_size in [0, 8] {
            let full = losses(StepGraph::Full, true, batch_size);
            let local = losses(StepGraph::Neighbourhood, true, batch_size);
            assert_eq!(full.len(), 2);
            for (a, b) in full.iter().zip(&local) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "{model:?}, batch {batch_size}: losses {a} vs {b}"
                );
            }
            if model.kind != PredictorKind::Mlp && !model.residual {
                // Masking matters, so the comparison above is not vacuous (a residual model
                // starts as pure cosine and ignores the graph).
                let unmasked = losses(StepGraph::Neighbourhood, false, batch_size);
                assert_ne!(unmasked[0], local[0], "{model:?}");
            }
        }
    }
    neighbourhood_steps_give_the_same_updates_as_full_graph_steps();
}

/// With a learning rate the two step graphs must also give the same gradients: after a
/// few epochs of updates the losses still agree (up to float rounding, as one-layer
/// neighbourhood steps aggregate the features before the linear map).
/// Called from the test above (one test per binary, see the module docs).
fn neighbourhood_steps_give_the_same_updates_as_full_graph_steps() {
    let g = graph();
    for model in [ModelConfig::ncn(), gcn_one_layer()] {
        let losses = |step_graph| {
            let tc = TrainConfig {
                epochs: 4,
                batch_size: 8,
                learning_rate: 0.01,
                step_graph,
                validation_fraction: 0.0,
                ..TrainConfig::default()
            };
            let mut p = GnnLinkPredictor::new(model.clone(), tc);
            p.fit(&g, &NoProgress).unwrap().train_loss
        };
        let (full, local) = (losses(StepGraph::Full), losses(StepGraph::Neighbourhood));
        assert_eq!(full.len(), 4);
        assert!(
            full[3] < full[0],
            "{model:?}: training lowers the loss: {full:?}"
        );
        for (a, b) in full.iter().zip(&local) {
            assert!(
                (a - b).abs() < 1e-3,
                "{model:?}: losses {full:?} vs {local:?}"
            );
        }
    }
}
