//! Parent-document scoring: the chunks of one document compete as one entry of the
//! ranking (scored by their best chunk or their mean), and are returned together, best
//! chunk first.

use std::collections::HashMap;

use lprag_core::{Chunk, ChunkId, Selection};
use serde::{Deserialize, Serialize};

/// How the chunks of one document ([`lprag_core::Provenance::document_id`]) are ranked.
///
/// A document split into several chunks (a long passage cut to fit the encoder, a file
/// cut into sections) would otherwise take several places of the ranking, and each of its
/// chunks competes with the other documents on its own: a tail that happens to match a
/// query pushes out another document whose best part matches it better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentScoring {
    /// Every chunk is ranked on its own (the papers' setting).
    Chunks,
    /// A document is ranked by its best chunk; its other candidate chunks follow that one.
    #[default]
    Best,
    /// A document is ranked by the mean score of all its chunks (every chunk of a
    /// candidate's document is scored, so a document whose one chunk matches by chance
    /// but whose others do not is ranked below one that matches throughout). LP-RAG
    /// averages the chunks' logits and shows σ of the mean.
    Mean,
}

impl ParentScoring {
    /// Whether every chunk of a candidate's document must be scored.
    pub(crate) fn scores_siblings(self) -> bool {
        matches!(self, ParentScoring::Mean)
    }
}

/// [`Parents`] made one chunk at a time, in chunk order (from records streamed off disk).
#[derive(Debug, Default)]
pub(crate) struct ParentsBuilder {
    index: HashMap<String, u32>,
    of: Vec<u32>,
}

impl ParentsBuilder {
    /// The next chunk belongs to `document_id`.
    pub(crate) fn push(&mut self, document_id: &str) {
        let next = self.index.len() as u32;
        let p = match self.index.get(document_id) {
            Some(&p) => p,
            None => {
                self.index.insert(document_id.to_string(), next);
                next
            }
        };
        self.of.push(p);
    }

    /// The chunks' documents.
    pub(crate) fn finish(self) -> Parents {
        let documents = self.index.len();
        drop(self.index);
        // Each document's chunks as one slice of `members` (chunk order within it).
        let mut start = vec![0u32; documents + 1];
        for &p in &self.of {
            start[p as usize + 1] += 1;
        }
        for d in 0..documents {
            start[d + 1] += start[d];
        }
        let mut next = start.clone();
        let mut members = vec![0u32; self.of.len()];
        for (c, &p) in self.of.iter().enumerate() {
            members[next[p as usize] as usize] = c as u32;
            next[p as usize] += 1;
        }
        Parents {
            of: self.of,
            start,
            members,
        }
    }
}

/// Each chunk's document, and each document's chunks (in chunk order): document `d`'s are
/// `members[start[d]..start[d + 1]]`.
#[derive(Debug, Default)]
pub(crate) struct Parents {
    of: Vec<u32>,
    start: Vec<u32>,
    members: Vec<u32>,
}

impl Parents {
    /// The documents of `chunks` (by [`lprag_core::Provenance::document_id`]).
    pub(crate) fn of(chunks: &[Chunk]) -> Self {
        let mut builder = ParentsBuilder::default();
        for c in chunks {
            builder.push(&c.provenance.document_id);
        }
        builder.finish()
    }

    /// The document of chunk `c`.
    pub(crate) fn parent(&self, c: ChunkId) -> u32 {
        self.of[c]
    }

