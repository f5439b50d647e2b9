//! `load_dir` and `load_file` on a folder of every format.

use std::path::Path;
use std::sync::Mutex;

use lprag_core::{Error, NoProgress, Progress};
use lprag_load::{
    load_dir, load_file, LoadOptions, BYTES_KEY, FORMAT_KEY, MODIFIED_KEY, PATH_KEY, TITLE_KEY,
};

fn write(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// A folder with every format, ignored, hidden and broken files, and nested folders.
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, ".gitignore", "ignored/\n*.tmp.md\n");
    write(
        r,
        "guide.md",
        "Intro line\n\n# Install Guide\n\n## Linux\n\nRun it.\n",
    );
    write(
        r,
        "setext.markdown",
        "Setext Title\n============\n\nBody.\n",
    );
    write(r, "notes/plain.txt", "\u{feff}Plain text with a BOM.\n");
    write(r, "notes/deep/er/readme.rst", "Nested rst.\n");
    write(
        r,
        "web/page.html",
        "<html><head><title>Web Page</title><script>alert(1)</script></head>\
         <body><p>Hello <b>world</b>.</p><p>Second.</p></body></html>",
    );
    write(r, "web/noheading.htm", "<p>No title here</p>");
    write(
        r,
        "data/records.json",
        r#"[{"id": "r1", "title": "First", "text": "One.", "year": 2001, "path": "spoof"},
            {"content": "Two."},
            {"title": "no text"}]"#,
    );
    write(
        r,
        "data/single.json",
        r#"{"body": "Just one.", "lang": "en"}"#,
    );
    write(
        r,
        "data/lines.jsonl",
        "{\"text\": \"L0\", \"id\": 7}\n\n{\"text\": \"L1\"}\nnot json\n",
    );
    write(r, "data/broken.json", "{\"text\": ");
    write(r, "bad.txt", b"caf\xe9 latin-1");
    write(r, "garbage.md", [0u8, 159, 146, 150, 255, 0, 1]);
    write(r, "empty.md", "  \n\t\n");
    write(r, "big.txt", "x".repeat(2_000));
    write(r, "ignored/secret.md", "# Secret");
    write(r, "draft.tmp.md", "# Draft");
    write(r, ".hidden.md", "# Hidden");
    write(r, ".config/inner.md", "# Hidden folder");
    write(r, "code.rs", "fn main() {}");
    write(r, "README", "no extension");
    dir
}

fn options() -> LoadOptions {
    LoadOptions {
        max_file_bytes: 1_000,
        ..LoadOptions::default()
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Progress for Recorder {
    fn start(&self, stage: &str, total: Option<u64>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("start {stage} {total:?}"));
    }
    fn update(&self, _stage: &str, done: u64, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("update {done} {message}"));
    }
    fn finish(&self, stage: &str) {
        self.0.lock().unwrap().push(format!("finish {stage}"));
    }
    fn warn(&self, message: &str) {
        self.0.lock().unwrap().push(format!("warn {message}"));
    }
}

