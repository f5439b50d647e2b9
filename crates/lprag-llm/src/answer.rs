//! Answering from retrieved chunks: COMBINE(q, C_q) with the D.2 prompt (LP-RAG §3.5).

use std::sync::Arc;

use lprag_core::{ChunkId, ScoredChunk};
use serde::{Deserialize, Serialize};

use crate::jobs::{settings_methods, Settings};
use crate::{ChatMessage, ChatModel, ChatRequest, LlmError, Usage};

/// An LLM answer and what it was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The model's answer.
    pub text: String,
    /// The chunks shown to the model, in the order shown (descending score).
    pub chunk_ids: Vec<ChunkId>,
    /// Tokens spent, when the backend reported them.
    pub usage: Option<Usage>,
}

/// Answers a question from retrieved chunks.
pub struct AnswerGenerator {
    settings: Settings,
}

impl AnswerGenerator {
    /// The D.2 prompt on `model`, temperature 0, at most 512 tokens per answer.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            settings: Settings::new(model, 512),
        }
    }

    settings_methods!("answer");

    /// COMBINE: the request for `query` over `chunks`, which are shown in descending score
    /// order whatever order they come in. Also returns the ids in the order shown.
    pub fn request(
        &self,
        query: &str,
        chunks: &[ScoredChunk],
    ) -> Result<(ChatRequest, Vec<ChunkId>), LlmError> {
        let p = &self.settings.prompts;
        let mut sorted: Vec<&ScoredChunk> = chunks.iter().collect();
        sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut bag = Vec::with_capacity(sorted.len());
        for (i, c) in sorted.iter().enumerate() {
            let rank = (i + 1).to_string();
            let score = format!("{:.2}", c.score);
            bag.push(p.answer_chunk.render(&[
                ("rank", &rank),
                ("score", &score),
                ("text", &c.chunk.text),
            ])?);
        }
        let request = self.settings.request(vec![
            ChatMessage::system(p.answer_system.render(&[])?),
            ChatMessage::user(
                p.answer_user
                    .render(&[("chunks", &bag.join("\n")), ("query", query)])?,
            ),
        ]);
        Ok((request, sorted.iter().map(|c| c.chunk.id).collect()))
    }

    /// Ask the model.
    pub async fn answer(&self, query: &str, chunks: &[ScoredChunk]) -> Result<Answer, LlmError> {
        let (request, chunk_ids) = self.request(query, chunks)?;
        let response = self.settings.call("answer", &request).await?;
        Ok(Answer {
            text: response.content.trim().to_string(),
            chunk_ids,
            usage: response.usage,
        })
    }
}

/// What the model is told when an answer must cite its chunks: appended to the system
/// prompt by [`AnswerGenerator::answer_with_citations`]. The chunks are numbered as shown
/// (`1.`, `2.`, … in the D.2 layout), and the markers refer to those numbers.
pub const CITATION_INSTRUCTION: &str = "After each sentence of your answer, cite the chunks it relies on by their numbers in square brackets, for example [1] or [2][3]. Cite only chunks you used.";

/// One chunk an answer relies on, from one of the model's `[n]` markers, checked against
/// the chunks the model was shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The number the model wrote: the chunk's 1-based position in the bag shown.
    pub marker: usize,
    /// Byte range of the whole bracket (`[2]`, `[1, 3]`) in [`Answer::text`], for a UI to
    /// turn into a link.
    pub at: std::ops::Range<usize>,
    /// The cited chunk.
    pub chunk_id: ChunkId,
    /// Its document's id.
    pub document_id: String,
    /// Its document's title.
    pub title: String,
    /// Its byte span in the document's text.
    pub span: std::ops::Range<usize>,
}

/// An answer with the chunks it cites ([`AnswerGenerator::answer_with_citations`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CitedAnswer {
    /// The answer, markers included, and the chunks shown.
    pub answer: Answer,
    /// Every marker that names a chunk the model was shown, in the order written.
    pub citations: Vec<Citation>,
    /// Markers that name no chunk shown (`[7]` when five were shown): the model cited
    /// something it did not see. Reported, never mapped to a chunk.
    pub unverified: Vec<(usize, std::ops::Range<usize>)>,
}

impl CitedAnswer {
    /// The cited chunks' ids, each once, in the order first cited.
    pub fn cited_chunks(&self) -> Vec<ChunkId> {
        let mut seen = Vec::new();
        for c in &self.citations {
            if !seen.contains(&c.chunk_id) {
                seen.push(c.chunk_id);
            }
        }
        seen
    }
}

impl AnswerGenerator {
    /// [`AnswerGenerator::answer`] with citations: the model is also told
    /// [`CITATION_INSTRUCTION`], and its `[n]` markers (also `[1, 3]`, `[Chunk 2]`) are read
    /// back and checked against the chunks shown; see [`CitedAnswer`].
    ///
    /// # Errors
    /// Those of [`AnswerGenerator::answer`].
    pub async fn answer_with_citations(
        &self,
        query: &str,
        chunks: &[ScoredChunk],
    ) -> Result<CitedAnswer, LlmError> {
        let (mut request, chunk_ids) = self.request(query, chunks)?;
        if let Some(system) = request.messages.first_mut() {
            system.content = format!("{} {CITATION_INSTRUCTION}", system.content);
        }
        let response = self.settings.call("answer", &request).await?;
        let answer = Answer {
            text: response.content.trim().to_string(),
            chunk_ids,
            usage: response.usage,
        };
        Ok(cite(answer, chunks))
    }
}

