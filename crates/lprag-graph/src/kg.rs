//! Knowledge-graph construction (GFM-RAG's index): [`KgBuilder`] collects entities,
//! mentions, relations and triples chunk by chunk and emits checked [`KgEdges`] with an
//! inverse relation for every relation.

use std::collections::{HashMap, HashSet};

use crate::{GraphError, KgEdges};

/// The only relation of a KG without triples (no edge uses it).
pub const NO_RELATION: &str = "related to";

/// Normalised entity key: lower case, single spaces.
pub fn entity_key(name: &str) -> String {
    name.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A knowledge graph under construction: entities merged by [`entity_key`], their
/// mentions (chunk ids), relations and `(subject, relation, object)` triples, as GFM-RAG
/// collects them from each chunk's extraction.
#[derive(Debug, Default, Clone)]
pub struct KgBuilder {
    /// Entity names by id (the first spelling seen, whitespace collapsed).
    pub names: Vec<String>,
    /// Entity id by [`entity_key`].
    pub ids: HashMap<String, u32>,
    /// The chunks that mention each entity, by entity id.
    pub mentions: Vec<HashSet<u32>>,
    /// Relation names by id (keys, lower case).
    pub relation_names: Vec<String>,
    /// Relation id by key.
    pub relation_ids: HashMap<String, u32>,
    /// The distinct `(subject, relation, object)` triples.
    pub triples: HashSet<(u32, u32, u32)>,
}

impl KgBuilder {
    /// The id of entity `name`, added when new; `None` for a name without a word.
    pub fn entity(&mut self, name: &str) -> Option<u32> {
        let key = entity_key(name);
        if key.is_empty() {
            return None;
        }
        Some(match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.names
                    .push(name.split_whitespace().collect::<Vec<_>>().join(" "));
                self.ids.insert(key, id);
                self.mentions.push(HashSet::new());
                id
            }
        })
    }

    /// [`KgBuilder::entity`], recording that `chunk` mentions it.
    pub fn mention(&mut self, name: &str, chunk: usize) -> Option<u32> {
        let id = self.entity(name)?;
        self.mentions[id as usize].insert(chunk as u32);
        Some(id)
    }

    /// The id of relation `name`, added when new.
    pub fn relation(&mut self, name: &str) -> u32 {
        let key = entity_key(name);
        if let Some(&id) = self.relation_ids.get(&key) {
            return id;
        }
        let id = self.relation_names.len() as u32;
        self.relation_names.push(key.clone());
        self.relation_ids.insert(key, id);
        id
    }

    /// Add the triple `(s, r, o)` read from `chunk` (both entities are mentioned by it);
    /// a triple with an empty relation or one entity on both sides is skipped.
    pub fn triple(&mut self, s: &str, r: &str, o: &str, chunk: usize) {
        if entity_key(r).is_empty() {
            return;
        }
        if let (Some(a), Some(b)) = (self.mention(s, chunk), self.mention(o, chunk)) {
            if a != b {
                let r = self.relation(r);
                self.triples.insert((a, r, b));
            }
        }
    }

    /// Each entity's mentions, ascending.
    pub fn mentions_sorted(&self) -> Vec<Vec<u32>> {
        self.mentions
            .iter()
            .map(|m| {
                let mut v: Vec<u32> = m.iter().copied().collect();
                v.sort_unstable();
                v
            })
            .collect()
    }

    /// Triples in a fixed order plus their inverses (relation `r + R`, named
    /// `"inverse of r"`), and every relation name.
    pub fn edges(&self) -> Result<(KgEdges, Vec<String>), GraphError> {
        let r = self.relation_names.len() as u32;
        let mut triples: Vec<(u32, u32, u32)> = self.triples.iter().copied().collect();
        triples.sort_unstable();
        let mut all = Vec::with_capacity(triples.len() * 2);
        all.extend(triples.iter().copied());
        all.extend(triples.iter().map(|&(s, rel, o)| (o, rel + r, s)));
        let mut names = self.relation_names.clone();
        names.extend(
            self.relation_names
                .iter()
                .map(|n| format!("inverse of {n}")),
        );
        if names.is_empty() {
            // A KG without any triple still needs one relation for the network's shapes;
            // no edge uses it.
            names.push(NO_RELATION.to_string());
        }
        Ok((KgEdges::new(self.names.len(), names.len(), &all)?, names))
    }
}