#[test]
fn loads_every_format_with_ids_titles_and_metadata() {
    let dir = corpus();
    let progress = Recorder::default();
    let loaded = load_dir(dir.path(), &options(), &progress).unwrap();
    let ids: Vec<&str> = loaded.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "data/lines.jsonl#7",
            "data/lines.jsonl#1",
            "data/records.json#r1",
            "data/records.json#1",
            "data/single.json#0",
            "guide.md",
            "notes/deep/er/readme.rst",
            "notes/plain.txt",
            "setext.markdown",
            "web/noheading.htm",
            "web/page.html",
        ]
    );
    let doc = |id: &str| loaded.documents.iter().find(|d| d.id == id).unwrap();
    let titles: Vec<(&str, &str)> = loaded
        .documents
        .iter()
        .map(|d| (d.id.as_str(), d.title.as_str()))
        .collect();
    assert!(
        titles.contains(&("guide.md", "Install Guide")),
        "{titles:?}"
    );
    assert!(titles.contains(&("setext.markdown", "Setext Title")));
    assert!(titles.contains(&("notes/plain.txt", "plain")));
    assert!(titles.contains(&("web/page.html", "Web Page")));
    assert!(titles.contains(&("web/noheading.htm", "noheading")));
    assert!(titles.contains(&("data/records.json#r1", "First")));
    assert!(titles.contains(&("data/records.json#1", "records")));

    // Markdown stays Markdown; the BOM is gone; HTML is text only.
    assert!(doc("guide.md").text.contains("## Linux"));
    assert_eq!(doc("notes/plain.txt").text, "Plain text with a BOM.\n");
    assert_eq!(doc("web/page.html").text, "Hello world.\n\nSecond.");

    // Metadata on every document.
    for d in &loaded.documents {
        let file = d.id.split('#').next().unwrap();
        assert_eq!(d.metadata[PATH_KEY], file, "{}", d.id);
        assert_eq!(d.metadata[TITLE_KEY], d.title);
        let bytes: u64 = d.metadata[BYTES_KEY].parse().unwrap();
        assert_eq!(
            bytes,
            std::fs::metadata(dir.path().join(file)).unwrap().len()
        );
        let m = &d.metadata[MODIFIED_KEY];
        assert!(
            m.len() == 20 && m.ends_with('Z') && m.as_bytes()[10] == b'T',
            "{m}"
        );
    }
    assert_eq!(doc("guide.md").metadata[FORMAT_KEY], "markdown");
    assert_eq!(doc("data/lines.jsonl#7").metadata[FORMAT_KEY], "jsonl");
    let r1 = &doc("data/records.json#r1").metadata;
    assert_eq!(r1["year"], "2001");
    assert_eq!(r1[PATH_KEY], "data/records.json"); // the loader's keys win
    assert_eq!(doc("data/single.json#0").metadata["lang"], "en");

    // The report.
    let report = &loaded.report;
    assert_eq!(report.documents, 11);
    assert_eq!(report.files_seen, 14);
    assert_eq!(report.files_loaded, 9);
    assert_eq!(report.ignored_files, 2); // code.rs, README (.gitignore has no extension)
    let by_format: Vec<(&str, usize)> = report
        .by_format
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        by_format,
        [
            ("html", 2),
            ("json", 2),
            ("jsonl", 1),
            ("markdown", 2),
            ("text", 2)
        ]
    );
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    let reason = |path: &str| {
        skipped
            .iter()
            .filter(|(p, _)| *p == path)
            .map(|(_, r)| *r)
            .collect::<Vec<_>>()
    };
    assert_eq!(skipped.len(), 7, "{skipped:#?}");
    assert!(reason("bad.txt")[0].starts_with("not UTF-8 text"));
    assert!(reason("garbage.md")[0].starts_with("not UTF-8 text"));
    assert_eq!(reason("empty.md"), ["empty or whitespace-only file"]);
    assert_eq!(
        reason("big.txt"),
        ["too large: 2000 bytes, over max_file_bytes = 1000"]
    );
    assert!(reason("data/broken.json")[0].starts_with("invalid JSON"));
    assert_eq!(
        reason("data/records.json"),
        ["record 2: no text field (one of text, content, body)"]
    );
    assert!(reason("data/lines.jsonl")[0].starts_with("record 2 (line 4): invalid JSON"));
    // Nothing ignored or hidden leaked in.
    for d in &loaded.documents {
        assert!(!d.id.contains("secret") && !d.id.contains("ignored") && !d.id.starts_with('.'));
        assert!(!d.id.contains("draft"));
    }

    // Progress: one update per file, a warning per skip.
    let events = progress.0.lock().unwrap();
    assert_eq!(events[0], "start load files Some(14)");
    assert_eq!(events.last().unwrap(), "finish load files");
    assert_eq!(
        events.iter().filter(|e| e.starts_with("update")).count(),
        14
    );
    assert_eq!(events.iter().filter(|e| e.starts_with("warn")).count(), 7);
    assert!(events.contains(&"warn skipped empty.md: empty or whitespace-only file".to_string()));
}

#[test]
fn hidden_files_on_request_and_loads_are_deterministic() {
    let dir = corpus();
    let opts = LoadOptions {
        hidden: true,
        ..options()
    };
    let a = load_dir(dir.path(), &opts, &NoProgress).unwrap();
    let ids: Vec<&str> = a.documents.iter().map(|d| d.id.as_str()).collect();
    assert!(
        ids.contains(&".hidden.md") && ids.contains(&".config/inner.md"),
        "{ids:?}"
    );
    assert!(!ids.contains(&"ignored/secret.md"));
    let b = load_dir(dir.path(), &opts, &NoProgress).unwrap();
    assert_eq!(a.documents, b.documents);
    assert_eq!(a.report.skipped, b.report.skipped);
}

