//! # lprag-load
//!
//! A user's files as [`lprag_core::Document`]s: [`load_dir`] walks a folder the way
//! ripgrep does (`.gitignore`, `.ignore` and `.git/info/exclude` honoured, also outside a
//! git repository; hidden files and symbolic links skipped unless asked) and turns every
//! file of a known [`Format`] into documents, with the same metadata on each
//! ([`PATH_KEY`], [`TITLE_KEY`], [`MODIFIED_KEY`], [`BYTES_KEY`], [`FORMAT_KEY`]).
//!
//! | format | extensions | documents |
//! |---|---|---|
//! | Markdown | `md`, `markdown`, `mdx` | one per file, the Markdown text as it is |
//! | text | `txt`, `text`, `rst` | one per file |
//! | HTML | `html`, `htm` | one per file, the visible text (no scripts, styles, navigation) |
//! | JSON | `json` | one per record: an array of records, or one record |
//! | JSON Lines | `jsonl`, `ndjson` | one per record (line) |
//! | PDF | `pdf` | one per page with text; needs the cargo feature `pdf` |
//!
//! Files with other extensions are not read (counted in [`LoadReport::ignored_files`]).
//! A file that cannot be used is listed in [`LoadReport::skipped`] with the reason and
//! reported through [`Progress::warn`]; with [`LoadOptions::strict`] the load fails with
//! a typed [`Error`] instead. Loading never panics, whatever the files hold.
//!
//! A corpus too large to hold goes to a build (`LpRagBuilder::build_from`) as a
//! [`DirSource`] (a folder, its files read again a block at a time) or a
//! [`JsonLinesSource`] (one JSON Lines file, a block of lines at a time).
//!
//! ```
//! use lprag_core::NoProgress;
//! use lprag_load::{load_dir, LoadOptions, PATH_KEY};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("guide.md"), "# Install\n\nRun the installer.").unwrap();
//! let loaded = load_dir(dir.path(), &LoadOptions::default(), &NoProgress).unwrap();
//! assert_eq!(loaded.documents[0].id, "guide.md");
//! assert_eq!(loaded.documents[0].title, "Install");
//! assert_eq!(loaded.documents[0].metadata[PATH_KEY], "guide.md");
//! assert_eq!(loaded.report.files_loaded, 1);
//! ```
#![warn(missing_docs)]

mod dir;
mod html;
mod json;
mod markdown;
#[cfg(feature = "pdf")]
mod pdf;
mod source;
mod time;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use ignore::WalkBuilder;
use lprag_core::{Document, Error, Progress, Result};
use serde::{Deserialize, Serialize};

pub use dir::DirSource;
pub use source::JsonLinesSource;

/// Metadata key: the file's path relative to the loaded folder, `/`-separated.
pub const PATH_KEY: &str = "path";
/// Metadata key: the document's title (also in [`Document::title`]).
pub const TITLE_KEY: &str = "title";
/// Metadata key: the file's modification time, RFC 3339 in UTC to the second
/// (`2026-11-28T11:00:00Z`); absent where the file system does not record one.
pub const MODIFIED_KEY: &str = "modified";
/// Metadata key: the file's size in bytes.
pub const BYTES_KEY: &str = "bytes";
/// Metadata key: the file's [`Format::name`].
pub const FORMAT_KEY: &str = "format";
/// Metadata key: the 1-based page number of a PDF page's document.
pub const PAGE_KEY: &str = "page";

/// The progress stage [`load_dir`] reports.
pub const LOAD_STAGE: &str = "load files";

