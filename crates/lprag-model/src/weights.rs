//! burnpack weight files shared by the predictors and checkpoints: atomic writes, and
//! reads that fail with a typed error when the file does not fit the module.

use std::path::Path;

use burn::store::{BurnpackStore, ModuleSnapshot};
use lprag_core::{Error, Result};

/// The checksum file beside a weights file: `<path>.fnv1a64`, the FNV-1a 64 of the weights
/// file's bytes in hex.
fn checksum_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".fnv1a64");
    std::path::PathBuf::from(name)
}

/// Write `module`'s weights to `path` (burnpack) with a checksum file beside it, both
/// synced and renamed into place (a crash leaves the old pair or the new weights with a
/// checksum that says whether they are whole).
pub(crate) fn save_weights<M: ModuleSnapshot>(module: &M, path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut store = BurnpackStore::from_file(&tmp)
        .auto_extension(false)
        .overwrite(true);
    module
        .save_into(&mut store)
        .map_err(|e| Error::format(path, format!("{e:?}")))?;
    let bytes = std::fs::read(&tmp).map_err(|e| Error::io(&tmp, e))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(&tmp, e))?;
    let sum = checksum_path(path);
    let sum_tmp = sum.with_extension("tmp");
    std::fs::write(&sum_tmp, format!("{:016x}\n", lprag_graph::fnv1a64(&bytes)))
        .and_then(|_| std::fs::File::open(&sum_tmp)?.sync_all())
        .map_err(|e| Error::io(&sum_tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    std::fs::rename(&sum_tmp, &sum).map_err(|e| Error::io(&sum, e))
}

/// Refuse, before anything is allocated, a saved configuration that asks for more weights
/// than the weights file at `path` can hold: `min_params` (a lower bound computed from the
/// configuration) at two bytes each, the least any float format stores. An edited
/// `hidden` (say 8 → 50,000) would otherwise allocate gigabytes before the weights fail to
/// load.
pub(crate) fn check_capacity(path: &Path, min_params: u128) -> Result<()> {
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len() as u128;
    if min_params.saturating_mul(2) > len {
        return Err(Error::format(
            path,
            format!(
                "the saved configuration asks for at least {min_params} weights, more than \
                 this file of {len} bytes can hold (an edited or corrupt configuration)"
            ),
        ));
    }
    Ok(())
}

/// Check `path` against its checksum file, when there is one (weights saved before
/// checksums existed have none and load unchecked).
fn verify_checksum(path: &Path, bytes: &[u8]) -> Result<()> {
    let sum = checksum_path(path);
    let Ok(text) = std::fs::read_to_string(&sum) else {
        return Ok(());
    };
    let expected = u64::from_str_radix(text.trim(), 16)
        .map_err(|e| Error::format(&sum, format!("not a checksum: {e}")))?;
    let actual = lprag_graph::fnv1a64(bytes);
    if actual != expected {
        return Err(Error::format(
            path,
            format!(
                "checksum mismatch (file {actual:016x}, {} says {expected:016x}): the weights \
                 are corrupt or were replaced",
                sum.display()
            ),
        ));
    }
    Ok(())
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
    // Read whole, checked, and loaded from memory: burnpack's file store reads each
    // tensor's data from the path when the parameter is first used, which would fail (or
    // read another file) once a later save has replaced or removed this one — a training
    // that resumed from a checkpoint set removes that set at its next epoch.
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    verify_checksum(path, &bytes)?;
    let mut store = BurnpackStore::from_bytes(Some(burn::tensor::Bytes::from_bytes_vec(bytes)));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds the built-in burn predictors' restorers check weights files against
    /// ([`check_capacity`]) are true lower bounds, and tight ones (biases are the rest);
    /// numbers from a file never overflow them.
    #[test]
    fn min_parameters_bound_vgae_peg_and_seal_from_below() {
        use crate::{Peg, PegConfig, Seal, SealConfig, Vgae, VgaeConfig};
        use burn::module::Module as _;
        let device = Device::default();
        let small_peg = PegConfig {
            hidden: 8,
            edge_hidden: 8,
            ..PegConfig::default()
        };
        let deep_peg = PegConfig {
            layers: 3,
            ..PegConfig::default()
        };
        let small_seal = SealConfig {
            hidden: 8,
            ..SealConfig::default()
        };
        let cases: Vec<(String, u128, usize)> = [(16, 8), (384, 32)]
            .into_iter()
            .flat_map(|(d, h)| {
                let vgae = VgaeConfig { hidden: h };
                [
                    (
                        format!("{vgae:?}/{d}"),
                        vgae.min_parameters(d),
                        Vgae::new(d, &vgae, &device).num_params(),
                    ),
                    (
                        format!("{small_peg:?}/{d}"),
                        small_peg.min_parameters(d),
                        Peg::new(d, &small_peg, &device).num_params(),
                    ),
                    (
                        format!("{deep_peg:?}/{d}"),
                        deep_peg.min_parameters(d),
                        Peg::new(d, &deep_peg, &device).num_params(),
                    ),
                    (
                        format!("{small_seal:?}/{d}"),
                        small_seal.min_parameters(d),
                        Seal::new(d, &small_seal, &device).num_params(),
                    ),
                ]
            })
            .collect();
        for (what, bound, actual) in cases {
            let actual = actual as u128;
            assert!(bound <= actual, "{what}: {bound} > {actual}");
            assert!(bound * 10 >= actual * 7, "{what}: {bound} << {actual}");
        }
        let m = usize::MAX;
        assert!(VgaeConfig { hidden: m }.min_parameters(m) > 1 << 100);
        let peg = PegConfig {
            layers: m,
            hidden: m,
            edge_hidden: m,
            ..PegConfig::default()
        };
        assert!(peg.min_parameters(m) > 1 << 100);
        let seal = SealConfig {
            layers: m,
            hidden: m,
            max_label: m,
            ..SealConfig::default()
        };
        assert!(seal.min_parameters(m) > 1 << 100);
    }
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;

    #[test]
    fn a_flipped_byte_in_the_weights_is_a_format_error() {
        let device = Device::flex();
        // Drawn under the generator's lock, so no seeded test's draws are disturbed.
        let _draws = crate::seeding::seed_generator(&device, 1);
        let model: Linear = LinearConfig::new(8, 4).init(&device);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.bpk");
        save_weights(&model, &path).unwrap();
        let mut fresh: Linear = LinearConfig::new(8, 4).init(&device);
        load_weights(&mut fresh, &path).unwrap();

        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let err = load_weights(&mut fresh, &path).unwrap_err();
        assert!(matches!(err, Error::Format { .. }), "{err}");
        assert!(err.to_string().contains("checksum mismatch"), "{err}");

        // Weights saved before checksums existed (no checksum file) still load.
        bytes[last] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        std::fs::remove_file(checksum_path(&path)).unwrap();
        load_weights(&mut fresh, &path).unwrap();
    }
}