#[test]
fn strict_mode_fails_with_a_typed_error_naming_the_file() {
    let dir = corpus();
    let strict = LoadOptions {
        strict: true,
        ..options()
    };
    // The first file in path order that lost content: bad.txt (not UTF-8).
    let e = load_dir(dir.path(), &strict, &NoProgress).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(e.to_string().contains("bad.txt"), "{e}");

    // Without it: big.txt, over the size limit.
    std::fs::remove_file(dir.path().join("bad.txt")).unwrap();
    let e = load_dir(dir.path(), &strict, &NoProgress).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    assert!(e.to_string().contains("big.txt") && e.to_string().contains("max_file_bytes"));

    // A clean folder with an empty file loads in strict mode (nothing was lost).
    let clean = tempfile::tempdir().unwrap();
    write(clean.path(), "a.md", "# A\n\ntext");
    write(clean.path(), "empty.txt", "");
    let loaded = load_dir(clean.path(), &strict, &NoProgress).unwrap();
    assert_eq!(loaded.documents.len(), 1);
    assert_eq!(loaded.report.skipped.len(), 1);
}

#[test]
fn load_file_matches_load_dir() {
    let dir = corpus();
    let root = dir.path();
    let docs = load_file(root, Path::new("data/records.json"), &options()).unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["data/records.json#r1", "data/records.json#1"]);
    let abs = load_file(root, &root.join("guide.md"), &options()).unwrap();
    assert_eq!(abs[0].id, "guide.md");
    let all = load_dir(root, &options(), &NoProgress).unwrap();
    assert_eq!(
        abs[0],
        *all.documents.iter().find(|d| d.id == "guide.md").unwrap()
    );
    // Errors, not skips.
    let e = load_file(root, Path::new("bad.txt"), &options()).unwrap_err();
    assert!(e.to_string().contains("not UTF-8"), "{e}");
    let e = load_file(root, Path::new("code.rs"), &options()).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    let e = load_file(root, Path::new("/elsewhere/x.md"), &options()).unwrap_err();
    assert!(e.to_string().contains("not under"), "{e}");
    let strict = LoadOptions {
        strict: true,
        ..options()
    };
    assert!(load_file(root, Path::new("data/records.json"), &strict).is_err());
    assert!(load_file(root, Path::new("empty.md"), &options())
        .unwrap()
        .is_empty());
}

#[test]
fn a_single_file_root_and_a_missing_root() {
    let dir = corpus();
    let one = load_dir(&dir.path().join("guide.md"), &options(), &NoProgress).unwrap();
    assert_eq!(one.documents.len(), 1);
    assert_eq!(one.documents[0].id, "guide.md");
    let e = load_dir(&dir.path().join("nope"), &options(), &NoProgress).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn record_limits_and_duplicate_record_ids() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..10)
        .map(|i| format!("{{\"text\": \"t{i}\"}}\n"))
        .collect();
    write(dir.path(), "many.jsonl", lines);
    write(
        dir.path(),
        "dup.json",
        r#"[{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]"#,
    );
    let opts = LoadOptions {
        max_records_per_file: 4,
        ..LoadOptions::default()
    };
    let loaded = load_dir(dir.path(), &opts, &NoProgress).unwrap();
    let ids: Vec<&str> = loaded.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "dup.json#x",
            "many.jsonl#0",
            "many.jsonl#1",
            "many.jsonl#2",
            "many.jsonl#3"
        ]
    );
    let reasons: Vec<&str> = loaded
        .report
        .skipped
        .iter()
        .map(|s| s.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "duplicate document id 'dup.json#x'",
            "only the first 4 records were loaded (max_records_per_file = 4)"
        ]
    );
}

#[cfg(unix)]
#[test]
fn links_are_followed_only_on_request_and_non_utf8_paths_are_skipped() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "linked.md", "# Linked");
    std::os::unix::fs::symlink(outside.path().join("linked.md"), dir.path().join("link.md"))
        .unwrap();
    write(dir.path(), "real.md", "# Real");
    let name = OsStr::from_bytes(b"bad\xff.md");
    std::fs::write(dir.path().join(name), "# Bad name").unwrap();

    let plain = load_dir(dir.path(), &LoadOptions::default(), &NoProgress).unwrap();
    let ids: Vec<&str> = plain.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["real.md"]);
    assert_eq!(plain.report.skipped.len(), 1);
    assert_eq!(
        plain.report.skipped[0].reason,
        "the path is not valid UTF-8"
    );
    assert_eq!(plain.report.skipped[0].path, "bad\u{fffd}.md");

    let follow = LoadOptions {
        follow_links: true,
        ..LoadOptions::default()
    };
    let linked = load_dir(dir.path(), &follow, &NoProgress).unwrap();
    let ids: Vec<&str> = linked.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["link.md", "real.md"]);

    let strict = LoadOptions {
        strict: true,
        ..LoadOptions::default()
    };
    let e = load_dir(dir.path(), &strict, &NoProgress).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
}