/// How [`load_dir`] and [`load_file`] read files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Files larger than this are skipped (default 16 MiB).
    pub max_file_bytes: u64,
    /// Fail on the first file (or record, or page) that cannot be read or parsed, or that
    /// is over a limit, instead of skipping it (default `false`). Files with nothing to
    /// load (empty, whitespace only, a PDF without a text layer) are skipped either way.
    pub strict: bool,
    /// Also load hidden files and folders, those whose name starts with `.` (default
    /// `false`). `.git` folders are never read.
    pub hidden: bool,
    /// Follow symbolic links (default `false`: links are not read).
    pub follow_links: bool,
    /// Records read from one JSON or JSON Lines file at most (default 100,000); the rest
    /// are skipped.
    pub max_records_per_file: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: 16 << 20,
            strict: false,
            hidden: false,
            follow_links: false,
            max_records_per_file: 100_000,
        }
    }
}

/// What [`load_dir`] returns: the documents and what happened to each file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The documents, ordered by file path, then by their place in the file (record or
    /// page order). Ids are unique.
    pub documents: Vec<Document>,
    /// Counts, skipped files and time.
    pub report: LoadReport,
}

/// What a load did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Files of a known [`Format`] that were found.
    pub files_seen: usize,
    /// Files that gave at least one document.
    pub files_loaded: usize,
    /// Documents returned.
    pub documents: usize,
    /// Files loaded per [`Format::name`].
    pub by_format: BTreeMap<String, usize>,
    /// Files, records and pages that were not loaded, with why. A file whose records
    /// were partly loaded appears here once per record left out.
    pub skipped: Vec<Skipped>,
    /// Wall-clock seconds the load took.
    pub seconds: f64,
    /// Files not read because no [`Format`] has their extension.
    #[serde(default)]
    pub ignored_files: usize,
}

/// A file (or a record or page of one) that was not loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The file's path relative to the loaded folder, `/`-separated.
    pub path: String,
    /// Why it was not loaded.
    pub reason: String,
}

