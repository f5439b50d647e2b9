//! Directories lprag writes into: which ones it may write over, and one writer at a time.
//!
//! A save, a build's work directory and a training's checkpoints go only into a directory
//! that does not exist, is empty, or already is what lprag writes there — recognised by
//! its marker file (an index's manifest) and, where lprag replaces or cleans the whole
//! directory, by every entry being a name lprag writes. Anything else is
//! [`Error::ForeignDirectory`] naming the path and what was found, before a byte is
//! written. [`DirLock`] keeps a second writer out ([`Error::Busy`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// What lprag writes into one kind of directory, and how it recognises its own.
#[derive(Debug, Clone, Copy)]
pub struct DirSpec {
    /// What the directory holds, for messages (for example `"an LpRag index"`).
    pub kind: &'static str,
    /// The file whose presence marks the directory as this kind (for example
    /// `"manifest.json"`).
    pub marker: &'static str,
    /// A JSON key the marker's opening bytes must hold (its format-version field), so that
    /// a user's file of the same name is not taken for an index; `None` accepts any marker.
    pub marker_key: Option<&'static str>,
    /// For directories lprag replaces or cleans as a whole: the names it writes there (the
    /// marker included). Every entry must pass; `None` when lprag only writes its own files
    /// and leaves the others alone.
    pub owns: Option<fn(&str) -> bool>,
}

/// How much of a marker file is read to find its key.
const MARKER_PREFIX: u64 = 64 * 1024;

/// At most this many unknown entries are named in an error.
const NAMED: usize = 3;

impl DirSpec {
    /// `Ok` when lprag may write this kind into `dir`: it does not exist, is an empty
    /// directory, or holds this kind's marker (and, with [`DirSpec::owns`], nothing lprag
    /// did not write). Reads only; changes nothing.
    ///
    /// # Errors
    /// [`Error::ForeignDirectory`] naming `dir` and what was found; [`Error::Io`] when the
    /// directory cannot be read.
    pub fn check(&self, dir: &Path) -> Result<()> {
        let meta = match std::fs::metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(dir, e)),
        };
        if !meta.is_dir() {
            return Err(self.foreign(dir, "it is a file, not a directory".into()));
        }
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        if names.is_empty() {
            return Ok(());
        }
        names.sort();
        if !names.iter().any(|n| n == self.marker) {
            return Err(self.foreign(
                dir,
                format!("no {} but {}", self.marker, list(names.iter())),
            ));
        }
        if let Some(key) = self.marker_key {
            let path = dir.join(self.marker);
            if !marker_has_key(&path, key)? {
                return Err(self.foreign(
                    dir,
                    format!("{} is not lprag's (no \"{key}\" field)", self.marker),
                ));
            }
        }
        if let Some(owns) = self.owns {
            let unknown: Vec<&String> = names.iter().filter(|n| !owns(n)).collect();
            if !unknown.is_empty() {
                return Err(
                    self.foreign(dir, format!("it also holds {}", list(unknown.into_iter())))
                );
            }
        }
        Ok(())
    }

    /// Whether `dir` is this kind's although its marker is missing — written by a release
    /// before the marker, or by a writer killed before the marker was in place: it holds
    /// only names [`DirSpec::owns`] accepts, at least one of which `trace` says only lprag
    /// writes (a state or key file, a temporary file named [`TMP_PREFIX`]…).
    pub fn is_unmarked_own(&self, dir: &Path, trace: fn(&str) -> bool) -> bool {
        let (Some(owns), Ok(entries)) = (self.owns, std::fs::read_dir(dir)) else {
            return false;
        };
        let names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        !names.iter().any(|n| n == self.marker)
            && names.iter().any(|n| trace(n))
            && names.iter().all(|n| owns(n))
    }

    /// [`DirSpec::check`], passing also a directory [`DirSpec::is_unmarked_own`] accepts.
    ///
    /// # Errors
    /// Those of [`DirSpec::check`].
    pub fn check_or_unmarked(&self, dir: &Path, trace: fn(&str) -> bool) -> Result<()> {
        match self.check(dir) {
            Err(e) if !self.is_unmarked_own(dir, trace) => Err(e),
            _ => Ok(()),
        }
    }

    /// [`DirSpec::check`], then create `dir` (and its parents) when it does not exist.
    ///
    /// # Errors
    /// Those of [`DirSpec::check`]; [`Error::Io`] when the directory cannot be created.
    pub fn prepare(&self, dir: &Path) -> Result<()> {
        self.check(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
    }

    fn foreign(&self, dir: &Path, found: String) -> Error {
        Error::ForeignDirectory {
            path: dir.to_path_buf(),
            kind: self.kind.to_string(),
            found,
        }
    }
}

