//! Durable, atomic saves: every index file and directory is written under a unique
//! temporary name beside its target, synced to disk (files, then their directories), and
//! only then put in place by one rename, so a crash or a concurrent save never leaves a
//! half-written index and a reader never finds none.
//!
//! A directory replaces an existing one by an atomic exchange (`renameat2` with
//! `RENAME_EXCHANGE` on Linux); where the platform or file system lacks it, by two renames
//! with a brief window in which the path does not exist.

use std::fs::File;
use std::path::{Path, PathBuf};

use lprag_core::dirs::{DirLock, DirSpec};
use lprag_core::{Error, Result};

/// Name prefix of the temporary files of atomic writes ([`lprag_core::dirs::TMP_PREFIX`]).
pub(crate) const TMP_PREFIX: &str = lprag_core::dirs::TMP_PREFIX;

/// The directory that holds `path` (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `fsync` a directory ([`lprag_core::dirs::sync_dir`]).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    lprag_core::dirs::sync_dir(dir)
}

/// `fsync` every file and directory under `root` (and `root` itself).
pub(crate) fn sync_tree(root: &Path) -> Result<()> {
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
            f.sync_all().map_err(|e| Error::io(&path, e))?;
        }
    }
    sync_dir(root)
}

/// A directory beside its target in which a replacement is built: `.NAME.tmp-XXXXXX`,
/// locked ([`DirLock`]) while its writer lives, and removed on drop unless it was put in
/// place. A writer killed mid-save leaves its staging directory unlocked, and the next save
/// beside the same target removes it (Unix only, where the lock exists).
pub(crate) struct Staging {
    path: PathBuf,
    _lock: DirLock,
    placed: bool,
}

