//! JSON persistence of an index: atomic, durable writes; finiteness checked before saving
//! and after loading; the format version read first; the encoder (name, width,
//! fingerprint) checked against the one given; and the [`SavedState`] a peer's state
//! implements (with the `saved_state_header!` macro for its common items).

use std::path::Path;

use lprag_core::{Encoder, Error, Result};

/// Refuse to save `values` (the field `field` of `dir/file`) when one is NaN or infinite:
/// JSON would store it as `null` and the index could never be read again.
pub(crate) fn check_finite(dir: &Path, file: &str, field: &str, values: &[f32]) -> Result<()> {
    match values.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(
            format!("{} ({field})", dir.join(file).display()),
            format!(
                "value {i} is {}; JSON cannot store it, so the index would not load again \
                 (not saved)",
                values[i]
            ),
        )),
    }
}

/// The float arrays of a saved JSON index: checked finite before saving (JSON would
/// store NaN as `null`) and after loading (a number beyond `f32`'s range, such as `1e39`
/// in a hand-edited file, parses as infinity and would turn scores into NaN).
pub trait FloatFields {
    /// Each float array with its field name.
    fn float_fields(&self) -> Vec<(String, &[f32])>;
}

/// [`check_finite`] on every [`FloatFields`] array of `state` (before saving it).
pub(crate) fn check_all_finite(dir: &Path, file: &str, state: &impl FloatFields) -> Result<()> {
    for (field, values) in state.float_fields() {
        check_finite(dir, file, &field, values)?;
    }
    Ok(())
}

/// Write `value` as JSON to `dir/file` atomically and durably (a unique temporary file,
/// synced, then renamed; the directory synced).
pub(crate) fn save_json_atomic<T: serde::Serialize>(
    dir: &Path,
    file: &str,
    value: &T,
) -> Result<()> {
    let path = dir.join(file);
    // Streamed to the file: a million chunks' JSON is never whole in memory.
    lprag_core::dirs::write_atomic_with(&path, |w| {
        serde_json::to_writer(w, value).map_err(std::io::Error::from)
    })
}

/// The state a peer retriever saves as JSON: its format version, the encoder it was built
/// with, and the consistency checks a loaded file must pass.
pub trait SavedState: serde::de::DeserializeOwned + FloatFields {
    /// The format version this build writes and reads.
    const VERSION: u32;
    /// The version the file says it has.
    fn version(&self) -> u32;
    /// The encoder the index was built with: name, embedding width, fingerprint.
    fn encoder_record(&self) -> (&str, usize, Option<&str>);
    /// Sizes, ids and configuration consistent with each other; the message says what is
    /// not.
    fn check(&self) -> std::result::Result<(), String>;
}

/// The [`SavedState`] items every peer's state writes the same way: `VERSION` and the
/// `version`, `encoder`, `encoder_fingerprint` fields, with the embedding width read from
/// the matrix field `$emb`.
macro_rules! saved_state_header {
    ($version:expr, $emb:ident) => {
        const VERSION: u32 = $version;

        fn version(&self) -> u32 {
            self.version
        }

        fn encoder_record(&self) -> (&str, usize, Option<&str>) {
            (
                self.encoder.as_str(),
                self.$emb.dim(),
                self.encoder_fingerprint.as_deref(),
            )
        }
    };
}
pub(crate) use saved_state_header;

/// Read a JSON index file written by [`save_json_atomic`] and check its format version,
/// its floats, the encoder it was built with (name, dimension, fingerprint) against
/// `encoder`, and [`SavedState::check`]. Every failure names `path`.
pub(crate) fn load_json_index<T: SavedState>(path: &Path, encoder: &dyn Encoder) -> Result<T> {
    let expected = T::VERSION;
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    // The version first, so that a file of another version says so instead of failing on
    // a field this build does not know.
    check_version(path, &bytes, "version", expected)?;
    let state: T =
        serde_json::from_slice(&bytes).map_err(|e| Error::format(path, e.to_string()))?;
    for (field, values) in state.float_fields() {
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            return Err(Error::format(
                path,
                format!(
                    "field `{field}`: value {i} is {} (a number outside f32's range?)",
                    values[i]
                ),
            ));
        }
    }
    let version = state.version();
    if version != expected {
        return Err(Error::format(
            path,
            format!("format version {version} (this build reads {expected})"),
        ));
    }
    let (name, dim, fingerprint) = state.encoder_record();
    if name != encoder.name() || dim != encoder.dimension() {
        return Err(Error::invalid(
            path.display().to_string(),
            format!(
                "index built with encoder `{name}` ({dim}-d), given `{}` ({}-d)",
                encoder.name(),
                encoder.dimension()
            ),
        ));
    }
    check_fingerprint(&path.display().to_string(), fingerprint, encoder)?;
    state.check().map_err(|m| Error::format(path, m))?;
    Ok(state)
}

/// Refuse `encoder` when the index recorded a fingerprint (see [`Encoder::fingerprint`])
/// and the encoder reports another: same name and width, other weights or tables.
pub(crate) fn check_fingerprint(
    location: &str,
    saved: Option<&str>,
    encoder: &dyn Encoder,
) -> Result<()> {
    match (saved, encoder.fingerprint()) {
        (Some(saved), Some(now)) if saved != now => Err(Error::invalid(
            location,
            format!(
                "the index was built with another `{}` encoder (fingerprint {saved}, given {now}): same name and width, different weights or fitted tables; pass the encoder it was built with (an index built with the default encoder reopens with LpRag::open, which rebuilds it)",
                encoder.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// Check the `field` (a format version) of the JSON object in `bytes` against `expected`
/// without parsing the rest into its types. A missing field passes (the full parse
/// reports it).
pub(crate) fn check_version(path: &Path, bytes: &[u8], field: &str, expected: u32) -> Result<()> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Head<'a>(&'a str);
    impl<'de> Visitor<'de> for Head<'_> {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == self.0 {
                    found = Some(map.next_value::<u64>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = de
        .deserialize_map(Head(field))
        .map_err(|e| Error::format(path, e.to_string()))?;
    match found {
        Some(v) if v != expected as u64 => Err(Error::format(
            path,
            format!("format version {v} (this build reads {expected})"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_are_refused_before_they_become_json_null() {
        let dir = Path::new("/idx");
        assert!(check_finite(dir, "qcg.json", "chunk_emb", &[0.5, -1.0]).is_ok());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let err = check_finite(dir, "qcg.json", "chunk_emb", &[0.5, bad])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("chunk_emb") && err.contains("value 1"),
                "{err}"
            );
        }
        // What the check prevents: serde_json writes NaN as null, which no loader reads.
        let v = serde_json::to_string(&vec![f32::NAN]).unwrap();
        assert!(serde_json::from_str::<Vec<f32>>(&v).is_err());
    }
}