/// Up to [`NAMED`] names, quoted, and how many more.
fn list<'a>(names: impl ExactSizeIterator<Item = &'a String>) -> String {
    let total = names.len();
    let mut out: Vec<String> = names.take(NAMED).map(|n| format!("`{n}`")).collect();
    if total > NAMED {
        out.push(format!("{} more", total - NAMED));
    }
    out.join(", ")
}

/// Whether the opening bytes of the JSON file `path` are an object with the field `key`.
fn marker_has_key(path: &Path, key: &str) -> Result<bool> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = Vec::new();
    file.take(MARKER_PREFIX)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8_lossy(&head);
    let trimmed = text.trim_start();
    Ok(trimmed.starts_with('{') && trimmed.contains(&format!("\"{key}\"")))
}

/// Name prefix of the temporary files of lprag's atomic writes ([`write_atomic`]):
/// distinctive, so a directory holding one is recognisably lprag's even when a kill left
/// nothing else in it.
pub const TMP_PREFIX: &str = ".lprag-tmp";

/// Write `bytes` to `path` atomically and durably: a uniquely named temporary file beside
/// it ([`TMP_PREFIX`]), synced, renamed over `path`, and the directory synced. A crash
/// leaves the old file or the new one (and at worst a temporary file, which the
/// directory's owner may remove).
///
/// # Errors
/// [`Error::Io`] naming the file or directory that failed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| std::io::Write::write_all(w, bytes))
}

