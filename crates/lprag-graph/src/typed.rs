//! Typed, checked edge lists of the peer retrievers' graphs: [`InEdges`] (a directed chunk
//! graph by destination, LeSeGR's) and [`KgEdges`] (a knowledge graph's
//! `(entity, relation, entity)` edges, GFM-RAG's), and LeSeGR's contextual chunk graph
//! ([`contextual_chunk_graph`]). The edge lists check every id when built and when
//! read from a saved index, so a corrupt file is an error, never a panic later.

use std::collections::HashSet;

use lprag_core::{Embeddings, SparseVector};
use serde::{Deserialize, Serialize};

use crate::GraphError;

/// A directed chunk graph stored by destination (CSR over in-edges): edge `e` carries a
/// message from `sources()[e]` to the node whose range contains `e`.
///
/// Read from a saved index, the offsets and sources are checked (offsets start at 0, never
/// decrease and end at the number of edges; every source is a node).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "InEdgesRaw")]
pub struct InEdges {
    ptr: Vec<u32>,
    src: Vec<u32>,
}

/// [`InEdges`] as stored, before its checks.
#[derive(Deserialize)]
struct InEdgesRaw {
    ptr: Vec<u32>,
    src: Vec<u32>,
}

impl TryFrom<InEdgesRaw> for InEdges {
    type Error = String;

    fn try_from(r: InEdgesRaw) -> std::result::Result<Self, String> {
        let Some((&first, _)) = r.ptr.split_first() else {
            return Err("InEdges: no offsets (at least one, 0, is needed)".into());
        };
        if first != 0 {
            return Err(format!("InEdges: the first offset is {first}, not 0"));
        }
        if let Some(i) = r.ptr.windows(2).position(|w| w[1] < w[0]) {
            return Err(format!("InEdges: offsets decrease at node {i}"));
        }
        let last = *r.ptr.last().unwrap_or(&0) as usize;
        if last != r.src.len() {
            return Err(format!(
                "InEdges: the offsets end at {last}, but there are {} edges",
                r.src.len()
            ));
        }
        let n = r.ptr.len() - 1;
        if let Some(e) = r.src.iter().position(|&s| s as usize >= n) {
            return Err(format!(
                "InEdges: edge {e} comes from node {}, out of range for {n} nodes",
                r.src[e]
            ));
        }
        Ok(Self {
            ptr: r.ptr,
            src: r.src,
        })
    }
}

impl InEdges {
    /// Build from `(source, destination)` pairs over `n` nodes. Self loops (α_ii = 1 is
    /// implicit) and repeated pairs are dropped; an index ≥ `n` is an error naming the
    /// pair.
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> Result<Self, GraphError> {
        if n > u32::MAX as usize {
            return Err(GraphError::InvalidGraph {
                location: "InEdges".into(),
                message: "more than 2^32 - 1 nodes".into(),
            });
        }
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (k, &(s, d)) in edges.iter().enumerate() {
            if s as usize >= n || d as usize >= n {
                return Err(GraphError::InvalidGraph {
                    location: format!("InEdges edge {k}"),
                    message: format!("({s}, {d}) out of range for {n} nodes"),
                });
            }
            if s != d {
                lists[d as usize].push(s);
            }
        }
        let mut ptr = Vec::with_capacity(n + 1);
        let mut src = Vec::new();
        ptr.push(0u32);
        for mut l in lists {
            l.sort_unstable();
            l.dedup();
            src.extend_from_slice(&l);
            ptr.push(src.len() as u32);
        }
        Ok(Self { ptr, src })
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }

    /// Edge ids of the in-edges of `i`.
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        self.ptr[i] as usize..self.ptr[i + 1] as usize
    }

    /// The nodes with an edge into `i`, ascending.
    pub fn in_neighbors(&self, i: usize) -> &[u32] {
        &self.src[self.range(i)]
    }

    /// Source node of every edge, by edge id.
    pub fn sources(&self) -> &[u32] {
        &self.src
    }

    /// Destination node of every edge, by edge id.
    pub fn destinations(&self) -> Vec<u32> {
        (0..self.num_nodes())
            .flat_map(|i| std::iter::repeat_n(i as u32, self.range(i).len()))
            .collect()
    }

    /// `nodes` and everything with a path of at most `hops` edges into one of them,
    /// sorted.
    pub fn in_ball(&self, nodes: &[u32], hops: usize) -> Vec<u32> {
        let mut seen: HashSet<u32> = nodes.iter().copied().collect();
        let mut frontier: Vec<u32> = seen.iter().copied().collect();
        for _ in 0..hops {
            let mut next = Vec::new();
            for &i in &frontier {
                for &j in self.in_neighbors(i as usize) {
                    if seen.insert(j) {
                        next.push(j);
                    }
                }
            }
            frontier = next;
        }
        let mut out: Vec<u32> = seen.into_iter().collect();
        out.sort_unstable();
        out
    }
}