impl Staging {
    /// The staging directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A fresh, uniquely named, locked directory beside `target` to build its replacement in
/// (see [`Staging`]); stale ones of killed writers beside it are removed first.
pub(crate) fn staging_dir(target: &Path) -> Result<Staging> {
    let parent = parent_of(target);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index".into());
    let prefix = format!(".{name}.tmp-");
    remove_stale_staging(&parent, &prefix);
    // Made under another name and locked before it takes the staging name, so that no
    // other save ever sees it unlocked while this writer lives.
    let fresh = tempfile::Builder::new()
        .prefix(&format!(".{name}.new-"))
        .tempdir_in(&parent)
        .map_err(|e| Error::io(&parent, e))?
        .keep();
    let lock = match DirLock::acquire(&fresh, "save") {
        Ok(l) => l,
        Err(e) => {
            let _ = std::fs::remove_dir(&fresh);
            return Err(e);
        }
    };
    let suffix = fresh
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .and_then(|n| n.rsplit('-').next().map(str::to_string))
        .unwrap_or_default();
    let path = parent.join(format!("{prefix}{suffix}"));
    if let Err(e) = std::fs::rename(&fresh, &path) {
        let _ = std::fs::remove_dir(&fresh);
        return Err(Error::io(&path, e));
    }
    Ok(Staging {
        path,
        _lock: lock,
        placed: false,
    })
}

/// Remove the staging directories beside a target (`prefix` = `.NAME.tmp-`) whose writers
/// are gone: those whose lock can be taken. A live writer holds its lock, so its directory
/// is left alone.
fn remove_stale_staging(parent: &Path, prefix: &str) {
    if !cfg!(unix) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(prefix) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Ok(_lock) = DirLock::acquire(&e.path(), "save") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Sync everything in `staged` and put it at `target` in one step, replacing what was
/// there; the old contents are removed afterwards. `target` is checked against `spec`
/// again right before the exchange (the staged write may have taken minutes), so only a
/// directory of that kind is ever replaced.
pub(crate) fn replace_dir(mut staged: Staging, target: &Path, spec: &DirSpec) -> Result<()> {
    sync_tree(staged.path())?;
    spec.check(target)?;
    let parent = parent_of(target);
    if target.exists() {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{renameat_with, RenameFlags, CWD};
            match renameat_with(CWD, staged.path(), CWD, target, RenameFlags::EXCHANGE) {
                Ok(()) => {
                    sync_dir(&parent)?;
                    // `staged` now holds the old index: dropping it removes it.
                    drop(staged);
                    return Ok(());
                }
                Err(e)
                    if e == rustix::io::Errno::INVAL
                        || e == rustix::io::Errno::NOSYS
                        || e == rustix::io::Errno::OPNOTSUPP => {}
                Err(e) => return Err(Error::io(target, std::io::Error::from(e))),
            }
        }
        // No atomic exchange here: move the old one aside, then the new one in.
        let old = staging_dir(target)?;
        let old_path = old.path().to_path_buf();
        std::fs::remove_dir(&old_path).map_err(|e| Error::io(&old_path, e))?;
        std::fs::rename(target, &old_path).map_err(|e| Error::io(target, e))?;
        std::fs::rename(staged.path(), target).map_err(|e| Error::io(target, e))?;
        staged.placed = true;
        sync_dir(&parent)?;
        drop(old);
        return Ok(());
    }
    std::fs::rename(staged.path(), target).map_err(|e| Error::io(target, e))?;
    staged.placed = true;
    sync_dir(&parent)
}

/// Make `dir` ready for a save of `spec`'s kind that writes single files into it: checked
/// ([`DirSpec::check`]), created, and locked until the returned guard is dropped, so two
/// saves into one directory run one after the other. Checked again under the lock.
pub(crate) fn open_for_save(spec: &DirSpec, dir: &Path) -> Result<DirLock> {
    spec.prepare(dir)?;
    let lock = DirLock::wait(dir, "save")?;
    spec.check(dir)?;
    Ok(lock)
}

/// The [`DirSpec`] of a peer index saved as the one JSON file `file` (with a `version`
/// field) in a directory the peer otherwise leaves alone.
pub(crate) const fn peer_index(kind: &'static str, file: &'static str) -> DirSpec {
    DirSpec {
        kind,
        marker: file,
        marker_key: Some("version"),
        owns: None,
    }
}

/// Write `bytes` to `path` atomically and durably ([`lprag_core::dirs::write_atomic`]).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    lprag_core::dirs::write_atomic(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_DIR: DirSpec = DirSpec {
        kind: "a test index",
        marker: "a",
        marker_key: None,
        owns: Some(|n| n == "a" || n == "sub"),
    };

    #[test]
    fn a_directory_of_another_kind_is_never_replaced() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        std::fs::create_dir_all(target.join("sub")).unwrap();
        std::fs::write(target.join("my-notes.txt"), "mine").unwrap();
        std::fs::write(target.join("sub/keep.txt"), "mine too").unwrap();
        let staged = staging_dir(&target).unwrap();
        std::fs::write(staged.path().join("a"), "new").unwrap();
        let e = replace_dir(staged, &target, &TEST_DIR).unwrap_err();
        assert!(matches!(e, Error::ForeignDirectory { .. }), "{e:?}");
        assert_eq!(
            std::fs::read_to_string(target.join("my-notes.txt")).unwrap(),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("sub/keep.txt")).unwrap(),
            "mine too"
        );
        // Only the user's directory is left: the staging area went with the error.
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_directory_is_replaced_whole_and_the_staging_areas_are_gone() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        for round in 0..3 {
            let staged = staging_dir(&target).unwrap();
            std::fs::write(staged.path().join("a"), format!("{round}")).unwrap();
            std::fs::create_dir(staged.path().join("sub")).unwrap();
            std::fs::write(staged.path().join("sub/b"), "x").unwrap();
            replace_dir(staged, &target, &TEST_DIR).unwrap();
            assert_eq!(
                std::fs::read_to_string(target.join("a")).unwrap(),
                format!("{round}")
            );
        }
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("index")], "{left:?}");
    }

    #[test]
    fn a_killed_writers_staging_is_removed_by_the_next_save_a_live_ones_is_not() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        // A killed writer's: unlocked, with a half-written file.
        let stale = root.path().join(".index.tmp-dead01");
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("a"), "half").unwrap();
        // A live writer's: locked.
        let live = staging_dir(&target).unwrap();
        let staged = staging_dir(&target).unwrap();
        assert!(!stale.exists(), "the stale staging directory is gone");
        assert!(live.path().exists(), "a live writer's is kept");
        std::fs::write(staged.path().join("a"), "new").unwrap();
        replace_dir(staged, &target, &TEST_DIR).unwrap();
        drop(live);
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("index")], "{left:?}");
    }

    #[test]
    fn a_failed_save_leaves_the_old_directory_and_no_staging() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        let staged = staging_dir(&target).unwrap();
        std::fs::write(staged.path().join("a"), "old").unwrap();
        replace_dir(staged, &target, &TEST_DIR).unwrap();
        {
            let staged = staging_dir(&target).unwrap();
            std::fs::write(staged.path().join("a"), "half").unwrap();
            // The save fails here: `staged` is dropped without `replace_dir`.
        }
        assert_eq!(std::fs::read_to_string(target.join("a")).unwrap(), "old");
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn files_are_replaced_atomically() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("deep/x.json");
        write_file(&path, b"1").unwrap();
        write_file(&path, b"22").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"22");
        assert_eq!(
            std::fs::read_dir(root.path().join("deep")).unwrap().count(),
            1
        );
    }
}