/// A file format [`load_dir`] reads, chosen by extension (ASCII case ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// `.md`, `.markdown`, `.mdx`: kept as Markdown text; the title is the first level-1
    /// heading (or a `title:` in YAML front matter).
    Markdown,
    /// `.txt`, `.text`, `.rst`: UTF-8 text.
    Text,
    /// `.html`, `.htm`: the visible text; the title is `<title>`, else the first `<h1>`.
    Html,
    /// `.json`: an array of records or one record (see [`load_dir`]).
    Json,
    /// `.jsonl`, `.ndjson`: one record a line.
    Jsonl,
    /// `.pdf`: one document per page (cargo feature `pdf`; without it PDFs are skipped
    /// with a reason saying so).
    Pdf,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 6] = [
        Format::Markdown,
        Format::Text,
        Format::Html,
        Format::Json,
        Format::Jsonl,
        Format::Pdf,
    ];

    /// The format of `path` by its extension; `None` when no format has it.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.extensions().contains(&ext.as_str()))
    }

    /// The format's name, as in [`FORMAT_KEY`] and [`LoadReport::by_format`]:
    /// `markdown`, `text`, `html`, `json`, `jsonl`, `pdf`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Html => "html",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Pdf => "pdf",
        }
    }

    /// The extensions (lower case, without the dot) that select this format.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Markdown => &["md", "markdown", "mdx"],
            Format::Text => &["txt", "text", "rst"],
            Format::Html => &["html", "htm"],
            Format::Json => &["json"],
            Format::Jsonl => &["jsonl", "ndjson"],
            Format::Pdf => &["pdf"],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Load every file of a known [`Format`] under `root` (or `root` itself when it is a
/// file) as documents.
///
/// * **Walk**: `.gitignore`, `.ignore` and `.git/info/exclude` rules apply (also outside
///   a git repository), hidden files and folders are skipped unless
///   [`LoadOptions::hidden`], links are not followed unless [`LoadOptions::follow_links`].
/// * **Ids**: the path relative to `root` with `/` separators (`docs/install.md`); a
///   JSON record's is `"{path}#{id}"` with the record's own `id` field (string or number)
///   or else its 0-based index; a PDF page's is `"{path}#page={n}"`, `n` from 1.
/// * **Records**: a JSON file holds one record (an object) or an array of them; a JSON
///   Lines file one a line. A record's text is its `text` field (else `content`, else
///   `body`), its title its `title` field, and its other scalar fields become metadata
///   (stringified; the loader's own keys win on a clash). Records without text are
///   skipped one by one; the rest of the file is loaded.
/// * **Text**: files must be UTF-8 (a byte order mark is removed); other files, files over
///   [`LoadOptions::max_file_bytes`] and empty ones are skipped with a reason.
///
/// Every skipped file, record or page goes into [`LoadReport::skipped`] and through
/// `progress.warn`; with [`LoadOptions::strict`] the first one that lost content ends
/// the load with its error ([`Error::Io`] for a file that cannot be read,
/// [`Error::Format`] for one that cannot be parsed, [`Error::InvalidInput`] for a limit
/// or a path that is not UTF-8), naming the file. Progress: stage [`LOAD_STAGE`], one
/// step per file.
///
/// # Errors
///
/// [`Error::Io`] when `root` cannot be read; in strict mode, as above.
pub fn load_dir(root: &Path, options: &LoadOptions, progress: &dyn Progress) -> Result<Loaded> {
    let started = Instant::now();
    let mut report = LoadReport::default();
    let files = files_under(root, options, progress, &mut report)?;
    let mut documents = Vec::new();
    read_files(&files, options, progress, &mut report, &mut |_, new, _| {
        documents.extend(new)
    })?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(Loaded { documents, report })
}

/// The files of a known [`Format`] under `root`, a folder or one file (which loads as
/// itself, with its name as its path), as [`find_files`] lists them.
fn files_under(
    root: &Path,
    options: &LoadOptions,
    progress: &dyn Progress,
    report: &mut LoadReport,
) -> Result<Vec<(PathBuf, String, Format)>> {
    let meta = fs::metadata(root).map_err(|e| Error::io(root, e))?;
    let base = if meta.is_file() {
        root.parent().unwrap_or(Path::new(""))
    } else {
        root
    };
    find_files(root, base, options, progress, report)
}

/// The files of a known [`Format`] under `root` as (absolute path, path relative to
/// `base`, format), sorted by relative path; walk errors and paths that are not UTF-8
/// are skipped (or fail in strict mode), other files counted as ignored.
fn find_files(
    root: &Path,
    base: &Path,
    options: &LoadOptions,
    progress: &dyn Progress,
    report: &mut LoadReport,
) -> Result<Vec<(PathBuf, String, Format)>> {
    let mut files: Vec<(PathBuf, String, Format)> = Vec::new();
    for entry in walker(root, options).build() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = walk_error_path(&e)
                    .map(|p| rel_lossy(base, p))
                    .unwrap_or_default();
                let problem = walk_problem(&e, &path);
                fail_or_skip(report, progress, options, path, problem)?;
                continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(format) = Format::of(entry.path()) else {
            report.ignored_files += 1;
            continue;
        };
        report.files_seen += 1;
        match rel_path(base, entry.path()) {
            Some(rel) => files.push((entry.into_path(), rel, format)),
            None => {
                let lossy = rel_lossy(base, entry.path());
                let reason = "the path is not valid UTF-8".to_string();
                let problem = Problem::fatal(
                    reason.clone(),
                    Error::invalid(format!("file {lossy}"), reason),
                );
                fail_or_skip(report, progress, options, lossy, problem)?;
            }
        }
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(files)
}

/// Read `files` in order under the progress stage [`LOAD_STAGE`], one step per file,
/// handing each file's new documents to `keep` with its index in `files` and the
/// positions, among the file's documents, of those left out for a repeated id; each
/// file's problems are skipped (or end the load in strict mode).
fn read_files(
    files: &[(PathBuf, String, Format)],
    options: &LoadOptions,
    progress: &dyn Progress,
    report: &mut LoadReport,
    keep: &mut dyn FnMut(usize, Vec<Document>, Vec<usize>),
) -> Result<()> {
    let mut problems: Vec<(String, Problem)> = Vec::new();
    progress.start(LOAD_STAGE, Some(files.len() as u64));
    let mut ids: HashSet<String> = HashSet::new();
    for (i, (abs, rel, format)) in files.iter().enumerate() {
        match read_file(abs, rel, *format, options) {
            Ok(outcome) => {
                for p in outcome.problems {
                    problems.push((rel.clone(), p));
                }
                let (new, repeated) =
                    new_documents(outcome.documents, rel, &mut ids, &mut problems);
                if !new.is_empty() {
                    report.files_loaded += 1;
                    *report
                        .by_format
                        .entry(format.name().to_string())
                        .or_default() += 1;
                }
                report.documents += new.len();
                keep(i, new, repeated);
            }
            Err(p) => problems.push((rel.clone(), p)),
        }
        for (path, p) in problems.drain(..) {
            if let Err(e) = fail_or_skip(report, progress, options, path, p) {
                progress.finish(LOAD_STAGE);
                return Err(e);
            }
        }
        progress.update(LOAD_STAGE, i as u64 + 1, rel);
    }
    progress.finish(LOAD_STAGE);
    Ok(())
}

/// The documents of `docs` whose id is new, and the positions in `docs` of the others
/// (each a problem of `rel`).
fn new_documents(
    docs: Vec<Document>,
    rel: &str,
    ids: &mut HashSet<String>,
    problems: &mut Vec<(String, Problem)>,
) -> (Vec<Document>, Vec<usize>) {
    let mut new = Vec::with_capacity(docs.len());
    let mut repeated = Vec::new();
    for (position, d) in docs.into_iter().enumerate() {
        if ids.insert(d.id.clone()) {
            new.push(d);
        } else {
            let reason = format!("duplicate document id '{}'", d.id);
            let error = Error::invalid(format!("file {rel}"), reason.clone());
            problems.push((rel.to_string(), Problem::fatal(reason, error)));
            repeated.push(position);
        }
    }
    (new, repeated)
}

/// Load one file as documents, exactly as [`load_dir`] would (same ids and metadata):
/// `path` is the file, absolute or relative to `root`, and must lie under `root`.
///
/// A file with nothing to load (empty, whitespace only) gives no document. A file that
/// cannot be read or parsed, or is over a limit, is an error whatever
/// [`LoadOptions::strict`] says; a bad record or page is an error in strict mode and
/// otherwise left out with a `tracing` warning.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `path` is not under `root`, has no [`Format`], is not
/// UTF-8 or is over a limit; [`Error::Io`] when it cannot be read; [`Error::Format`]
/// when it cannot be parsed.
pub fn load_file(root: &Path, path: &Path, options: &LoadOptions) -> Result<Vec<Document>> {
    let abs = if path.is_relative() && !path.starts_with(root) {
        root.join(path)
    } else {
        path.to_path_buf()
    };
    if !abs.starts_with(root) {
        return Err(Error::invalid(
            format!("file {}", path.display()),
            format!("not under the folder {}", root.display()),
        ));
    }
    let rel = rel_path(root, &abs).ok_or_else(|| {
        Error::invalid(
            format!("file {}", path.display()),
            "the path is not valid UTF-8",
        )
    })?;
    let format = Format::of(&abs).ok_or_else(|| {
        Error::invalid(
            format!("file {rel}"),
            "no loader for this extension (see lprag_load::Format)",
        )
    })?;
    match read_file(&abs, &rel, format, options) {
        Ok(outcome) => {
            for p in outcome.problems {
                if options.strict && p.fatal {
                    return Err(p.error);
                }
                tracing::warn!(target: "lprag", "skipped part of {rel}: {}", p.reason);
            }
            Ok(outcome.documents)
        }
        Err(p) if p.fatal => Err(p.error),
        Err(_) => Ok(Vec::new()),
    }
}

/// Why a file, record or page was not loaded.
struct Problem {
    reason: String,
    error: Error,
    /// Content was lost (strict mode fails); `false` for files with nothing to load.
    fatal: bool,
}

impl Problem {
    fn fatal(reason: String, error: Error) -> Self {
        Self {
            reason,
            error,
            fatal: true,
        }
    }

    fn nothing_to_load(rel: &str, reason: &str) -> Self {
        Self {
            reason: reason.to_string(),
            error: Error::invalid(format!("file {rel}"), reason),
            fatal: false,
        }
    }

    fn parse(abs: &Path, reason: String) -> Self {
        Self::fatal(reason.clone(), Error::format(abs, reason))
    }

    fn io(abs: &Path, e: std::io::Error) -> Self {
        Self::fatal(format!("cannot read the file: {e}"), Error::io(abs, e))
    }
}

/// Record `problem` as skipped and warn, or return its error in strict mode.
fn fail_or_skip(
    report: &mut LoadReport,
    progress: &dyn Progress,
    options: &LoadOptions,
    path: String,
    problem: Problem,
) -> Result<()> {
    if options.strict && problem.fatal {
        return Err(problem.error);
    }
    progress.warn(&format!("skipped {path}: {}", problem.reason));
    report.skipped.push(Skipped {
        path,
        reason: problem.reason,
    });
    Ok(())
}

fn walker(root: &Path, options: &LoadOptions) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(!options.hidden)
        .follow_links(options.follow_links)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .parents(true)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| {
            !(e.depth() > 0 && e.file_name() == ".git" && e.file_type().is_some_and(|t| t.is_dir()))
        });
    b
}

