//! What the rig and swiftide adapters read from (a fixed retriever or a live index's
//! current snapshot) and how they write a JSON scalar into lprag's string metadata.

use std::sync::Arc;

use lprag_core::{LiveIndex, Retriever};
use serde_json::Value;

/// Where an adapter gets the retriever that answers a request: a fixed
/// `Arc<dyn Retriever>`, or the current snapshot of an `Arc<dyn LiveIndex>`.
pub trait IndexSource: Send + Sync + 'static {
    /// The retriever for the next request.
    fn current(&self) -> Arc<dyn Retriever>;
}

impl IndexSource for Arc<dyn Retriever> {
    fn current(&self) -> Arc<dyn Retriever> {
        Arc::clone(self)
    }
}

impl IndexSource for Arc<dyn LiveIndex> {
    fn current(&self) -> Arc<dyn Retriever> {
        self.snapshot()
    }
}

/// A JSON string, number or boolean as lprag metadata text (strings as they are, the
/// others as written); `None` for null, arrays and objects.
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
