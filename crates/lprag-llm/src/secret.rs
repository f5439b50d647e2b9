//! API keys that cannot leak through `Debug`, `Display`, errors or serialisation.

use std::fmt;

/// A secret API key. `Debug` and `Display` print `***`; it is not `Serialize`, so it
/// cannot end up in a saved file by accident. The only way to read it is
/// [`ApiKey::expose`], which the HTTP backends call to build the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Read the key from an environment variable; `None` when unset or empty.
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(|k| Self(k.trim().to_string()))
    }

    /// The key itself. Only for building request headers.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_key() {
        let k = ApiKey::new("sk-very-secret");
        assert_eq!(format!("{k:?}"), "ApiKey(***)");
        assert_eq!(k.to_string(), "***");
        assert_eq!(k.expose(), "sk-very-secret");
    }
}