/// The knowledge graph's typed edges, checked: every id is in range (also when read from
/// a saved index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "KgEdgesRaw")]
pub struct KgEdges {
    num_entities: usize,
    num_relations: usize,
    src: Vec<u32>,
    rel: Vec<u32>,
    dst: Vec<u32>,
}

/// [`KgEdges`] as stored, before its checks.
#[derive(Deserialize)]
struct KgEdgesRaw {
    num_entities: usize,
    num_relations: usize,
    src: Vec<u32>,
    rel: Vec<u32>,
    dst: Vec<u32>,
}

impl TryFrom<KgEdgesRaw> for KgEdges {
    type Error = String;

    fn try_from(r: KgEdgesRaw) -> std::result::Result<Self, String> {
        if r.src.len() != r.rel.len() || r.src.len() != r.dst.len() {
            return Err(format!(
                "KgEdges: {} sources, {} relations, {} destinations",
                r.src.len(),
                r.rel.len(),
                r.dst.len()
            ));
        }
        let edges: Vec<(u32, u32, u32)> = (0..r.src.len())
            .map(|i| (r.src[i], r.rel[i], r.dst[i]))
            .collect();
        KgEdges::new(r.num_entities, r.num_relations, &edges).map_err(|e| e.to_string())
    }
}

impl KgEdges {
    /// Edges `(source entity, relation, destination entity)`; messages flow from source
    /// to destination (add inverse edges yourself if both directions should talk).
    ///
    /// # Errors
    /// [`GraphError::InvalidGraph`] naming the first edge with an id out of range.
    pub fn new(
        num_entities: usize,
        num_relations: usize,
        edges: &[(u32, u32, u32)],
    ) -> Result<Self, GraphError> {
        let mut out = Self {
            num_entities,
            num_relations,
            src: Vec::with_capacity(edges.len()),
            rel: Vec::with_capacity(edges.len()),
            dst: Vec::with_capacity(edges.len()),
        };
        for (i, &(s, r, d)) in edges.iter().enumerate() {
            if s as usize >= num_entities || d as usize >= num_entities {
                return Err(GraphError::InvalidGraph {
                    location: format!("KgEdges edge {i}"),
                    message: format!(
                        "entity out of range in ({s}, {r}, {d}) for {num_entities} entities"
                    ),
                });
            }
            if r as usize >= num_relations {
                return Err(GraphError::InvalidGraph {
                    location: format!("KgEdges edge {i}"),
                    message: format!("relation {r} out of range for {num_relations} relations"),
                });
            }
            out.src.push(s);
            out.rel.push(r);
            out.dst.push(d);
        }
        Ok(out)
    }

    /// Number of entities `N`.
    pub fn num_entities(&self) -> usize {
        self.num_entities
    }

    /// Number of relation types.
    pub fn num_relations(&self) -> usize {
        self.num_relations
    }

    /// Number of edges `|E|`.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// True when there is no edge.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Edge `i` as `(source, relation, destination)`.
    pub fn edge(&self, i: usize) -> (u32, u32, u32) {
        (self.src[i], self.rel[i], self.dst[i])
    }

    /// Source entity of every edge, by edge id.
    pub fn sources(&self) -> &[u32] {
        &self.src
    }

    /// Relation of every edge, by edge id.
    pub fn relations(&self) -> &[u32] {
        &self.rel
    }

    /// Destination entity of every edge, by edge id.
    pub fn destinations(&self) -> &[u32] {
        &self.dst
    }
}

