//! rig's `InsertDocuments` on a live [`RigIndex`]: rig documents become lprag
//! [`Document`]s and are upserted in one update.

use std::collections::BTreeMap;
use std::sync::Arc;

use lprag_core::{Document, LiveIndex};
use rig_core::embeddings::{embed::to_texts, Embedding};
use rig_core::vector_store::{InsertDocuments, VectorStoreError};
use rig_core::wasm_compat::WasmCompatSend;
use rig_core::Embed;
use serde::Serialize;
use serde_json::Value;

use super::RigIndex;

/// A rig document as an lprag [`Document`]:
///
/// - **text**: the texts its `Embed` implementation yields, joined by blank lines (the
///   `document` texts of `embeddings` when it yields none);
/// - **id**: its JSON `id` field (a string or a number), else `rig-` and the first 16 hex
///   digits of the text's SHA-256, so that inserting the same text again replaces it;
/// - **title**: its JSON `title` field when that is a string;
/// - **metadata**: its other top-level string, number and boolean fields, as written,
///   except a string equal to one of the texts (the body, already the text).
///
/// rig's precomputed vectors are not used: lprag embeds chunks with the index's own
/// encoder, which its graph and model were built with.
///
/// # Errors
/// [`lprag_core::Error::InvalidInput`] when the document does not serialise, its `Embed`
/// fails, or it yields no text at all.
pub fn document_from_rig<Doc: Serialize + Embed>(
    doc: Doc,
    embeddings: &[Embedding],
) -> lprag_core::Result<Document> {
    let location = "a rig document";
    let json = serde_json::to_value(&doc)
        .map_err(|e| lprag_core::Error::invalid(location, format!("does not serialise: {e}")))?;
    let mut texts =
        to_texts(doc).map_err(|e| lprag_core::Error::invalid(location, e.to_string()))?;
    if texts.iter().all(|t| t.trim().is_empty()) {
        texts = embeddings.iter().map(|e| e.document.clone()).collect();
    }
    texts.retain(|t| !t.trim().is_empty());
    if texts.is_empty() {
        return Err(lprag_core::Error::invalid(
            location,
            "has no text to index (its Embed implementation yielded none, and so did its \
             embeddings)",
        ));
    }
    let text = texts.join("\n\n");
    let object = match &json {
        Value::Object(map) => Some(map),
        _ => None,
    };
    let id = match object.and_then(|m| m.get("id")) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            let hash = Document::new("", "", text.as_str()).content_hash();
            format!("rig-{}", &hash[..16])
        }
    };
    let title = match object.and_then(|m| m.get("title")) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let mut metadata = BTreeMap::new();
    for (key, value) in object.into_iter().flatten() {
        if key == "id" || key == "title" {
            continue;
        }
        let Some(written) = crate::source::scalar_text(value) else {
            continue;
        };
        // A string equal to one of the texts is the body, already the text.
        if value.is_string() && texts.contains(&written) {
            continue;
        }
        metadata.insert(key.clone(), written);
    }
    Ok(Document {
        id,
        title,
        text,
        metadata,
    })
}

/// Upserts the documents into the live index in one update (see [`document_from_rig`]);
/// queries are answered throughout, from the index before the update until it is
/// complete. Documents whose ids repeat within one call are an error; nothing is
/// written then.
impl InsertDocuments for RigIndex<Arc<dyn LiveIndex>> {
    async fn insert_documents<Doc: Serialize + Embed + WasmCompatSend>(
        &self,
        documents: Vec<(Doc, Vec<Embedding>)>,
    ) -> Result<(), VectorStoreError> {
        let docs = documents
            .into_iter()
            .map(|(doc, embeddings)| document_from_rig(doc, &embeddings))
            .collect::<lprag_core::Result<Vec<_>>>()
            .map_err(|e| VectorStoreError::DatastoreError(Box::new(e)))?;
        if docs.is_empty() {
            return Ok(());
        }
        self.index()
            .upsert(&docs)
            .await
            .map(|_| ())
            .map_err(|e| VectorStoreError::DatastoreError(Box::new(e)))
    }
}
