//! The papers' prompts as templates users can override.
//!
//! Placeholders are written `{{name}}` (double braces, so JSON examples inside prompts
//! need no escaping). [`Template::render`] fails when the template uses a placeholder it
//! was not given, and [`Prompts::validate`] fails when a template lacks one it needs — so a
//! user's custom template that forgot `{{chunks}}` is an error, not a prompt without the
//! chunks.
//!
//! Sources: LP-RAG Appendix D (Box D.1 chunk extraction = C-PROMPT, Box D.2 query
//! response, Box D.3 synthetic query generation = S-PROMPT) and QCG-RAG Appendix C.1
//! (Doc2Query). The texts are the papers' with the PDF's typesetting removed; QCG-RAG's
//! fixed "20" queries became `{{num_queries}}` (default 20). G²RAG's merge function
//! M_LLM (§2.2, Eq. 8) has no published prompt: lprag's own asks for a yes/no verdict.

use serde::{Deserialize, Serialize};

use crate::LlmError;

/// A prompt text with `{{name}}` placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Template(pub String);

impl Template {
    /// A template from its text.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The placeholder names the template uses, in order of first use.
    pub fn placeholders(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let mut rest = self.0.as_str();
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            match after.find("}}") {
                Some(end) => {
                    let name = &after[..end];
                    if is_ident(name) && !out.contains(&name) {
                        out.push(name);
                    }
                    rest = &after[end + 2..];
                }
                None => break,
            }
        }
        out
    }

    /// Check that the template uses every placeholder in `names`.
    pub fn require(&self, what: &str, names: &[&str]) -> Result<(), LlmError> {
        let used = self.placeholders();
        match names.iter().find(|n| !used.contains(n)) {
            Some(k) => Err(LlmError::Permanent(format!(
                "prompt template `{what}` lacks the placeholder {{{{{k}}}}}"
            ))),
            None => Ok(()),
        }
    }

    /// Fill every placeholder from `vars` (values may go unused). A placeholder with no
    /// value is an error naming it.
    pub fn render(&self, vars: &[(&str, &str)]) -> Result<String, LlmError> {
        for name in self.placeholders() {
            if !vars.iter().any(|(k, _)| *k == name) {
                return Err(LlmError::Permanent(format!(
                    "prompt template uses {{{{{name}}}}} but no value was given for it"
                )));
            }
        }
        let mut out = String::with_capacity(self.0.len() + 256);
        let mut rest = self.0.as_str();
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find("}}") {
                Some(end) if is_ident(&after[..end]) => {
                    let name = &after[..end];
                    let value = vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
                    out.push_str(value.unwrap_or_default());
                    rest = &after[end + 2..];
                }
                _ => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every prompt lprag's LLM components send. `Prompts::default()` is the papers'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prompts {
    /// LP-RAG C-PROMPT, system turn (Box D.1).
    pub chunk_system: Template,
    /// LP-RAG C-PROMPT, user turn; placeholder `{{paragraph}}`.
    pub chunk_user: Template,
    /// LP-RAG S-PROMPT, system turn (Box D.3).
    pub query_system: Template,
    /// LP-RAG S-PROMPT, user turn; placeholder `{{chunks}}` (the rendered bag).
    pub query_user: Template,
    /// One chunk of the S-PROMPT bag; placeholders `{{index}}` (1-based) and `{{text}}`.
    pub query_chunk: Template,
    /// QCG-RAG Doc2Query prompt, system turn (Prompt C.1); placeholder `{{num_queries}}`.
    pub doc2query_system: Template,
    /// Doc2Query user turn; placeholder `{{chunk}}`.
    pub doc2query_user: Template,
    /// LP-RAG query response prompt, system turn (Box D.2).
    pub answer_system: Template,
    /// Query response user turn (COMBINE); placeholders `{{chunks}}` and `{{query}}`.
    pub answer_user: Template,
    /// One retrieved chunk in the answer prompt; placeholders `{{rank}}` (1-based, by
    /// descending score), `{{score}}` and `{{text}}`.
    pub answer_chunk: Template,
    /// G²RAG merge decision M_LLM (lprag's prompt; the paper publishes none), system turn.
    pub merge_system: Template,
    /// G²RAG merge decision, user turn; placeholders `{{group_a}}` and `{{group_b}}` (each
    /// a rendered list of `merge_chunk`s).
    pub merge_user: Template,
    /// One passage of a G²RAG subgroup; placeholders `{{index}}` (1-based) and `{{text}}`.
    pub merge_chunk: Template,
    /// GFM-RAG OpenIE (HippoRAG-style named entities and triples in one JSON answer),
    /// system turn.
    pub openie_system: Template,
    /// OpenIE user turn; placeholders `{{title}}` and `{{passage}}`.
    pub openie_user: Template,
    /// lprag's own: the turn that re-asks after an answer could not be parsed (sent after
    /// the model's answer, see the components' `parse_retries`); placeholder
    /// `{{reason}}`.
    pub reformat_user: Template,
}

const CHUNK_SYSTEM: &str = "You are required to act as an AI annotator and extract the Chunks embedded in the sentences of the provided paragraph text. Below, you will be given a paragraph from a text. You need to break it down sentence by sentence and extract the Chunks embedded in each sentence. The extracted Chunks can be an idea, argument, or fact. Each sentence may contain one or more Chunks to be extracted. The extracted Chunks should be as granular as possible to ensure they cannot be further broken down.

When extracting Chunks from a sentence, pay attention to the context within the paragraph. Replace pronouns with the nouns they represent and complete any omitted sentence components to ensure the independence of the Chunks is not compromised. This means that each extracted Chunk should not contain pronouns whose referents cannot be found within that Chunk.

Below is an example interaction that can serve as a reference for format and method of extracting Chunks:

System's Input:
[The Start of Paragraph text]
Pakistan Super League (Urdu: PSL) is a Twenty20 cricket league, founded in Lahore on 9 September 2015 with five teams and now comprises six teams. Instead of operating as an association of independently owned teams, the league is a single entity in which each franchise is owned and controlled by investors.
[The End of Paragraph text]

Your Answer:
[Sentence 1]
Pakistan Super League (Urdu: PSL) is a Twenty20 cricket league, founded in Lahore on 9 September 2015 with five teams and now comprises six teams.
[Extracted Chunks in Sentence 1]
[Pakistan Super League (PSL) is a Twenty20 cricket league.]
[Pakistan Super League (PSL) was founded in Lahore on 9 September 2015.]
[Pakistan Super League (PSL) was founded with five teams.]
[Pakistan Super League (PSL) now comprises six teams.]
[Sentence 2]
Instead of operating as an association of independently owned teams, the league is a single entity in which each franchise is owned and controlled by investors.
[Extracted Chunks in Sentence 2]
[Pakistan Super League (PSL) does not operate as an association of independently owned teams.]
[Pakistan Super League (PSL) operates as a single entity.]
[Each franchise in the Pakistan Super League (PSL) is owned by investors.]
[Each franchise in the Pakistan Super League (PSL) is controlled by investors.]";

const CHUNK_USER: &str = "[The Start of Paragraph text]
{{paragraph}}
[The End of Paragraph text]";

const QUERY_SYSTEM: &str = "You are required to act as an AI annotator and generate questions in the provided paragraph chunks. Below, you will be given a bag of chunks from a paragraph. You need to generate two questions about it for each chunk. The generated two questions need to be like a human made question and each chunk may contain two questions. The question generated should be as similar as possible to a human question.

When generating the two questions from a chunk, pay attention to the context within the chunk.

Below is an example interaction that can serve as a reference for format and method of generate questions:

System's Input:
[The Start bag of chunks]
[Chunk 1]
We propose a model-based reinforcement learning (MBRL) approach for continuous action spaces.
[Chunk 2]
Bthardamz is only accessible during the quest The Only Cure.
[The End bag of chunks]

Your Answer:
[Questions Chunk 1]
[What type of reinforcement learning approach was proposed?]
[What type of action spaces does the proposed approach target?]
[Questions Chunk 2]
[When can Bthardamz be accessed?]
[What quest must be completed to access Bthardamz?]";

const QUERY_USER: &str = "[The Start bag of chunks]
{{chunks}}
[The End bag of chunks]";

const QUERY_CHUNK: &str = "[Chunk {{index}}]
{{text}}";

const DOC2QUERY_SYSTEM: &str = "---Role---
You are a **Doc2Query** assistant.
---Goal---
Given a text chunk, generate {{num_queries}} distinct user queries that can be directly answered by that chunk.
For each query, also provide an exact answer and a relevance score.
---Generation rules---
1. **Answerability** - Every query must be answerable using only information in the chunk.
2. **Comprehensive coverage** - Collectively, the all generated queries should cover all key ideas in the chunk from different viewpoints or levels of detail.
3. **Diversity requirements** - Ensure diversity along the following dimensions:
- *Question-style variety* - Mix interrogative forms (who/what/why/how/where/when/did), imperative prompts (\"List...\", \"Summarize...\"), comparative questions, conditional or speculative forms, etc.
- *Content-perspective variety* - Include queries on facts, definitions, methods, reasons, outcomes, examples, comparisons, limitations, and so on.
- *Information granularity* - Combine macro (overall purpose, high-level summary) and micro (specific figures, terms, steps) queries.
- *User-intent variety* - Simulate intents such as confirmation, evaluation, usability, diagnosis, and decision-making (e.g., \"Is this approach more efficient than ...?\").
- *Linguistic expression variety* - Vary wording, syntax (active <--> passive), and synonyms; avoid repeating near-identical phrases.
- *No redundancy* - Each query must be meaningfully distinct; eliminate trivial rephrases that offer no new angle.
- *Chunk-grounded specificity* - Queries must be grounded in specific factual points from the chunk. Avoid vague or generic formulations such as \"What did X say?\" or \"Tell me more about Y\" that lack anchoring in actual content.
4. **Required fields** - Each output item must be based on the given chunk and include the following fields:
- **query** - A question or search phrase a user might ask.
- **answer** - A concise answer taken verbatim (or nearly verbatim) from the chunk.
---Example---
1. **Input Chunk**
- Alice met with Bob at the Central Cafe on Tuesday to discuss their upcoming collaborative research project. During the meeting, Bob suggested incorporating advanced AI methodologies into their experimental design, which Alice enthusiastically supported. They agreed to present their initial findings at the International AI Conference next March.
2. **Generated Queries**
- Where did Alice and Bob meet?
- When did the meeting take place?
- What was the main topic discussed during the meeting?
- Who suggested incorporating advanced AI methodologies?
- Did Alice support Bob's suggestion about AI methodologies?
- When will Alice and Bob present their initial findings?
- At which conference will their findings be presented?
- What kind of methodologies were discussed?
- What is the nature of Alice and Bob's project?
- Who participated in the meeting at Central Cafe?
---Output format---
Return *only* the following JSON array; do not include any additional text. Include an `index` field for each query.
[
{\"index\": 0, \"query\": \"\", \"answer\": \"\"},
{\"index\": 1, \"query\": \"\", \"answer\": \"\"},
...
]";

const DOC2QUERY_USER: &str = "{{chunk}}";

const ANSWER_SYSTEM: &str = "You are a through assistant responding to questions based on retrieved information. Below, you'll find a bag of chunks and a query. Your job is to answer the query using only the information contained in the chunks. If the answer isn't in the chunks, simply answer: \"I don't know.\"";

const ANSWER_USER: &str = "[Bag of chunks]
{{chunks}}

[Query]
{{query}}";

const ANSWER_CHUNK: &str = "{{rank}}. {{text}}";

const MERGE_SYSTEM: &str = "You are helping to organise a document collection into communities of closely related passages. Below, you will be given two groups of passages that were placed near each other by their embeddings. Decide whether the two groups describe the same topic, entity or event closely enough to form one community.

Answer with a single word: \"yes\" if the two groups should be merged into one community, \"no\" if they should stay separate.";

const MERGE_USER: &str = "[Group A]
{{group_a}}

[Group B]
{{group_b}}

Should Group A and Group B be merged into one community? Answer yes or no.";

const MERGE_CHUNK: &str = "{{index}}. {{text}}";

const OPENIE_SYSTEM: &str = "Your task is to build a knowledge graph from a passage. First list the named entities of the passage (people, organisations, places, works, dates, events and other specific things). Then extract RDF triples [subject, relation, object] that state the passage's facts. Each triple should contain at least one, preferably two, of the named entities. Resolve pronouns to the entity they refer to. Keep relations short (a verb phrase such as \"born in\" or \"member of\").

Answer with JSON only, in this form:
{\"named_entities\": [\"Radio City\", \"India\", \"3 July 2001\"], \"triples\": [[\"Radio City\", \"located in\", \"India\"], [\"Radio City\", \"launched on\", \"3 July 2001\"]]}";

const OPENIE_USER: &str = "Title: {{title}}
Passage:
{{passage}}";

const REFORMAT_USER: &str = "Your answer could not be read ({{reason}}). Answer again with only the requested output, in exactly the format shown in the instructions, and no other text.";

impl Prompts {
    /// Check that every template has the placeholders its component fills in: a custom
    /// template that forgot the text it is about is an error before any call is paid for.
    pub fn validate(&self) -> Result<(), LlmError> {
        self.chunk_user.require("chunk_user", &["paragraph"])?;
        self.query_user.require("query_user", &["chunks"])?;
        self.query_chunk.require("query_chunk", &["text"])?;
        self.doc2query_user.require("doc2query_user", &["chunk"])?;
        self.answer_user
            .require("answer_user", &["chunks", "query"])?;
        self.answer_chunk.require("answer_chunk", &["text"])?;
        self.merge_user
            .require("merge_user", &["group_a", "group_b"])?;
        self.merge_chunk.require("merge_chunk", &["text"])?;
        self.openie_user.require("openie_user", &["passage"])?;
        self.reformat_user.require("reformat_user", &["reason"])?;
        Ok(())
    }
}

impl Default for Prompts {
    fn default() -> Self {
        Self {
            chunk_system: Template::new(CHUNK_SYSTEM),
            chunk_user: Template::new(CHUNK_USER),
            query_system: Template::new(QUERY_SYSTEM),
            query_user: Template::new(QUERY_USER),
            query_chunk: Template::new(QUERY_CHUNK),
            doc2query_system: Template::new(DOC2QUERY_SYSTEM),
            doc2query_user: Template::new(DOC2QUERY_USER),
            answer_system: Template::new(ANSWER_SYSTEM),
            answer_user: Template::new(ANSWER_USER),
            answer_chunk: Template::new(ANSWER_CHUNK),
            merge_system: Template::new(MERGE_SYSTEM),
            merge_user: Template::new(MERGE_USER),
            merge_chunk: Template::new(MERGE_CHUNK),
            openie_system: Template::new(OPENIE_SYSTEM),
            openie_user: Template::new(OPENIE_USER),
            reformat_user: Template::new(REFORMAT_USER),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_checks_both_directions() {
        let t = Template::new("a {{x}} b {{y}} {\"json\": 1} {{x}}");
        assert_eq!(t.placeholders(), vec!["x", "y"]);
        assert_eq!(
            t.render(&[("x", "1"), ("y", "2")]).unwrap(),
            "a 1 b 2 {\"json\": 1} 1"
        );
        let e = t.render(&[("x", "1")]).unwrap_err().to_string();
        assert!(e.contains("{{y}}"), "{e}");
        assert!(t.render(&[("x", "1"), ("y", "2"), ("z", "3")]).is_ok());
        let e = t.require("t", &["x", "z"]).unwrap_err().to_string();
        assert!(e.contains("{{z}}") && e.contains("`t`"), "{e}");
        // Values are not re-scanned for placeholders.
        assert_eq!(
            Template::new("{{x}}").render(&[("x", "{{x}}")]).unwrap(),
            "{{x}}"
        );
    }

    #[test]
    fn default_prompts_have_the_documented_placeholders() {
        let p = Prompts::default();
        assert_eq!(p.chunk_system.placeholders(), Vec::<&str>::new());
        assert_eq!(p.chunk_user.placeholders(), vec!["paragraph"]);
        assert_eq!(p.query_user.placeholders(), vec!["chunks"]);
        assert_eq!(p.query_chunk.placeholders(), vec!["index", "text"]);
        assert_eq!(p.doc2query_system.placeholders(), vec!["num_queries"]);
        assert_eq!(p.answer_user.placeholders(), vec!["chunks", "query"]);
        assert_eq!(p.answer_chunk.placeholders(), vec!["rank", "text"]);
        assert_eq!(p.merge_system.placeholders(), Vec::<&str>::new());
        assert_eq!(p.merge_user.placeholders(), vec!["group_a", "group_b"]);
        assert_eq!(p.merge_chunk.placeholders(), vec!["index", "text"]);
        assert_eq!(p.openie_user.placeholders(), vec!["title", "passage"]);
        assert_eq!(p.reformat_user.placeholders(), vec!["reason"]);
        p.validate().unwrap();
        let mut no_b = p.clone();
        no_b.merge_user = Template::new("{{group_a}} yes or no?");
        assert!(no_b
            .validate()
            .unwrap_err()
            .to_string()
            .contains("{{group_b}}"));
        let mut broken = p.clone();
        broken.answer_user = Template::new("Answer: {{query}}");
        assert!(broken
            .validate()
            .unwrap_err()
            .to_string()
            .contains("{{chunks}}"));
        // Serde round trip (users keep custom prompts in config files).
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Prompts>(&json).unwrap(), p);
    }
}