#[test]
fn hostile_inputs_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "deep.json", "[".repeat(50_000) + &"]".repeat(50_000));
    write(r, "deep.jsonl", "{\"a\":".repeat(10_000));
    write(r, "deep.html", "<div>".repeat(100_000) + "text");
    write(
        r,
        "long.md",
        "#".repeat(200_000) + " " + &"word ".repeat(200_000),
    );
    write(
        r,
        "fence.md",
        "```\n".to_string() + &"# not a title\n".repeat(10_000),
    );
    write(r, "nul.txt", "text\0more");
    write(r, "ws.html", "<p>   </p><script>x</script>");
    write(r, "scalar.json", "42");
    write(r, "empty.json", "[]");
    write(r, "fake.pdf", "%PDF-1.4 garbage");
    let loaded = load_dir(r, &LoadOptions::default(), &NoProgress).unwrap();
    let ids: Vec<&str> = loaded.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["deep.html", "fence.md", "long.md"]);
    assert_eq!(loaded.documents[1].title, "fence");
    let skipped: Vec<(&str, &str)> = loaded
        .report
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 7, "{skipped:#?}");
    assert!(skipped.contains(&("empty.json", "no records")));
    assert!(skipped.contains(&("ws.html", "no visible text in the HTML")));
}

#[cfg(feature = "pdf")]
#[test]
fn pdf_pages_become_documents() {
    use pdf_extract::{Dictionary, Document, Object, Stream};

    // A two-page PDF with Helvetica text, written with lopdf (re-exported by pdf-extract).
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let mut font = Dictionary::new();
    font.set("Type", Object::Name(b"Font".to_vec()));
    font.set("Subtype", Object::Name(b"Type1".to_vec()));
    font.set("BaseFont", Object::Name(b"Helvetica".to_vec()));
    let font_id = doc.add_object(font);
    let mut fonts = Dictionary::new();
    fonts.set("F1", Object::Reference(font_id));
    let mut resources = Dictionary::new();
    resources.set("Font", Object::Dictionary(fonts));
    let resources_id = doc.add_object(resources);
    let mut kids = Vec::new();
    for text in ["Hello from page one", "Second page text"] {
        let content = format!("BT /F1 24 Tf 72 700 Td ({text}) Tj ET");
        let content_id = doc.add_object(Stream::new(Dictionary::new(), content.into_bytes()));
        let mut page = Dictionary::new();
        page.set("Type", Object::Name(b"Page".to_vec()));
        page.set("Parent", Object::Reference(pages_id));
        page.set("Contents", Object::Reference(content_id));
        kids.push(Object::Reference(doc.add_object(page)));
    }
    let mut pages = Dictionary::new();
    pages.set("Type", Object::Name(b"Pages".to_vec()));
    pages.set("Count", Object::Integer(kids.len() as i64));
    pages.set("Kids", Object::Array(kids));
    pages.set("Resources", Object::Reference(resources_id));
    pages.set(
        "MediaBox",
        Object::Array([0, 0, 595, 842].map(Object::Integer).to_vec()),
    );
    doc.objects.insert(pages_id, Object::Dictionary(pages));
    let mut catalog = Dictionary::new();
    catalog.set("Type", Object::Name(b"Catalog".to_vec()));
    catalog.set("Pages", Object::Reference(pages_id));
    let catalog_id = doc.add_object(catalog);
    doc.trailer.set("Root", Object::Reference(catalog_id));

    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    write(dir.path(), "paper.pdf", &bytes);

    let loaded = load_dir(dir.path(), &LoadOptions::default(), &NoProgress).unwrap();
    assert!(
        loaded.report.skipped.is_empty(),
        "{:?}",
        loaded.report.skipped
    );
    let docs = &loaded.documents;
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].id, "paper.pdf#page=1");
    assert_eq!(docs[1].id, "paper.pdf#page=2");
    assert!(
        docs[0].text.contains("Hello from page one"),
        "{:?}",
        docs[0].text
    );
    assert!(
        docs[1].text.contains("Second page text"),
        "{:?}",
        docs[1].text
    );
    assert_eq!(docs[1].metadata[lprag_load::PAGE_KEY], "2");
    assert_eq!(docs[1].metadata[FORMAT_KEY], "pdf");
    assert_eq!(docs[1].title, "paper");
    assert_eq!(loaded.report.by_format["pdf"], 1);
}
