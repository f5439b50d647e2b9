//! PDF text, page by page (cargo feature `pdf`).
//!
//! Built on `pdf-extract`, a pure-Rust extractor on top of `lopdf`: it decodes the fonts'
//! encodings and `ToUnicode` maps and places spaces and line breaks from the glyph
//! positions, which `lopdf`'s own `extract_text` does not (it concatenates the strings of
//! the content stream, so words run together and non-Latin encodings come out wrong). Both
//! need no C library. `pdf-extract` still has `unwrap`s on malformed input, so each call
//! runs under `catch_unwind` and a panic becomes a skipped file.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The text of every page (`pages[0]` is page 1), and the pages that could not be read
/// with why. `Err` when the file is not a readable PDF.
pub(crate) struct PdfPages {
    pub pages: Vec<(u32, String)>,
    pub failed: Vec<(u32, String)>,
}

pub(crate) fn pdf_pages(bytes: &[u8]) -> Result<PdfPages, String> {
    let mut doc = guarded(|| pdf_extract::Document::load_mem(bytes).map_err(|e| e.to_string()))?
        .map_err(|e| format!("not a readable PDF: {e}"))?;
    if doc.is_encrypted() {
        // Many PDFs are "encrypted" with an empty user password (permissions only).
        guarded(|| doc.decrypt("").map_err(|e| e.to_string()))?
            .map_err(|e| format!("encrypted PDF that needs a password: {e}"))?;
    }
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut pages = Vec::with_capacity(numbers.len());
    let mut failed = Vec::new();
    for n in numbers {
        let page = guarded(|| {
            let mut s = String::new();
            pdf_extract::output_doc_page(&doc, &mut pdf_extract::PlainTextOutput::new(&mut s), n)
                .map(|()| s)
                .map_err(|e| e.to_string())
        });
        match page {
            Ok(Ok(text)) => pages.push((n, text)),
            Ok(Err(e)) | Err(e) => failed.push((n, e)),
        }
    }
    Ok(PdfPages { pages, failed })
}

/// Run `f`, turning a panic into an error message.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        format!("the PDF reader failed: {msg}")
    })
}
