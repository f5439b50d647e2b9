#![no_main]
//! The graph file reader (link graphs and chunk graphs) on arbitrary bytes: a typed error
//! or a graph that validates, never a panic or an allocation the input does not justify.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = lprag_graph::link_graph_from_bytes(data) {
        assert!(g.validate().is_ok());
    }
    let _ = lprag_graph::chunk_graph_from_bytes(data);
});
