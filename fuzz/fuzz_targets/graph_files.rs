#![no_main]
//! The graph file reader (link graphs, chunk graphs, k-NN lists) on arbitrary bytes: a
//! typed error or a value that validates, never a panic or an allocation the input does
//! not justify.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = lprag_graph::link_graph_from_bytes(data) {
        assert!(g.validate().is_ok());
    }
    let _ = lprag_graph::chunk_graph_from_bytes(data);
    if let Ok(lists) = lprag_graph::knn_lists_from_bytes(data) {
        let n = lists.len();
        for (i, l) in lists.iter().enumerate() {
            assert!(l.iter().all(|&(j, s)| (j as usize) < n && j as usize != i && s.is_finite()));
        }
        // What the loader accepts, the update path and the edge builder accept.
        assert!(lprag_graph::mutual_edges_of(&lists).is_ok());
    }
});
