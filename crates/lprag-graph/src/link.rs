//! The chunk–query training graph (LP-RAG §3.2 step 5).

use lprag_core::{EdgeKind, Embeddings, LinkEdge, LinkGraph, SyntheticQuery};

use crate::kernels::check_finite;
use crate::GraphError;

/// Assemble the [`LinkGraph`] a link predictor trains on.
///
/// Nodes are the chunks `0..C` (features = `chunk_emb` rows) followed by the queries
/// `C..C+Q` (features = `query_emb` rows, query `q` is node `C + q`). Edges are the chunk
/// edges as given (typically [`crate::mutual_knn_edges`]; any order of ends is accepted),
/// then, query by query, one [`EdgeKind::QueryChunk`] edge of weight 1 from each chunk of
/// the query's batch (`a` = chunk, `b` = query node), duplicates within a query removed
/// and first-seen order kept. A query with no chunk becomes an isolated node.
///
/// # Errors
/// * [`GraphError::DimensionMismatch`] when `query_emb` has not one row per query, or its
///   width differs from `chunk_emb`'s (checked when there is at least one query).
/// * [`GraphError::NonFinite`] naming the chunk or query row with a NaN or infinity.
/// * [`GraphError::InvalidGraph`] naming the offending `chunk_edges[i]` (end out of
///   range, self-loop, non-finite weight, kind `QueryChunk`) or `queries[q].chunk_ids[j]`
///   (chunk id out of range).
/// * [`GraphError::InvalidArgument`] when the node count does not fit `u32`.
pub fn build_link_graph(
    chunk_emb: &Embeddings,
    chunk_edges: &[LinkEdge],
    queries: &[SyntheticQuery],
    query_emb: &Embeddings,
) -> Result<LinkGraph, GraphError> {
    let nc = chunk_emb.rows();
    let nq = queries.len();
    if query_emb.rows() != nq {
        return Err(GraphError::DimensionMismatch {
            location: "query_emb rows (one per query)".into(),
            expected: nq,
            actual: query_emb.rows(),
        });
    }
    if nq > 0 && query_emb.dim() != chunk_emb.dim() {
        return Err(GraphError::DimensionMismatch {
            location: "query_emb dimension (must equal chunk_emb's)".into(),
            expected: chunk_emb.dim(),
            actual: query_emb.dim(),
        });
    }
    if nc + nq > u32::MAX as usize {
        return Err(GraphError::arg(
            "queries",
            format!("{nc} chunks + {nq} queries do not fit u32 node ids"),
        ));
    }
    check_finite(chunk_emb, "chunk embeddings")?;
    check_finite(query_emb, "query embeddings")?;
    let d = chunk_emb.dim();
    let mut data = Vec::with_capacity((nc + nq) * d);
    data.extend_from_slice(chunk_emb.as_slice());
    if nq > 0 {
        data.extend_from_slice(query_emb.as_slice());
    }
    let features =
        Embeddings::new(d, data).map_err(|e| GraphError::arg("chunk_emb", e.to_string()))?;
    assemble(features, nc, chunk_edges, queries)
}

/// [`build_link_graph`] for callers that already hold the node features in one matrix:
/// `features` has the chunks' rows `0..num_chunks` followed by one row per query, and is
/// moved into the graph instead of copied (at 100k chunks and 200k 1024-d queries that is
/// 1.2 GB not allocated twice).
///
/// # Errors
/// As [`build_link_graph`]; [`GraphError::DimensionMismatch`] when `features` does not
/// have `num_chunks + queries.len()` rows.
pub fn link_graph_from_features(
    features: Embeddings,
    num_chunks: usize,
    chunk_edges: &[LinkEdge],
    queries: &[SyntheticQuery],
) -> Result<LinkGraph, GraphError> {
    let (nc, nq) = (num_chunks, queries.len());
    if features.rows() != nc + nq {
        return Err(GraphError::DimensionMismatch {
            location: "features rows (chunks, then one per query)".into(),
            expected: nc + nq,
            actual: features.rows(),
        });
    }
    if nc + nq > u32::MAX as usize {
        return Err(GraphError::arg(
            "queries",
            format!("{nc} chunks + {nq} queries do not fit u32 node ids"),
        ));
    }
    if let Some(row) = features
        .iter()
        .position(|r| r.iter().any(|v| !v.is_finite()))
    {
        return Err(if row < nc {
            GraphError::NonFinite {
                matrix: "chunk embeddings",
                row,
            }
        } else {
            GraphError::NonFinite {
                matrix: "query embeddings",
                row: row - nc,
            }
        });
    }
    assemble(features, nc, chunk_edges, queries)
}

