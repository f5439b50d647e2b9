//! Load a folder of files as documents and print what happened.
//!
//! ```text
//! cargo run -p lprag-load --example load_dir -- ~/notes
//! cargo run -p lprag-load --example load_dir            # a small folder it writes itself
//! ```

use std::path::PathBuf;

use lprag_core::NoProgress;
use lprag_load::{load_dir, LoadOptions, FORMAT_KEY, MODIFIED_KEY};

fn main() -> lprag_core::Result<()> {
    // The folder: the first argument, or a temporary one with a file of each kind.
    let temp;
    let root = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => {
            temp = tempfile::tempdir().map_err(|e| lprag_core::Error::io("temp dir", e))?;
            write_sample(temp.path())?;
            temp.path().to_path_buf()
        }
    };

    // Defaults: .gitignore honoured, hidden files and links skipped, 16 MiB per file at
    // most, bad files skipped with a warning on stderr (set `strict: true` to fail instead).
    // `NoProgress` still prints warnings; pass your own `Progress` for a progress bar.
    let options = LoadOptions::default();
    let loaded = load_dir(&root, &options, &NoProgress)?;

    for d in &loaded.documents {
        println!(
            "{:<32} {:<8} {:<20} {:?} ({} bytes of text)",
            d.id,
            d.metadata[FORMAT_KEY],
            d.metadata.get(MODIFIED_KEY).map_or("", String::as_str),
            d.title,
            d.text.len()
        );
    }
    let report = &loaded.report;
    println!(
        "\n{} documents from {} of {} files in {:.3} s; by format: {:?}; {} other files ignored",
        report.documents,
        report.files_loaded,
        report.files_seen,
        report.seconds,
        report.by_format,
        report.ignored_files
    );
    for s in &report.skipped {
        println!("skipped {}: {}", s.path, s.reason);
    }
    Ok(())
}

fn write_sample(root: &std::path::Path) -> lprag_core::Result<()> {
    let files: [(&str, &[u8]); 7] = [
        (
            "guide/install.md",
            b"# Install\n\n## Linux\n\nUse the package manager.\n",
        ),
        ("notes.txt", b"Plain notes, one document.\n"),
        (
            "page.html",
            b"<title>A page</title><p>Visible <b>text</b>.</p><script>hidden()</script>",
        ),
        (
            "faq.json",
            br#"[{"id": "q1", "title": "Why?", "text": "Because.", "lang": "en"}]"#,
        ),
        (
            "log.jsonl",
            b"{\"text\": \"first line\"}\n{\"text\": \"second line\"}\n",
        ),
        ("broken.json", b"{\"text\": "),
        (".gitignore", b"build/\n"),
    ];
    for (rel, bytes) in files {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| lprag_core::Error::io(dir, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| lprag_core::Error::io(&path, e))?;
    }
    Ok(())
}
