//! API keys that cannot leak through `Debug`, `Display`, errors or serialisation, and the
//! redaction of URLs and server messages that are shown to people.

use std::fmt;

use crate::LlmError;

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
        Self::from_value(std::env::var(var).ok())
    }

    /// The key in `value`, trimmed; `None` when absent or blank.
    pub(crate) fn from_value(value: Option<String>) -> Option<Self> {
        value
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

/// What replaces a hidden secret.
const HIDDEN: &str = "***";

/// `url` as it may be shown to people (logs, errors, `Debug`, progress lines): the
/// `user:password@` credentials become `***:***@` (`***@` for a user alone), the value of
/// every query parameter becomes `***` (some providers take the key as `?key=…`; the
/// parameter names stay, so the reader still sees which ones were given), a query word
/// without `=` becomes `***`, and a fragment becomes `#***`. Scheme, host, port and path
/// are kept as written. Works on text that is not a valid URL too: whatever precedes the
/// last `@` before the first `/` after the scheme is treated as credentials.
///
/// ```
/// assert_eq!(
///     lprag_llm::redact_url("https://me:hunter2@llm.example:8443/v1?key=sk-1&v=2"),
///     "https://***:***@llm.example:8443/v1?key=***&v=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, after) = match url.find("://") {
        Some(i)
            if i > 0
                && url[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            url.split_at(i + 3)
        }
        _ => ("", url),
    };
    // Credentials end at the last `@` before the path; a `?` or `#` typed inside a
    // password does not end them early (the whole region is hidden instead).
    let region = after.find('/').unwrap_or(after.len());
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    let rest = match after[..region].rfind('@') {
        Some(at) => {
            out.push_str(if after[..at].contains(':') {
                "***:***@"
            } else {
                "***@"
            });
            &after[at + 1..]
        }
        None => after,
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (base, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    out.push_str(base);
    if let Some(query) = query {
        out.push('?');
        let parts: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={HIDDEN}"),
                None if pair.is_empty() => String::new(),
                None => HIDDEN.to_string(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        if !fragment.is_empty() {
            out.push_str(HIDDEN);
        }
    }
    out
}

/// Prefixes of API keys that are recognised on their own, wherever they appear, when at
/// least [`MIN_TOKEN_TAIL`] key characters follow: OpenAI (`sk-`, `sk-proj-`), Stripe-like
/// `sk_`, Groq `gsk_`, xAI `xai-`, Hugging Face `hf_`, GitHub `ghp_`/`github_pat_`, Google
/// `AIza`, Perplexity `pplx-`, NVIDIA `nvapi-`, and JSON Web Tokens (`eyJ`).
const KEY_PREFIXES: [&str; 11] = [
    "sk-",
    "sk_",
    "gsk_",
    "xai-",
    "hf_",
    "ghp_",
    "github_pat_",
    "AIza",
    "pplx-",
    "nvapi-",
    "eyJ",
];

/// Key characters that must follow a [`KEY_PREFIXES`] prefix for it to count as a key
/// (so that words such as `sk-learn` stay readable).
const MIN_TOKEN_TAIL: usize = 8;

/// Names whose values are secrets, compared after lower-casing and dropping `-` and `_`:
/// a name ending with one of these (`api_key`, `x-api-key`, `access_token`,
/// `client_secret`, `X-Amz-Signature`…) has its value hidden.
const SECRET_NAME_ENDINGS: [&str; 8] = [
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "authorization",
    "signature",
    "credential",
];

/// HTTP authentication schemes whose following word is a credential (for `basic`, only a
/// word that looks like base64, so that prose such as "basic validation failed" stays
/// readable).
const AUTH_SCHEMES: [&str; 2] = ["bearer", "basic"];

/// `text` (a server's error body, an error message) with secrets hidden, for errors, logs
/// and `Debug`: `key`, the configured API key, wherever it appears; the credential after
/// `Bearer` or `Basic`; the value after a secret-looking name followed by `=` or
/// `:` (`api_key=…`, `"token": "…"`, `Authorization: …`, `password=…`, also inside
/// JSON-escaped text); `user:password@` in URLs; and free-standing tokens that look like
/// API keys (`sk-…`, `sk-proj-…`, `gsk_…`, `hf_…`, `AIza…`, JSON Web Tokens…). Each becomes
/// `***` (a recognised key prefix such as `sk-` is kept). The rest of the text is
/// unchanged, so the message stays useful.
///
/// ```
/// use lprag_llm::{redact_secrets, ApiKey};
/// let key = ApiKey::new("my-local-key");
/// let shown = redact_secrets(
///     r#"{"error": "bad header Bearer my-local-key", "api_key": "abc", "hint": "sk-proj-0123456789abcdef"}"#,
///     Some(&key),
/// );
/// assert_eq!(
///     shown,
///     r#"{"error": "bad header Bearer ***", "api_key": "***", "hint": "sk-***"}"#
/// );
/// ```
pub fn redact_secrets(text: &str, key: Option<&ApiKey>) -> String {
    let mut text = text.to_string();
    if let Some(key) = key {
        let key = key.expose();
        if !key.is_empty() {
            text = text.replace(key, HIDDEN);
        }
    }
    let text = redact_url_credentials(&text);
    let text = redact_after_auth_schemes(&text);
    let text = redact_named_values(&text);
    redact_prefixed_tokens(&text)
}

/// `err` with [`redact_secrets`] applied to every message it carries (a server's words
/// included), its kind unchanged.
pub(crate) fn redact_error(err: LlmError, key: Option<&ApiKey>) -> LlmError {
    let r = |s: String| redact_secrets(&s, key);
    match err {
        LlmError::Transient {
            message,
            retry_after,
        } => LlmError::Transient {
            message: r(message),
            retry_after,
        },
        LlmError::ContextLength(m) => LlmError::ContextLength(r(m)),
        LlmError::Permanent(m) => LlmError::Permanent(r(m)),
        LlmError::Parse { what, reason, raw } => LlmError::Parse {
            what: r(what),
            reason: r(reason),
            raw: r(raw),
        },
        LlmError::Cache { path, message } => LlmError::Cache {
            path,
            message: r(message),
        },
        LlmError::Stage {
            stage,
            failed,
            succeeded,
            total,
            first_item,
            first,
        } => LlmError::Stage {
            stage,
            failed,
            succeeded,
            total,
            first_item: r(first_item),
            first: Box::new(redact_error(*first, key)),
        },
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A character that ends an unquoted credential.
fn ends_credential(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\'' | '\\' | '&' | ',' | ';' | '}' | ')' | ']' | '<' | '>'
        )
}

/// Byte offset where the run of characters from `start` satisfying `keep` ends.
fn run_end(text: &str, start: usize, keep: impl Fn(char) -> bool) -> usize {
    text[start..]
        .char_indices()
        .find(|&(_, c)| !keep(c))
        .map_or(text.len(), |(i, _)| start + i)
}

/// `scheme://user:password@host` anywhere in `text` becomes `scheme://***@host`.
fn redact_url_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = run_end(tail, 0, |c| {
            !(c.is_whitespace() || matches!(c, '/' | '"' | '\'' | '<' | '>' | '\\'))
        });
        match tail[..authority_end].rfind('@') {
            Some(at) if at > 0 => {
                out.push_str("***@");
                rest = &tail[at + 1..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// `text` with a span replaced by `***` wherever `secret_at` finds one: called at every
/// word start `i`, it returns `(keep_until, end)` — the text up to `keep_until` is kept,
/// `keep_until..end` is hidden, and the scan goes on at `end`.
fn hide_at_word_starts(text: &str, secret_at: impl Fn(usize) -> Option<(usize, usize)>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < text.len() {
        let at_word_start = text[..i].chars().next_back().is_none_or(|c| !is_word(c));
        if let Some((keep_until, end)) = at_word_start.then(|| secret_at(i)).flatten() {
            out.push_str(&text[copied..keep_until]);
            out.push_str(HIDDEN);
            copied = end;
            i = end;
            continue;
        }
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    out.push_str(&text[copied..]);
    out
}

/// The word after `Bearer` or `Basic` (any case, at a word start, followed by blanks)
/// becomes `***`.
fn redact_after_auth_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    hide_at_word_starts(text, |i| {
        let scheme = AUTH_SCHEMES.iter().find(|s| lower[i..].starts_with(*s))?;
        let after = i + scheme.len();
        let blank_end = run_end(text, after, |c| c == ' ' || c == '\t');
        if blank_end == after {
            return None;
        }
        let end = run_end(text, blank_end, |c| !ends_credential(c));
        let credential = &text[blank_end..end];
        let plausible = *scheme != "basic" || looks_like_base64(credential);
        (!credential.is_empty() && credential != HIDDEN && plausible).then_some((blank_end, end))
    })
}

/// At least [`MIN_TOKEN_TAIL`] base64 characters, with a digit, `+`, `/`, `=` or a capital
/// letter after the first character (which a word of prose lacks).
fn looks_like_base64(word: &str) -> bool {
    word.len() >= MIN_TOKEN_TAIL
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        && word
            .chars()
            .skip(1)
            .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || matches!(c, '+' | '/' | '='))
}

/// `name=value`, `name: value`, `"name": "value"` (also JSON-escaped, `\"name\": \"value\"`)
/// with a secret-looking name: the value becomes `***`.
fn redact_named_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < text.len() {
        let c = text[i..].chars().next().unwrap_or(' ');
        let at_word_start = text[..i].chars().next_back().is_none_or(|p| !is_word(p));
        if !(is_word(c) && at_word_start) {
            i += c.len_utf8();
            continue;
        }
        let name_end = run_end(text, i, is_word);
        let name: String = text[i..name_end]
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        let secret = SECRET_NAME_ENDINGS.iter().any(|e| name.ends_with(e));
        if secret {
            if let Some((start, end)) = value_after_name(text, name_end) {
                out.push_str(&text[copied..start]);
                out.push_str(HIDDEN);
                copied = end;
                i = end;
                continue;
            }
        }
        i = name_end;
    }
    out.push_str(&text[copied..]);
    out
}

/// The byte range of the value that follows a name ending at `from`: closing quotes,
/// blanks, `=` or `:`, blanks, an opening quote, then the value up to the matching quote
/// (or, unquoted, up to a delimiter). `None` when there is no separator or no value, or
/// when the value is already hidden or is an authentication scheme (its credential is
/// hidden on its own).
fn value_after_name(text: &str, from: usize) -> Option<(usize, usize)> {
    let quote = |c: char| matches!(c, '"' | '\'' | '\\');
    let p = run_end(text, from, quote);
    let p = run_end(text, p, |c| c == ' ' || c == '\t');
    let sep = text[p..].chars().next()?;
    if sep != '=' && sep != ':' {
        return None;
    }
    let p = run_end(text, p + 1, |c| c == ' ' || c == '\t');
    // One opening quote, JSON-escaped (`\"`) or not.
    let q = if text[p..].starts_with('\\') {
        p + 1
    } else {
        p
    };
    let (start, opened) = match text[q..].chars().next() {
        Some(c @ ('"' | '\'')) => (q + 1, Some(c)),
        _ => (p, None),
    };
    let end = match opened {
        Some(q) => run_end(text, start, |c| c != q && c != '\\'),
        None => run_end(text, start, |c| !ends_credential(c)),
    };
    let value = &text[start..end];
    if value.is_empty()
        || value == HIDDEN
        || value.ends_with(&format!(" {HIDDEN}"))
        || (opened.is_none() && AUTH_SCHEMES.contains(&value.to_ascii_lowercase().as_str()))
    {
        return None;
    }
    Some((start, end))
}

/// Free-standing tokens with a [`KEY_PREFIXES`] prefix become `prefix***`.
fn redact_prefixed_tokens(text: &str) -> String {
    let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    hide_at_word_starts(text, |i| {
        let prefix = KEY_PREFIXES.iter().find(|p| text[i..].starts_with(*p))?;
        let tail = i + prefix.len();
        let end = run_end(text, tail, key_char);
        // A sentence's final `.` is not part of the key.
        let end = text[tail..end].trim_end_matches('.').len() + tail;
        let long_enough = text[tail..end]
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .count()
            >= MIN_TOKEN_TAIL;
        long_enough.then_some((tail, end))
    })
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

    #[test]
    fn urls_keep_their_shape_but_lose_credentials_and_query_values() {
        let cases = [
            ("http://x/v1", "http://x/v1"),
            ("https://x/v1?key=secret", "https://x/v1?key=***"),
            (
                "https://me:hunter2@x:8/v1/chat?key=s&api-version=2024",
                "https://***:***@x:8/v1/chat?key=***&api-version=***",
            ),
            ("https://token@x/v1", "https://***@x/v1"),
            ("http://x/v1?sk-abc&", "http://x/v1?***&"),
            ("http://x/v1#frag", "http://x/v1#***"),
            ("http://x/v1/a@b", "http://x/v1/a@b"),
            // A `?` or `#` typed inside a password does not reveal its end.
            ("http://u:p?w#d@h/v1", "http://***:***@h/v1"),
            // Without a scheme, and not a URL at all.
            ("me:pw@localhost:1/v1", "***:***@localhost:1/v1"),
            ("", ""),
            ("http://h/v1?next=http://u:p@i/", "http://h/v1?next=***"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn the_configured_key_is_hidden_wherever_it_appears() {
        let key = ApiKey::new("local-secret-1");
        assert_eq!(
            redact_secrets("rejected local-secret-1 (xlocal-secret-1x)", Some(&key)),
            "rejected *** (x***x)"
        );
        // An empty key hides nothing (and does not garble the text).
        assert_eq!(redact_secrets("hello", Some(&ApiKey::new(""))), "hello");
    }

    #[test]
    fn credentials_after_auth_schemes_are_hidden() {
        for (text, shown) in [
            (
                "header Bearer abc.def-123 rejected",
                "header Bearer *** rejected",
            ),
            ("Authorization: Bearer abc", "Authorization: Bearer ***"),
            (
                "authorization: basic dXNlcjpwdw==",
                "authorization: basic ***",
            ),
            (
                "\"Authorization\": \"Bearer t0k3n\"",
                "\"Authorization\": \"Bearer ***\"",
            ),
            // Not a scheme: a word that merely ends like one, a scheme without a value,
            // prose.
            ("unbearer x", "unbearer x"),
            ("Bearer", "Bearer"),
            ("basic validation failed", "basic validation failed"),
            (
                "the token limit is 4096 tokens",
                "the token limit is 4096 tokens",
            ),
        ] {
            assert_eq!(redact_secrets(text, None), shown, "{text}");
        }
    }

    #[test]
    fn values_of_secret_names_are_hidden_in_json_queries_and_headers() {
        for (text, shown) in [
            (r#"{"api_key": "abc def"}"#, r#"{"api_key": "***"}"#),
            (
                r#"{"key":"abc","model":"m"}"#,
                r#"{"key":"***","model":"m"}"#,
            ),
            (r#"{"access_token": 'xyz'}"#, r#"{"access_token": '***'}"#),
            (
                r#"{\"client_secret\": \"xyz\", \"n\": 1}"#,
                r#"{\"client_secret\": \"***\", \"n\": 1}"#,
            ),
            ("GET /v1?key=abc&x=1", "GET /v1?key=***&x=1"),
            ("x-api-key: abc123", "x-api-key: ***"),
            ("password=hunter2;user=me", "password=***;user=me"),
            ("X-Amz-Signature=0a1b", "X-Amz-Signature=***"),
            // Names that are not secrets, and secret names without a value.
            (
                r#"{"max_tokens": 5, "model": "gpt"}"#,
                r#"{"max_tokens": 5, "model": "gpt"}"#,
            ),
            ("Incorrect API key provided.", "Incorrect API key provided."),
            ("the context is 8192 tokens", "the context is 8192 tokens"),
            (r#"{"key": ""}"#, r#"{"key": ""}"#),
        ] {
            assert_eq!(redact_secrets(text, None), shown, "{text}");
        }
    }

    #[test]
    fn key_shaped_tokens_and_url_credentials_are_hidden() {
        for (text, shown) in [
            (
                "Incorrect API key provided: sk-proj-AbCdEf0123456789.",
                "Incorrect API key provided: sk-***.",
            ),
            (
                "key sk-abcdefgh1234 and gsk_0123456789ab",
                "key sk-*** and gsk_***",
            ),
            ("AIzaSyA0123456789abc", "AIza***"),
            ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "jwt eyJ***"),
            // Too short, or inside a word: not a key.
            (
                "use sk-learn or ask-question-now",
                "use sk-learn or ask-question-now",
            ),
            (
                "proxy http://user:pw@10.0.0.1:3128/ refused",
                "proxy http://***@10.0.0.1:3128/ refused",
            ),
            ("mail me@example.com", "mail me@example.com"),
            ("déjà vu: ünïcode stays", "déjà vu: ünïcode stays"),
        ] {
            assert_eq!(redact_secrets(text, None), shown, "{text}");
        }
    }

    #[test]
    fn odd_text_never_panics_and_never_keeps_the_key() {
        let key = ApiKey::new("kéy-0123456789");
        let pieces = [
            "é",
            "Bearer ",
            "basic ",
            "key",
            "=",
            ":",
            "\\",
            "\"",
            "'",
            "sk-",
            "eyJ",
            "://",
            "@",
            "/",
            "?",
            "#",
            "&",
            " ",
            "kéy-0123456789",
            "ü",
            "0123456789",
            "\t",
        ];
        // Every sequence of three pieces, and a few longer ones.
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let text = format!("{a}{b}{c}{a}");
                    let shown = redact_secrets(&text, Some(&key));
                    assert!(!shown.contains(key.expose()), "{text:?} -> {shown:?}");
                    let _ = redact_url(&text);
                }
            }
        }
    }

    #[test]
    fn errors_keep_their_kind_and_lose_the_key() {
        let key = ApiKey::new("k-0123456789");
        let err = redact_error(
            LlmError::Stage {
                stage: "s".into(),
                failed: 1,
                succeeded: 0,
                total: 1,
                first_item: "d".into(),
                first: Box::new(LlmError::transient("HTTP 500: echo k-0123456789")),
            },
            Some(&key),
        );
        assert!(err.is_transient());
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("k-0123456789"), "{shown}");
        assert!(shown.contains("echo ***"), "{shown}");
    }
}