    /// `candidates` with every other chunk of their documents appended (each once, those
    /// `keep` admits).
    pub(crate) fn with_siblings(
        &self,
        candidates: &[ChunkId],
        keep: &dyn Fn(ChunkId) -> bool,
    ) -> Vec<ChunkId> {
        let mut seen: std::collections::HashSet<ChunkId> = candidates.iter().copied().collect();
        let mut out = candidates.to_vec();
        for &c in candidates {
            let d = self.of[c] as usize;
            let siblings = &self.members[self.start[d] as usize..self.start[d + 1] as usize];
            for s in siblings.iter().map(|&s| s as ChunkId) {
                if keep(s) && seen.insert(s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// Rank `scored` (chunk, score) under `mode`: documents by their score, best first
    /// (ties to the lower chunk id), each document's chunks together, best chunk first,
    /// every chunk carrying its document's score; `selection` counts documents.
    /// [`ParentScoring::Chunks`] ranks and selects the chunks themselves. The scores
    /// returned, and those `selection` reads, are `shown` of the document's (or chunk's)
    /// score (an increasing function: LP-RAG's σ of a logit).
    pub(crate) fn rank(
        &self,
        scored: Vec<(ChunkId, f32)>,
        mode: ParentScoring,
        selection: Option<Selection>,
        shown: impl Fn(f32) -> f32,
    ) -> Vec<(ChunkId, f32)> {
        let mut scored = scored;
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if mode == ParentScoring::Chunks {
            let scored = scored.into_iter().map(|(c, s)| (c, shown(s))).collect();
            return match selection {
                Some(s) => s.apply(scored, |x| x.1),
                None => scored,
            };
        }
        // Groups in the order of their best chunk.
        let mut slot: HashMap<u32, usize> = HashMap::new();
        let mut groups: Vec<(f32, Vec<(ChunkId, f32)>)> = Vec::new();
        for (c, s) in scored {
            let p = self.of[c];
            let g = *slot.entry(p).or_insert_with(|| {
                groups.push((0.0, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push((c, s));
        }
        for (score, members) in &mut groups {
            *score = match mode {
                ParentScoring::Mean => {
                    members.iter().map(|m| m.1 as f64).sum::<f64>() as f32 / members.len() as f32
                }
                _ => members[0].1,
            };
        }
        // Stable: equal documents keep the order of their best chunks.
        groups.sort_by(|a, b| b.0.total_cmp(&a.0));
        groups.iter_mut().for_each(|g| g.0 = shown(g.0));
        let groups = match selection {
            Some(s) => s.apply(groups, |g| g.0),
            None => groups,
        };
        groups
            .into_iter()
            .flat_map(|(score, members)| members.into_iter().map(move |(c, _)| (c, score)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lprag_core::Provenance;

    fn chunk(id: usize, doc: &str) -> Chunk {
        Chunk::new(
            id,
            format!("chunk {id}"),
            Provenance {
                document_id: doc.into(),
                title: doc.into(),
                span: 0..1,
            },
        )
    }

    fn parents() -> Parents {
        // a: 0, 1, 2; b: 3; c: 4, 5
        Parents::of(&[
            chunk(0, "a"),
            chunk(1, "a"),
            chunk(2, "a"),
            chunk(3, "b"),
            chunk(4, "c"),
            chunk(5, "c"),
        ])
    }

    #[test]
    fn siblings_come_from_the_chunks_documents_when_documents_interleave() {
        // a: 0, 2, 5; b: 1, 4; c: 3
        let docs = ["a", "b", "a", "c", "b", "a"];
        let chunks: Vec<Chunk> = docs.iter().enumerate().map(|(i, d)| chunk(i, d)).collect();
        let p = Parents::of(&chunks);
        assert_eq!(
            (0..6).map(|c| p.parent(c)).collect::<Vec<_>>(),
            [0, 1, 0, 2, 1, 0]
        );
        assert_eq!(p.with_siblings(&[2], &|_| true), [2, 0, 5]);
        assert_eq!(p.with_siblings(&[4, 3], &|_| true), [4, 3, 1]);
        assert_eq!(p.with_siblings(&[0, 5], &|c| c != 2), [0, 5]);
        assert_eq!(
            Parents::of(&[]).with_siblings(&[], &|_| true),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn best_chunk_ranks_documents_and_keeps_their_chunks_together() {
        let p = parents();
        let scored = vec![(2, 0.9), (3, 0.8), (0, 0.7), (4, 0.75)];
        let ranked = p.rank(scored, ParentScoring::Best, None, |x| x);
        assert_eq!(ranked, vec![(2, 0.9), (0, 0.9), (3, 0.8), (4, 0.75)]);
        // TopK counts documents: a (two chunks) and b.
        let top = p.rank(
            vec![(2, 0.9), (3, 0.8), (0, 0.7), (4, 0.75)],
            ParentScoring::Best,
            Some(Selection::TopK(2)),
            |x| x,
        );
        assert_eq!(top, vec![(2, 0.9), (0, 0.9), (3, 0.8)]);
    }

    #[test]
    fn mean_lets_a_document_that_matches_throughout_win() {
        let p = parents();
        let all = p.with_siblings(&[2, 4], &|_| true);
        assert_eq!(all, vec![2, 4, 0, 1, 5]);
        // a's best chunk is the best chunk overall, but its mean (0.5) is below c's (0.7).
        let scored = vec![(2, 0.9), (0, 0.3), (1, 0.3), (4, 0.7), (5, 0.7)];
        let ranked = p.rank(scored.clone(), ParentScoring::Mean, None, |x| x);
        assert_eq!(ranked[0].0, 4);
        assert!((ranked[0].1 - 0.7).abs() < 1e-6);
        assert_eq!(ranked[2].0, 2);
        assert!((ranked[2].1 - 0.5).abs() < 1e-6);
        let chunks = p.rank(
            scored,
            ParentScoring::Chunks,
            Some(Selection::TopK(2)),
            |x| x,
        );
        assert_eq!(chunks, vec![(2, 0.9), (4, 0.7)]);
    }

    #[test]
    fn a_threshold_reads_the_shown_scores() {
        let p = parents();
        // logits -2 (a) and 1 (b): σ 0.12 and 0.73
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        let scored = vec![(0, -2.0), (3, 1.0)];
        let all = p.rank(
            scored.clone(),
            ParentScoring::Mean,
            Some(Selection::Threshold(0.1)),
            sigmoid,
        );
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|&(_, s)| s > 0.0 && s < 1.0));
        let half = p.rank(
            scored,
            ParentScoring::Chunks,
            Some(Selection::Threshold(0.5)),
            sigmoid,
        );
        assert_eq!(half.len(), 1);
        assert_eq!(half[0].0, 3);
    }

    #[test]
    fn siblings_respect_the_filter() {
        let p = parents();
        let allowed = [true, false, true, true, true, true];
        assert_eq!(p.with_siblings(&[2], &|c| allowed[c]), vec![2, 0]);
    }
}