/// The path a walk error is about, if it names one.
fn walk_error_path(e: &ignore::Error) -> Option<&Path> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            walk_error_path(err)
        }
        ignore::Error::Partial(errs) => errs.iter().find_map(walk_error_path),
        ignore::Error::Loop { child, .. } => Some(child),
        _ => None,
    }
}

/// A walk error as a problem: unreadable folders and link loops lose files (fatal); a
/// bad rule in an ignore file does not.
fn walk_problem(e: &ignore::Error, rel: &str) -> Problem {
    let reason = e.to_string();
    match e.io_error() {
        Some(io) => Problem::fatal(
            reason,
            Error::io(rel, std::io::Error::new(io.kind(), e.to_string())),
        ),
        None if matches!(e, ignore::Error::Loop { .. }) => Problem::fatal(
            reason.clone(),
            Error::invalid(format!("folder {rel}"), reason),
        ),
        None => Problem {
            error: Error::invalid(format!("ignore file {rel}"), reason.clone()),
            reason,
            fatal: false,
        },
    }
}

/// `path` relative to `base`, `/`-separated; `None` when a component is not UTF-8.
fn rel_path(base: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(base).unwrap_or(path);
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::CurDir => {}
            c => parts.push(c.as_os_str().to_str()?),
        }
    }
    Some(parts.join("/"))
}

