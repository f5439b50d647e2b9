//! burnpack weight files shared by the predictors and checkpoints: atomic writes, and
//! reads that fail with a typed error when the file does not fit the module.

use std::path::Path;

use burn::store::{BurnpackStore, ModuleSnapshot};
use lprag_core::{Error, Result};

/// Write `module`'s weights to `path` (burnpack), atomically (temporary file, rename).
pub(crate) fn save_weights<M: ModuleSnapshot>(module: &M, path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut store = BurnpackStore::from_file(&tmp)
        .auto_extension(false)
        .overwrite(true);
    module
        .save_into(&mut store)
        .map_err(|e| Error::format(path, format!("{e:?}")))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// Read weights written by [`save_weights`] into `module` (same shape): a missing file
/// is [`Error::Io`], a file that does not fit the module [`Error::Format`].
pub(crate) fn load_weights<M: ModuleSnapshot>(module: &mut M, path: &Path) -> Result<()> {
    if !path.is_file() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "weights file is missing"),
        ));
    }
    let mut store = BurnpackStore::from_file(path).auto_extension(false);
    let applied = module
        .load_from(&mut store)
        .map_err(|e| Error::format(path, format!("{e:?}")))?;
    if !applied.errors.is_empty() || !applied.missing.is_empty() {
        return Err(Error::format(
            path,
            format!(
                "weights do not fit the model: missing {:?}, errors {:?}",
                applied.missing, applied.errors
            ),
        ));
    }
    Ok(())
}
