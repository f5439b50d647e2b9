//! [`Report`]: the error type for `main` functions and applications that show errors to
//! a person. Any error converts into it with `?`; when `main` returns it, Rust prints it
//! with `Debug`, which here is the error's `Display` text followed by its causes — never
//! the struct dump of a derived `Debug`.

use std::fmt;

/// An error to show to a person: its `Display` message and the chain of causes, one per
/// line, each cause left out when the message above already contains it.
///
/// ```
/// fn run() -> Result<(), lprag::Report> {
///     let n: u32 = "x".parse()?;
///     println!("{n}");
///     Ok(())
/// }
/// let e = run().unwrap_err();
/// assert_eq!(format!("{e:?}"), "invalid digit found in string");
/// ```
pub struct Report(Box<dyn std::error::Error + Send + Sync + 'static>);

impl Report {
    /// The error it holds.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for Report {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let top = self.0.to_string();
        f.write_str(&top)?;
        let mut shown = top;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !shown.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
                shown.push_str(&text);
            }
            cause = c.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner detail")]
    struct Inner;

    #[test]
    fn shows_display_and_new_causes_only() {
        let r: Report = Outer(Inner).into();
        assert_eq!(format!("{r:?}"), "outer\n  caused by: inner detail");
        // A source already in the message is not repeated.
        let e = lprag_core::Error::backend("encoder", "weights missing");
        let r: Report = e.into();
        assert_eq!(format!("{r}"), "encoder failed: weights missing");
        assert!(!format!("{r:?}").contains("Backend {"));
    }
}