impl AnswerGenerator {
    /// [`AnswerGenerator::answer`] (or, with `citations`,
    /// [`AnswerGenerator::answer_with_citations`]'s prompt) streamed: the answer's text as
    /// the model writes it ([`ChatModel::complete_stream`](crate::ChatModel::complete_stream)),
    /// and the ids of the chunks in the order shown. Once the text is complete,
    /// `cite(Answer { text, chunk_ids, usage: None }, chunks)` reads its markers.
    ///
    /// # Errors
    /// Those of the prompt's templates and of opening the stream.
    pub async fn answer_stream(
        &self,
        query: &str,
        chunks: &[ScoredChunk],
        citations: bool,
    ) -> Result<(crate::TextStream, Vec<ChunkId>), LlmError> {
        let (mut request, chunk_ids) = self.request(query, chunks)?;
        if citations {
            if let Some(system) = request.messages.first_mut() {
                system.content = format!("{} {CITATION_INSTRUCTION}", system.content);
            }
        }
        let text = self.settings.model.complete_stream(&request).await?;
        Ok((text, chunk_ids))
    }
}

/// Read the `[n]` markers of `answer` against `chunks` (the chunks it was given; shown in
/// the order of [`Answer::chunk_ids`]).
pub fn cite(answer: Answer, chunks: &[ScoredChunk]) -> CitedAnswer {
    let mut citations = Vec::new();
    let mut unverified = Vec::new();
    for (marker, at) in markers(&answer.text) {
        let shown = marker
            .checked_sub(1)
            .and_then(|i| answer.chunk_ids.get(i))
            .and_then(|id| chunks.iter().find(|c| c.chunk.id == *id));
        match shown {
            Some(c) => citations.push(Citation {
                marker,
                at,
                chunk_id: c.chunk.id,
                document_id: c.chunk.provenance.document_id.clone(),
                title: c.chunk.provenance.title.clone(),
                span: c.chunk.provenance.span.clone(),
            }),
            None => unverified.push((marker, at)),
        }
    }
    CitedAnswer {
        answer,
        citations,
        unverified,
    }
}

/// Every citation marker of `text`: `(number, byte range of its bracket)`. A bracket
/// counts when it holds only numbers separated by commas, spaces or "and", each optionally
/// after the word "chunk" (`[2]`, `[1, 3]`, `[Chunk 4]`); anything else in brackets is text.
fn markers(text: &str) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find('[').map(|i| from + i) {
        let Some(close) = text[open + 1..].find(']').map(|i| open + 1 + i) else {
            break;
        };
        let inner = &text[open + 1..close];
        if inner.contains('[') {
            from = open + 1;
            continue;
        }
        let lowered = inner.to_lowercase();
        let words: Vec<&str> = lowered
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty() && *w != "chunk" && *w != "chunks" && *w != "and")
            .collect();
        let numbers: Option<Vec<usize>> = words.iter().map(|w| w.parse().ok()).collect();
        match numbers {
            Some(ns) if !ns.is_empty() => {
                out.extend(ns.into_iter().map(|n| (n, open..close + 1)));
            }
            _ => {}
        }
        from = close + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use lprag_core::{Chunk, Provenance};

    use super::*;

    fn chunk(id: usize, doc: &str, span: std::ops::Range<usize>) -> ScoredChunk {
        ScoredChunk {
            chunk: Chunk {
                id,
                text: format!("chunk {id}"),
                provenance: Provenance {
                    document_id: doc.into(),
                    title: format!("title {doc}"),
                    span,
                },
                metadata: Default::default(),
            },
            score: 1.0 / (id as f32 + 1.0),
        }
    }

    #[test]
    fn markers_are_read_with_their_brackets() {
        let t = "Warsaw [2]. It is in Poland [1, 3][Chunk 4]. See [note] and [x1] [].";
        let m = markers(t);
        let got: Vec<(usize, &str)> = m.iter().map(|(n, r)| (*n, &t[r.clone()])).collect();
        assert_eq!(
            got,
            [(2, "[2]"), (1, "[1, 3]"), (3, "[1, 3]"), (4, "[Chunk 4]")]
        );
        assert!(markers("no brackets, or an open [1 one").is_empty());
        assert_eq!(markers("nested [[2]]")[0].0, 2);
    }

    #[test]
    fn citations_map_markers_to_the_chunks_shown_and_report_the_rest() {
        // Shown in the order 9, 4 (ids), so [1] is chunk 9 and [2] chunk 4.
        let chunks = [chunk(4, "warsaw", 10..40), chunk(9, "curie", 0..31)];
        let answer = Answer {
            text:
                "Curie was born in Warsaw [1]. It lies on the Vistula [2][1]; see also [5] and [0]."
                    .into(),
            chunk_ids: vec![9, 4],
            usage: None,
        };
        let cited = cite(answer, &chunks);
        let got: Vec<(usize, ChunkId, &str)> = cited
            .citations
            .iter()
            .map(|c| (c.marker, c.chunk_id, c.document_id.as_str()))
            .collect();
        assert_eq!(got, [(1, 9, "curie"), (2, 4, "warsaw"), (1, 9, "curie")]);
        assert_eq!(cited.citations[1].span, 10..40);
        assert_eq!(cited.citations[1].title, "title warsaw");
        let text = &cited.answer.text;
        assert_eq!(&text[cited.citations[1].at.clone()], "[2]");
        let bad: Vec<usize> = cited.unverified.iter().map(|(n, _)| *n).collect();
        assert_eq!(bad, [5, 0]);
        assert_eq!(cited.cited_chunks(), [9, 4]);
    }
}
