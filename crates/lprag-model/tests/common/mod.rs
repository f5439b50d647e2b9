//! A small graph shared by the predictor tests: weighted similarity edges, bridges and
//! isolated chunks.

use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph, Progress};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const DIM: usize = 12;
pub const CHUNKS: usize = 30;

/// 30 chunks: a chain and cross links of varied weights among the first 24, two bridges,
/// chunks 24..30 isolated; 2 synthetic queries per connected chunk.
pub fn graph() -> LinkGraph {
    let mut rng = StdRng::seed_from_u64(11);
    let mut rows: Vec<Vec<f32>> = (0..CHUNKS)
        .map(|_| (0..DIM).map(|_| rng.random::<f32>() - 0.3).collect())
        .collect();
    let mut edges = Vec::new();
    for i in 0..23u32 {
        edges.push(LinkEdge {
            a: i,
            b: i + 1,
            weight: 0.2 + 0.7 * rng.random::<f32>(),
            kind: EdgeKind::Similarity,
        });
        if i % 3 == 0 && i + 5 < 24 {
            edges.push(LinkEdge {
                a: i,
                b: i + 5,
                weight: 0.5 + 0.4 * rng.random::<f32>(),
                kind: EdgeKind::Similarity,
            });
        }
    }
    for (a, b) in [(2, 17), (6, 21)] {
        edges.push(LinkEdge {
            a,
            b,
            weight: 1.0,
            kind: EdgeKind::Bridge,
        });
    }
    for c in 0..24u32 {
        for _ in 0..2 {
            let q = rows.len() as u32;
            let row: Vec<f32> = rows[c as usize]
                .iter()
                .map(|v| v + 0.3 * (rng.random::<f32>() - 0.5))
                .collect();
            rows.push(row);
            edges.push(LinkEdge {
                a: q,
                b: c,
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
            edges.push(LinkEdge {
                a: q,
                b: (c + 1) % 24,
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
    }
    LinkGraph {
        features: Embeddings::from_rows(DIM, &rows).unwrap(),
        num_chunks: CHUNKS,
        edges,
    }
}

/// Dies (panics) when the given training epoch is reported: a crash right after that
/// epoch's checkpoint was written.
#[allow(dead_code)] // used by the checkpoint tests only
pub struct DieAfter(pub u64);

impl Progress for DieAfter {
    fn update(&self, stage: &str, done: u64, _message: &str) {
        if stage == "train" && done == self.0 {
            panic!("killed after epoch {done}");
        }
    }
}