/// The contextual chunk graph: adjacency within documents and top-n inter-document edges
/// per `(cited, citing)` link. Returns the graph and the intra / inter edge counts.
///
/// `emb` and `sparse` hold one row per chunk, `doc_chunks` each document's chunk ids in
/// order, `links` document indices; an inter-document edge `j → i` joins the `top_n`
/// chunks `j` of the cited document most relevant (sparse cosine + dense cosine) to each
/// chunk `i` of the citing one.
pub fn contextual_chunk_graph(
    emb: &Embeddings,
    sparse: &[SparseVector],
    doc_chunks: &[Vec<u32>],
    links: &[(usize, usize)],
    top_n: usize,
) -> Result<(InEdges, usize, usize), GraphError> {
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for cs in doc_chunks {
        for w in cs.windows(2) {
            edges.push((w[0], w[1]));
        }
    }
    let intra: HashSet<(u32, u32)> = edges.iter().copied().collect();
    let mut inter: HashSet<(u32, u32)> = HashSet::new();
    if top_n > 0 {
        for &(v, u) in links {
            if v == u {
                continue;
            }
            for &i in &doc_chunks[u] {
                let mut r: Vec<(u32, f32)> = doc_chunks[v]
                    .iter()
                    .map(|&j| {
                        let dense = lprag_core::cosine(emb.row(i as usize), emb.row(j as usize));
                        (j, sparse[i as usize].cosine(&sparse[j as usize]) + dense)
                    })
                    .collect();
                r.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                for &(j, _) in r.iter().take(top_n) {
                    if !intra.contains(&(j, i)) {
                        inter.insert((j, i));
                    }
                }
            }
        }
    }
    let n_inter = inter.len();
    edges.extend(inter);
    let g = InEdges::from_edges(emb.rows(), &edges)?;
    Ok((g, intra.len(), n_inter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_saved_in_edges_are_errors_not_panics() {
        let good = InEdges::from_edges(3, &[(0, 1), (2, 1), (1, 0)]).unwrap();
        let json = serde_json::to_string(&good).unwrap();
        assert_eq!(serde_json::from_str::<InEdges>(&json).unwrap(), good);
        for (bad, what) in [
            (r#"{"ptr":[],"src":[]}"#, "no offsets"),
            (r#"{"ptr":[1,1],"src":[0]}"#, "first offset"),
            (r#"{"ptr":[0,2,1],"src":[0,0]}"#, "decrease"),
            (r#"{"ptr":[0,1,5],"src":[0,1]}"#, "end at 5"),
            (r#"{"ptr":[0,1,2],"src":[0,7]}"#, "out of range"),
        ] {
            let err = serde_json::from_str::<InEdges>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{bad}: {err}");
        }
    }

    #[test]
    fn in_edges_drop_loops_and_duplicates_and_check_range() {
        let g = InEdges::from_edges(3, &[(0, 1), (2, 1), (0, 1), (1, 1), (1, 2)]).unwrap();
        assert_eq!(g.num_edges(), 3);
        assert_eq!(g.in_neighbors(1), &[0, 2]);
        assert_eq!(g.in_neighbors(2), &[1]);
        assert_eq!(g.destinations(), vec![1, 1, 2]);
        assert_eq!(g.in_ball(&[2], 1), vec![1, 2]);
        assert_eq!(g.in_ball(&[2], 2), vec![0, 1, 2]);
        let err = InEdges::from_edges(3, &[(0, 3)]).unwrap_err().to_string();
        assert!(err.contains("edge 0") && err.contains("(0, 3)"), "{err}");
    }

    #[test]
    fn corrupt_saved_kg_edges_are_errors_not_panics() {
        let good = KgEdges::new(3, 2, &[(0, 1, 2), (2, 0, 1)]).unwrap();
        let json = serde_json::to_string(&good).unwrap();
        assert_eq!(serde_json::from_str::<KgEdges>(&json).unwrap(), good);
        let bad = json.replace("\"dst\":[2,1]", "\"dst\":[2,9]");
        assert_ne!(bad, json);
        let err = serde_json::from_str::<KgEdges>(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("out of range"), "{err}");
        let short = json.replace("\"rel\":[1,0]", "\"rel\":[1]");
        assert_ne!(short, json);
        let err = serde_json::from_str::<KgEdges>(&short)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 sources, 1 relations"), "{err}");
    }
}