/// [`write_atomic`] with the contents written by `fill` (through a buffer), so a large
/// file need not be whole in memory first.
///
/// # Errors
/// [`Error::Io`] naming the file or directory that failed (also when `fill` fails).
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = parent.join(format!(
        "{TMP_PREFIX}{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            fill(&mut w)?;
            w.flush()?;
            let f = w
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    sync_dir(&parent)
}

/// `fsync` a directory so that the creations and renames in it are durable (a no-op where
/// directories cannot be opened for syncing).
///
/// # Errors
/// [`Error::Io`] naming the directory.
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// An exclusive lock on a directory, held while lprag writes into it (a build's work
/// directory, a training's checkpoints, a peer index being saved); released on drop. It
/// is an advisory `flock` on the directory itself, so it adds no file, and a process that
/// dies releases it. On platforms other than Unix it locks nothing.
#[derive(Debug)]
pub struct DirLock {
    #[cfg(unix)]
    _file: std::fs::File,
    path: PathBuf,
}

impl DirLock {
    /// Lock `dir` (which must exist) for `what` (for example `"build"`), failing at once
    /// when another holder has it.
    ///
    /// # Errors
    /// [`Error::Busy`] when the directory is locked (by another process, or another
    /// handle in this one); [`Error::Io`] when it cannot be opened.
    pub fn acquire(dir: &Path, what: &str) -> Result<Self> {
        #[cfg(unix)]
        {
            let file = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
            match file.try_lock() {
                Ok(()) => Ok(Self {
                    _file: file,
                    path: dir.to_path_buf(),
                }),
                Err(std::fs::TryLockError::WouldBlock) => Err(Error::Busy {
                    path: dir.to_path_buf(),
                    what: what.to_string(),
                }),
                Err(std::fs::TryLockError::Error(e)) => Err(Error::io(dir, e)),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = what;
            Ok(Self {
                path: dir.to_path_buf(),
            })
        }
    }

    /// Lock `dir` (which must exist) for `what`, waiting while another holder has it: for
    /// short writes such as a save, where the second writer should follow the first.
    ///
    /// # Errors
    /// [`Error::Io`] when the directory cannot be opened or locked.
    pub fn wait(dir: &Path, what: &str) -> Result<Self> {
        #[cfg(unix)]
        {
            let _ = what;
            let file = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
            file.lock().map_err(|e| Error::io(dir, e))?;
            Ok(Self {
                _file: file,
                path: dir.to_path_buf(),
            })
        }
        #[cfg(not(unix))]
        {
            Self::acquire(dir, what)
        }
    }

    /// The locked directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_names(name: &str) -> bool {
        matches!(name, "manifest.json" | "chunks.json" | "predictor")
            || name.starts_with(TMP_PREFIX)
    }

    const INDEX: DirSpec = DirSpec {
        kind: "an LpRag index",
        marker: "manifest.json",
        marker_key: Some("format_version"),
        owns: Some(index_names),
    };

    #[test]
    fn missing_empty_and_own_directories_pass() {
        let root = tempfile_dir();
        INDEX.check(&root.join("new")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        INDEX.check(&root.join("empty")).unwrap();
        let own = root.join("own");
        std::fs::create_dir_all(own.join("predictor")).unwrap();
        std::fs::write(own.join("manifest.json"), r#"{"format_version":1}"#).unwrap();
        std::fs::write(own.join("chunks.json"), "[]").unwrap();
        INDEX.check(&own).unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_users_directory_is_refused_with_what_was_found() {
        let root = tempfile_dir();
        std::fs::write(root.join("my-notes.txt"), "mine").unwrap();
        let e = INDEX.check(&root).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::ForeignDirectory { .. }), "{e:?}");
        assert!(
            text.contains("my-notes.txt") && text.contains("an LpRag index"),
            "{text}"
        );
        // An index directory with a user's file beside it.
        std::fs::write(root.join("manifest.json"), r#"{"format_version":1}"#).unwrap();
        let text = INDEX.check(&root).unwrap_err().to_string();
        assert!(text.contains("also holds `my-notes.txt`"), "{text}");
        // A user's manifest.json of another shape.
        std::fs::remove_file(root.join("my-notes.txt")).unwrap();
        std::fs::write(root.join("manifest.json"), r#"{"name":"app"}"#).unwrap();
        let text = INDEX.check(&root).unwrap_err().to_string();
        assert!(text.contains("format_version"), "{text}");
        // A file where the directory should be.
        let file = root.join("manifest.json");
        assert!(matches!(
            INDEX.check(&file),
            Err(Error::ForeignDirectory { .. })
        ));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn atomic_writes_replace_whole_and_leave_no_temporary_file() {
        let root = tempfile_dir();
        let path = root.join("deep/x.json");
        write_atomic(&path, b"1").unwrap();
        write_atomic(&path, b"22").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"22");
        assert_eq!(std::fs::read_dir(root.join("deep")).unwrap().count(), 1);
        // Written piece by piece; a writer that fails leaves the old file and no
        // temporary file.
        write_atomic_with(&path, |w| {
            w.write_all(b"3")?;
            w.write_all(b"33")
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"333");
        let e = write_atomic_with(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("the writer failed"))
        })
        .unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e:?}");
        assert_eq!(std::fs::read(&path).unwrap(), b"333");
        assert_eq!(std::fs::read_dir(root.join("deep")).unwrap().count(), 1);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_unmarked_directory_is_own_only_with_a_trace_and_nothing_else() {
        let trace = |n: &str| n.starts_with(TMP_PREFIX);
        let root = tempfile_dir();
        std::fs::write(root.join(".lprag-tmp1-2-3"), "").unwrap();
        assert!(INDEX.is_unmarked_own(&root, trace));
        INDEX.check_or_unmarked(&root, trace).unwrap();
        std::fs::write(root.join("chunks.json"), "[]").unwrap();
        assert!(INDEX.is_unmarked_own(&root, trace));
        std::fs::write(root.join("notes.txt"), "mine").unwrap();
        assert!(!INDEX.is_unmarked_own(&root, trace));
        assert!(INDEX.check_or_unmarked(&root, trace).is_err());
        std::fs::remove_file(root.join("notes.txt")).unwrap();
        std::fs::remove_file(root.join(".lprag-tmp1-2-3")).unwrap();
        // Names an index has, but none only lprag writes: a user's `chunks.json`.
        assert!(!INDEX.is_unmarked_own(&root, trace));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_locked_directory_is_busy_until_released() {
        let root = tempfile_dir();
        let lock = DirLock::acquire(&root, "build").unwrap();
        let e = DirLock::acquire(&root, "build").unwrap_err();
        assert!(matches!(e, Error::Busy { .. }), "{e:?}");
        assert!(
            e.to_string().contains("in use by another lprag build"),
            "{e}"
        );
        drop(lock);
        DirLock::acquire(&root, "build").unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    /// A fresh directory under the system's temporary directory (lprag-core has no
    /// tempfile dependency).
    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lprag-core-dirs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
