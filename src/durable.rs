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

use lprag_core::{Error, Result};
use tempfile::TempDir;

/// The directory that holds `path` (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `fsync` a directory, so that the renames and creations in it are durable (a no-op
/// where directories cannot be opened for syncing).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let d = File::open(dir).map_err(|e| Error::io(dir, e))?;
        d.sync_all().map_err(|e| Error::io(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
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

/// A fresh, uniquely named directory beside `target` to build its replacement in; it is
/// removed if the save fails before [`replace_dir`].
pub(crate) fn staging_dir(target: &Path) -> Result<TempDir> {
    let parent = parent_of(target);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index".into());
    tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempdir_in(&parent)
        .map_err(|e| Error::io(&parent, e))
}

/// Sync everything in `staged` and put it at `target` in one step, replacing what was
/// there; the old contents are removed afterwards.
pub(crate) fn replace_dir(staged: TempDir, target: &Path) -> Result<()> {
    sync_tree(staged.path())?;
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
        let staged_path = staged.keep();
        std::fs::rename(&staged_path, target).map_err(|e| Error::io(target, e))?;
        sync_dir(&parent)?;
        drop(old);
        return Ok(());
    }
    let staged_path = staged.keep();
    std::fs::rename(&staged_path, target).map_err(|e| Error::io(target, e))?;
    sync_dir(&parent)
}

/// Write `bytes` to `path` atomically and durably: a unique temporary file beside it,
/// synced, renamed over `path`, and the directory synced.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let parent = parent_of(path);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&parent).map_err(|e| Error::io(&parent, e))?;
    tmp.write_all(bytes).map_err(|e| Error::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    sync_dir(&parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_replaced_whole_and_the_staging_areas_are_gone() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        for round in 0..3 {
            let staged = staging_dir(&target).unwrap();
            std::fs::write(staged.path().join("a"), format!("{round}")).unwrap();
            std::fs::create_dir(staged.path().join("sub")).unwrap();
            std::fs::write(staged.path().join("sub/b"), "x").unwrap();
            replace_dir(staged, &target).unwrap();
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
    fn a_failed_save_leaves_the_old_directory_and_no_staging() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("index");
        let staged = staging_dir(&target).unwrap();
        std::fs::write(staged.path().join("a"), "old").unwrap();
        replace_dir(staged, &target).unwrap();
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
