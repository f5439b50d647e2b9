//! The communities of a G²RAG index: HDBSCAN clusters, split into the components of
//! their k-NN graph (δ), community centroids, and merges of communities (θ or an LLM).

use super::*;

/// HDBSCAN over the rows of `emb` (normalised here): `Some(cluster)` per chunk, `None`
/// for noise. Clusters are numbered in the crate's order.
///
/// Fewer chunks than `min_cluster_size` or `min_samples` make no cluster (all noise)
/// without running HDBSCAN.
///
/// # Why the `hdbscan` crate
/// Measured on 1,890 × 384-d unit vectors (60-centre mixture, min size 5, one core):
/// `hdbscan` 0.12 on a precalculated cosine matrix 1.36 s (1.25 s of it computing the
/// matrix naively — this function's symmetric loop brings the whole call to 0.30 s on
/// MuSiQue-100's 1,890 MiniLM vectors), on raw vectors with brute force
/// 2.06 s, with its k-d tree 2.71 s; `petal-clustering` 0.14 0.90 s with Prim's MST and
/// 2.44 s with Borůvka. `petal-clustering` has no cluster-selection ε (the paper's ε) and
/// ties the workspace to its ndarray and rustc 1.90; `hdbscan` has ε, precalculated
/// distances and only `kdtree`/`num-traits` as dependencies.
pub fn hdbscan_clusters(emb: &Embeddings, config: &G2Config) -> Result<Vec<Option<usize>>> {
    let n = emb.rows();
    if n < 2 || n < config.min_cluster_size || n < config.min_samples() {
        return Ok(vec![None; n]);
    }
    if config.max_cluster_chunks > 0 && n > config.max_cluster_chunks {
        return Err(Error::invalid(
            "G2Config.max_cluster_chunks",
            format!(
                "{n} chunks to cluster; HDBSCAN's {n} × {n} distance matrix would take \
                 {:.1} GB, above the bound of {} chunks (raise it if the memory is there)",
                (n as f64) * (n as f64) * 4.0 / 1e9,
                config.max_cluster_chunks
            ),
        ));
    }
    let mut unit = emb.clone();
    unit.normalize();
    let mut dist = vec![vec![0.0f32; n]; n];
    for i in 0..n {
        let a = unit.row(i);
        let (head, tail) = dist.split_at_mut(i + 1);
        let row_i = &mut head[i];
        for (off, row_j) in tail.iter_mut().enumerate() {
            let j = i + 1 + off;
            let c = dot(a, unit.row(j));
            let d = (1.0 - c).clamp(0.0, 2.0);
            let d = match config.distance {
                ClusterDistance::Cosine => d,
                ClusterDistance::Euclidean => (2.0 * d).sqrt(),
            };
            let d = if d.is_nan() { 1.0 } else { d };
            row_i[j] = d;
            row_j[i] = d;
        }
    }
    let params = hdbscan::HdbscanHyperParams::builder()
        .min_cluster_size(config.min_cluster_size)
        .min_samples(config.min_samples())
        .epsilon(config.epsilon as f64)
        .allow_single_cluster(config.allow_single_cluster)
        .dist_metric(hdbscan::DistanceMetric::Precalculated)
        .build();
    // The crate panics on some inputs it does not validate; none should reach it after
    // the checks above, but a panic must not escape lprag.
    let labels = std::panic::catch_unwind(|| hdbscan::Hdbscan::new(&dist, params).cluster())
        .map_err(|_| Error::backend("hdbscan", "HDBSCAN panicked"))?
        .map_err(|e| Error::backend("hdbscan", e.to_string()))?;
    Ok(labels
        .into_iter()
        .map(|l| usize::try_from(l).ok())
        .collect())
}

/// Steps 3–4 for one cluster: the weakly connected components of its k-NN graph, each as
/// its list of subgroups (components of the edges with distance ≤ δ), as chunk ids.
pub fn split_cluster(
    emb: &Embeddings,
    members: &[ChunkId],
    k: usize,
    delta: f32,
) -> Vec<Vec<Vec<ChunkId>>> {
    let edges = cluster_knn(emb, members, k);
    let comps = components(members.len(), edges.iter().map(|&(a, b, _)| (a, b)));
    let subs = components(
        members.len(),
        edges
            .iter()
            .filter(|&&(_, _, d)| d <= delta)
            .map(|&(a, b, _)| (a, b)),
    );
    // Every subgroup lies inside one component (its edges are a subset).
    let mut comp_of = vec![0usize; members.len()];
    for (c, comp) in comps.iter().enumerate() {
        for &x in comp {
            comp_of[x] = c;
        }
    }
    let mut out: Vec<Vec<Vec<ChunkId>>> = vec![Vec::new(); comps.len()];
    for s in subs {
        let c = comp_of[s[0]];
        out[c].push(s.into_iter().map(|x| members[x]).collect());
    }
    out
}

/// The normalised mean of the members' unit vectors (all zeros for an empty list or
/// zero vectors).
pub fn centroid(emb: &Embeddings, members: &[ChunkId]) -> Vec<f32> {
    let mut c = vec![0.0f32; emb.dim()];
    for &m in members {
        let row = emb.row(m);
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            c.iter_mut().zip(row).for_each(|(a, x)| *a += x / n);
        }
    }
    let n = c.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        c.iter_mut().for_each(|x| *x /= n);
    }
    c
}

/// Step 5's union: `groups` merged along the pairs `(r, s)` judged "merge", as the
/// connected components of those pairs (each result sorted; order of first group).
pub fn merge_groups(groups: &[Vec<ChunkId>], merge: &[(usize, usize)]) -> Vec<Vec<ChunkId>> {
    components(groups.len(), merge.iter().copied())
        .into_iter()
        .map(|set| {
            let mut members: Vec<ChunkId> = set.iter().flat_map(|&g| groups[g].clone()).collect();
            members.sort_unstable();
            members
        })
        .collect()
}