/// Check the chunk edges and the queries' chunk ids, then add the query–chunk edges.
fn assemble(
    features: Embeddings,
    nc: usize,
    chunk_edges: &[LinkEdge],
    queries: &[SyntheticQuery],
) -> Result<LinkGraph, GraphError> {
    for (i, e) in chunk_edges.iter().enumerate() {
        let loc = || format!("chunk_edges[{i}]");
        if e.a as usize >= nc || e.b as usize >= nc {
            return Err(GraphError::graph(
                loc(),
                format!(
                    "chunk {} or {} out of range (there are {nc} chunks)",
                    e.a, e.b
                ),
            ));
        }
        if e.a == e.b {
            return Err(GraphError::graph(
                loc(),
                format!("self-loop on chunk {}", e.a),
            ));
        }
        if !e.weight.is_finite() {
            return Err(GraphError::graph(
                loc(),
                format!("weight {} is not finite", e.weight),
            ));
        }
        if e.kind == EdgeKind::QueryChunk {
            return Err(GraphError::graph(
                loc(),
                "kind QueryChunk is reserved for query–chunk edges",
            ));
        }
    }

    let mut edges = Vec::with_capacity(
        chunk_edges.len() + queries.iter().map(|q| q.chunk_ids.len()).sum::<usize>(),
    );
    edges.extend_from_slice(chunk_edges);
    let mut seen: Vec<usize> = Vec::new();
    for (q, query) in queries.iter().enumerate() {
        seen.clear();
        let node = (nc + q) as u32;
        for (j, &c) in query.chunk_ids.iter().enumerate() {
            if c >= nc {
                return Err(GraphError::graph(
                    format!("queries[{q}].chunk_ids[{j}]"),
                    format!("query {q} links to chunk {c}, but there are {nc} chunks"),
                ));
            }
            if seen.contains(&c) {
                continue;
            }
            seen.push(c);
            edges.push(LinkEdge {
                a: c as u32,
                b: node,
                weight: 1.0,
                kind: EdgeKind::QueryChunk,
            });
        }
    }

    Ok(LinkGraph {
        features,
        num_chunks: nc,
        edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{mutual_knn_edges, KnnBackend};

    fn query(ids: &[usize]) -> SyntheticQuery {
        SyntheticQuery {
            text: "q".into(),
            chunk_ids: ids.to_vec(),
            answer: None,
        }
    }

    fn chunks() -> Embeddings {
        Embeddings::from_rows(
            2,
            &[
                vec![1.0, 0.0],
                vec![0.9, 0.1],
                vec![0.0, 1.0],
                vec![0.1, 0.9],
            ],
        )
        .unwrap()
    }

    #[test]
    fn builds_nodes_and_edges() {
        let ce = chunks();
        let edges = mutual_knn_edges(&ce, 1, &KnnBackend::Exact).unwrap();
        assert_eq!(edges.len(), 2);
        let qs = vec![query(&[0, 1, 0]), query(&[3]), query(&[])];
        let qe =
            Embeddings::from_rows(2, &[vec![1.0, 1.0], vec![0.0, 1.0], vec![1.0, 0.0]]).unwrap();
        let g = build_link_graph(&ce, &edges, &qs, &qe).unwrap();
        g.validate().unwrap();
        assert_eq!(g.num_nodes(), 7);
        assert_eq!(g.num_chunks, 4);
        assert_eq!(g.num_queries(), 3);
        assert_eq!(g.features.row(4), &[1.0, 1.0]);
        let qc: Vec<(u32, u32)> = g
            .edges
            .iter()
            .filter(|e| e.kind == EdgeKind::QueryChunk)
            .map(|e| (e.a, e.b))
            .collect();
        assert_eq!(qc, vec![(0, 4), (1, 4), (3, 5)]);
        assert!(g
            .edges
            .iter()
            .filter(|e| e.kind == EdgeKind::QueryChunk)
            .all(|e| e.weight == 1.0));
        assert_eq!(g.edges.len(), 5);
    }

    #[test]
    fn features_moved_in_give_the_same_graph() {
        let ce = chunks();
        let edges = mutual_knn_edges(&ce, 1, &KnnBackend::Exact).unwrap();
        let qs = vec![query(&[0, 1, 0]), query(&[3])];
        let qe = Embeddings::from_rows(2, &[vec![1.0, 1.0], vec![0.0, 1.0]]).unwrap();
        let copied = build_link_graph(&ce, &edges, &qs, &qe).unwrap();
        let mut all = ce.clone();
        all.extend(&qe).unwrap();
        let moved = link_graph_from_features(all.clone(), 4, &edges, &qs).unwrap();
        assert_eq!(moved.features.as_slice(), copied.features.as_slice());
        assert_eq!(moved.edges, copied.edges);
        assert_eq!(moved.num_chunks, 4);

        let err = link_graph_from_features(all.clone(), 4, &edges, &qs[..1]).unwrap_err();
        assert!(
            matches!(
                err,
                GraphError::DimensionMismatch {
                    expected: 5,
                    actual: 6,
                    ..
                }
            ),
            "{err}"
        );
        let mut bad = all.as_slice().to_vec();
        bad[5 * 2] = f32::NAN;
        let bad = Embeddings::new(2, bad).unwrap();
        let err = link_graph_from_features(bad, 4, &edges, &qs).unwrap_err();
        assert!(
            matches!(
                err,
                GraphError::NonFinite {
                    matrix: "query embeddings",
                    row: 1
                }
            ),
            "{err}"
        );
        let err =
            link_graph_from_features(all, 4, &edges, &[query(&[0]), query(&[9])]).unwrap_err();
        assert!(err.to_string().contains("queries[1].chunk_ids[0]"), "{err}");
    }

    #[test]
    fn no_queries_is_fine() {
        let g = build_link_graph(&chunks(), &[], &[], &Embeddings::empty(7)).unwrap();
        assert_eq!(g.num_nodes(), 4);
        assert_eq!(g.num_queries(), 0);
    }

    #[test]
    fn errors_say_which_query_or_chunk() {
        let ce = chunks();
        let qe = Embeddings::from_rows(2, &[vec![1.0, 1.0]]).unwrap();
        let err = build_link_graph(&ce, &[], &[query(&[1, 9])], &qe).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("queries[0].chunk_ids[1]") && msg.contains("chunk 9"),
            "{msg}"
        );

        let err = build_link_graph(&ce, &[], &[query(&[1]), query(&[2])], &qe).unwrap_err();
        assert!(matches!(
            err,
            GraphError::DimensionMismatch {
                expected: 2,
                actual: 1,
                ..
            }
        ));

        let qe3 = Embeddings::from_rows(3, &[vec![1.0, 1.0, 1.0]]).unwrap();
        let err = build_link_graph(&ce, &[], &[query(&[1])], &qe3).unwrap_err();
        assert!(matches!(
            err,
            GraphError::DimensionMismatch {
                expected: 2,
                actual: 3,
                ..
            }
        ));

        let bad_q = Embeddings::from_rows(2, &[vec![f32::NAN, 1.0]]).unwrap();
        let err = build_link_graph(&ce, &[], &[query(&[1])], &bad_q).unwrap_err();
        assert!(err.to_string().contains("query embeddings row 0"), "{err}");

        let edge = |a, b, kind| LinkEdge {
            a,
            b,
            weight: 0.5,
            kind,
        };
        for (bad, what) in [
            (edge(0, 4, EdgeKind::Similarity), "out of range"),
            (edge(2, 2, EdgeKind::Bridge), "self-loop"),
            (edge(0, 1, EdgeKind::QueryChunk), "QueryChunk"),
        ] {
            let err = build_link_graph(&ce, &[edge(0, 1, EdgeKind::Similarity), bad], &[], &qe)
                .unwrap_err();
            let msg = err.to_string();
            // qe has one row but there are no queries: that is checked first.
            assert!(msg.contains("query_emb"), "{msg}");
            let err = build_link_graph(
                &ce,
                &[edge(0, 1, EdgeKind::Similarity), bad],
                &[],
                &Embeddings::empty(2),
            )
            .unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("chunk_edges[1]") && msg.contains(what),
                "{msg}"
            );
        }
    }

    #[test]
    fn converts_into_core_error() {
        fn core_api() -> lprag_core::Result<LinkGraph> {
            Ok(build_link_graph(
                &chunks(),
                &[],
                &[query(&[5])],
                &Embeddings::from_rows(2, &[vec![1.0, 1.0]]).unwrap(),
            )?)
        }
        let err = core_api().unwrap_err();
        assert!(
            matches!(err, lprag_core::Error::InvalidInput { .. }),
            "{err}"
        );
    }
}