fn rel_lossy(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The documents of one file, and the records or pages left out.
struct FileOutcome {
    documents: Vec<Document>,
    problems: Vec<Problem>,
}

/// Read one file; `Err` when nothing of it can be loaded.
fn read_file(
    abs: &Path,
    rel: &str,
    format: Format,
    options: &LoadOptions,
) -> std::result::Result<FileOutcome, Problem> {
    let meta = fs::metadata(abs).map_err(|e| Problem::io(abs, e))?;
    let bytes = read_bounded(abs, rel, meta.len(), options.max_file_bytes)?;
    let stem = Path::new(rel)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(rel)
        .to_string();
    let base = base_metadata(rel, &meta, bytes.len(), format);
    let doc = |id: String, title: String, text: String, extra: BTreeMap<String, String>| {
        let mut metadata = extra;
        metadata.extend(base.iter().map(|(k, v)| (k.clone(), v.clone())));
        metadata.insert(TITLE_KEY.to_string(), title.clone());
        Document {
            id,
            title,
            text,
            metadata,
        }
    };
    let single = |d: Document| FileOutcome {
        documents: vec![d],
        problems: Vec::new(),
    };

    if format == Format::Pdf {
        return read_pdf(abs, rel, &bytes, &stem, &doc);
    }
    let text = utf8(abs, bytes)?;
    if text.trim().is_empty() {
        return Err(Problem::nothing_to_load(
            rel,
            "empty or whitespace-only file",
        ));
    }
    match format {
        Format::Markdown => {
            let title = markdown::markdown_title(&text).unwrap_or(stem);
            Ok(single(doc(rel.to_string(), title, text, BTreeMap::new())))
        }
        Format::Text => Ok(single(doc(rel.to_string(), stem, text, BTreeMap::new()))),
        Format::Html => {
            let h = html::html_to_text(&text);
            if h.text.is_empty() {
                return Err(Problem::nothing_to_load(rel, "no visible text in the HTML"));
            }
            let title = if h.title.is_empty() { stem } else { h.title };
            Ok(single(doc(rel.to_string(), title, h.text, BTreeMap::new())))
        }
        Format::Json | Format::Jsonl => read_records(abs, rel, format, &text, &stem, options, &doc),
        Format::Pdf => unreachable!("handled above"),
    }
}

/// The metadata every document of a file carries: its path, modification time (where
/// recorded), size in bytes and format.
fn base_metadata(
    rel: &str,
    meta: &fs::Metadata,
    bytes: usize,
    format: Format,
) -> BTreeMap<String, String> {
    let mut base = BTreeMap::new();
    base.insert(PATH_KEY.to_string(), rel.to_string());
    if let Ok(t) = meta.modified() {
        base.insert(MODIFIED_KEY.to_string(), time::rfc3339(t));
    }
    base.insert(BYTES_KEY.to_string(), bytes.to_string());
    base.insert(FORMAT_KEY.to_string(), format.name().to_string());
    base
}

/// The records of a JSON or JSON Lines file as documents, with the records left out
/// (and a cut at [`LoadOptions::max_records_per_file`]) as problems.
fn read_records(
    abs: &Path,
    rel: &str,
    format: Format,
    text: &str,
    stem: &str,
    options: &LoadOptions,
    doc: &dyn Fn(String, String, String, BTreeMap<String, String>) -> Document,
) -> std::result::Result<FileOutcome, Problem> {
    let max = options.max_records_per_file;
    let (records, truncated) = if format == Format::Json {
        json::parse_json(text, max).map_err(|reason| Problem::parse(abs, reason))?
    } else {
        json::parse_jsonl(text, max)
    };
    let mut out = FileOutcome {
        documents: Vec::new(),
        problems: Vec::new(),
    };
    for r in records {
        match r {
            Ok(r) => {
                let title = r.title.unwrap_or_else(|| stem.to_string());
                out.documents
                    .push(doc(format!("{rel}#{}", r.key), title, r.text, r.metadata));
            }
            Err(bad) if bad.malformed => out.problems.push(Problem::parse(abs, bad.reason)),
            Err(bad) => out
                .problems
                .push(Problem::nothing_to_load(rel, &bad.reason)),
        }
    }
    if truncated {
        let reason =
            format!("only the first {max} records were loaded (max_records_per_file = {max})");
        out.problems.push(Problem::fatal(
            reason.clone(),
            Error::invalid(format!("file {rel}"), reason),
        ));
    }
    if out.documents.is_empty() && out.problems.is_empty() {
        return Err(Problem::nothing_to_load(rel, "no records"));
    }
    Ok(out)
}

/// The file's bytes, at most `max` of them.
fn read_bounded(
    abs: &Path,
    rel: &str,
    len: u64,
    max: u64,
) -> std::result::Result<Vec<u8>, Problem> {
    let too_large = |len: u64| {
        let reason = format!("too large: {len} bytes, over max_file_bytes = {max}");
        Problem::fatal(
            reason.clone(),
            Error::invalid(format!("file {rel}"), reason),
        )
    };
    if len > max {
        return Err(too_large(len));
    }
    let file = fs::File::open(abs).map_err(|e| Problem::io(abs, e))?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Problem::io(abs, e))?;
    if bytes.len() as u64 > max {
        // The file grew while it was read.
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// UTF-8 text without a byte order mark; binary data (a NUL byte) is refused too.
fn utf8(abs: &Path, mut bytes: Vec<u8>) -> std::result::Result<String, Problem> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(Problem::parse(
            abs,
            format!("not UTF-8 text: binary data (a NUL byte at offset {at})"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        Problem::parse(
            abs,
            format!(
                "not UTF-8 text (an invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(feature = "pdf")]
fn read_pdf(
    abs: &Path,
    rel: &str,
    bytes: &[u8],
    stem: &str,
    doc: &dyn Fn(String, String, String, BTreeMap<String, String>) -> Document,
) -> std::result::Result<FileOutcome, Problem> {
    let pages = pdf::pdf_pages(bytes).map_err(|reason| Problem::parse(abs, reason))?;
    let mut out = FileOutcome {
        documents: Vec::new(),
        problems: Vec::new(),
    };
    for (n, text) in pages.pages {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let extra = BTreeMap::from([(PAGE_KEY.to_string(), n.to_string())]);
        out.documents.push(doc(
            format!("{rel}#page={n}"),
            stem.to_string(),
            text.to_string(),
            extra,
        ));
    }
    for (n, e) in pages.failed {
        out.problems.push(Problem::parse(
            abs,
            format!("page {n} could not be read: {e}"),
        ));
    }
    if out.documents.is_empty() && out.problems.is_empty() {
        return Err(Problem::nothing_to_load(
            rel,
            "no extractable text in the PDF (a scanned PDF needs OCR first)",
        ));
    }
    Ok(out)
}

#[cfg(not(feature = "pdf"))]
fn read_pdf(
    _abs: &Path,
    rel: &str,
    _bytes: &[u8],
    _stem: &str,
    _doc: &dyn Fn(String, String, String, BTreeMap<String, String>) -> Document,
) -> std::result::Result<FileOutcome, Problem> {
    let reason = "PDF support is not built in: enable the `pdf` feature of lprag-load";
    Err(Problem::fatal(
        reason.to_string(),
        Error::invalid(format!("file {rel}"), reason),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        let f = |p: &str| Format::of(Path::new(p));
        assert_eq!(f("a/b.MD"), Some(Format::Markdown));
        assert_eq!(f("x.mdx"), Some(Format::Markdown));
        assert_eq!(f("x.rst"), Some(Format::Text));
        assert_eq!(f("x.htm"), Some(Format::Html));
        assert_eq!(f("x.ndjson"), Some(Format::Jsonl));
        assert_eq!(f("x.pdf"), Some(Format::Pdf));
        assert_eq!(f("x.rs"), None);
        assert_eq!(f("README"), None);
        assert_eq!(f(".md"), None); // a hidden file named ".md" has no extension
        for fmt in Format::ALL {
            assert_eq!(fmt.to_string(), fmt.name());
        }
    }

    #[test]
    fn relative_paths() {
        let base = Path::new("/data");
        assert_eq!(rel_path(base, Path::new("/data/a/b.md")).unwrap(), "a/b.md");
        assert_eq!(
            rel_path(Path::new("."), Path::new("./a/b.md")).unwrap(),
            "a/b.md"
        );
        assert_eq!(rel_path(Path::new(""), Path::new("b.md")).unwrap(), "b.md");
    }
}
