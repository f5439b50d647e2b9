//! lprag
