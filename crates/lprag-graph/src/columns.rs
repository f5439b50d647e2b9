//! Exact nearest rows by cosine, read column by column: [`ColumnIndex`].
//!
//! The rows are stored unit-normalised, quantised to 16 bits and transposed in blocks of
//! [`BLOCK`] rows, so a query reads only the columns where it is non-zero (a hashing
//! encoder's query touches about 5 % of them) at half the bytes of an `f32` row scan, on
//! every core. Quantised scores are within a proven bound `ε` of the exact ones, so every
//! row whose quantised score is within `2ε` of the `m`-th best is scored again exactly
//! the way [`crate::nearest_by_cosine_where`] scores it: the answer is that function's,
//! to the bit, ties included. [`ColumnIndex::build_in_file`] writes the columns to a file
//! and memory-maps them instead of holding them on the heap; [`ColumnIndex::save_file`]
//! and [`ColumnIndex::open_file`] keep them beside a saved index, checksummed and bound
//! to the rows they were made from.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::kernels::{best_first, nearest_by_cosine_where};
use crate::persist::{temp_beside, Fnv1a};
use crate::GraphError;
use lprag_core::{dot, Embeddings};

/// Rows per block: a block's scores (16 KiB) stay in the L1 cache while its columns stream.
pub const BLOCK: usize = 4096;

/// Rows per transposition tile while building (64 rows of 1,024 floats stay in L2).
const TILE: usize = 64;

/// Quantisation scale: a unit-norm coordinate `x` is stored as `round(x · SCALE)`.
const SCALE: f32 = 32767.0;

/// The first bytes of a columns file ([`ColumnIndex::build_in_file`],
/// [`ColumnIndex::save_file`]).
const FILE_MAGIC: &[u8; 8] = b"LPRGCOL2";

/// Bytes before a columns file's first value: the magic, then rows, width, block length,
/// the FNV-1a 64 checksum of the values' bytes and the caller's binding (`source`) as
/// little-endian `u64`s, padded.
const FILE_HEADER: usize = 64;

/// Where the checksum lies in a columns file's header.
const CHECKSUM_AT: usize = 32;

/// An exact cosine search over the first `n` rows of an [`Embeddings`] matrix that reads
/// the matrix column-wise (see the module docs). Memory: `2 · n · dim` bytes, half the rows'.
///
/// ```
/// use lprag_core::Embeddings;
/// use lprag_graph::{inverse_norms, nearest_by_cosine, ColumnIndex};
///
/// let rows = Embeddings::from_rows(3, &[
///     vec![1.0, 0.0, 0.0], vec![0.0, 2.0, 0.0], vec![1.0, 1.0, 0.0], vec![0.0, 0.0, 5.0],
/// ])?;
/// let inv = inverse_norms(&rows, rows.rows());
/// let index = ColumnIndex::build(&rows, &inv)?;
/// let query = [0.9, 0.0, 0.1];
/// assert_eq!(
///     index.nearest_where(&rows, &inv, &query, 2, &|_| true),
///     nearest_by_cosine(&rows, &inv, &query, 2),
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ColumnIndex {
    n: usize,
    dim: usize,
    /// Block `b` holds rows `b·BLOCK ..` column-major: `blocks[(b·dim + d)·BLOCK + j]` is
    /// coordinate `d` of row `b·BLOCK + j` (zero past the last row).
    blocks: Columns,
}

/// Where the quantised columns are: on the heap, or in a memory-mapped file.
#[derive(Debug, Clone)]
enum Columns {
    Heap(Vec<i16>),
    /// `len` values from byte `start` of the map (checked aligned and in bounds).
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl Columns {
    fn as_slice(&self) -> &[i16] {
        match self {
            Columns::Heap(v) => v,
            // Checked in `ColumnIndex::build_in_file`: in bounds and aligned.
            Columns::Mapped { map, start, len } => {
                bytemuck::cast_slice(&map[*start..*start + *len * 2])
            }
        }
    }
}

impl ColumnIndex {
    /// Index the first `inv_norms.len()` rows of `rows` (`inv_norms` from
    /// [`crate::inverse_norms`]; a zero row scores 0, as in the row scan).
    ///
    /// # Errors
    /// [`GraphError::InvalidArgument`] when `inv_norms` is longer than `rows`;
    /// [`GraphError::NonFinite`] for a row with a NaN or infinite value.
    pub fn build(rows: &Embeddings, inv_norms: &[f32]) -> Result<Self, GraphError> {
        let (n, dim) = check_rows(rows, inv_norms)?;
        let nblocks = n.div_ceil(BLOCK);
        let mut blocks = vec![0i16; nblocks * dim * BLOCK];
        fill_blocks(rows, inv_norms, 0, &mut blocks);
        Ok(Self {
            n,
            dim,
            blocks: Columns::Heap(blocks),
        })
    }

    /// [`ColumnIndex::build`] with the columns written to the file `path` (a few blocks
    /// at a time: at most 32 MiB on the heap for 1,024-wide rows on two cores) and
    /// memory-mapped from it: the same answers, read through the page cache. `path` is
    /// written to a temporary file beside it and renamed over it; a mapping of an earlier
    /// file there stays intact. The file must not be changed in place while the index
    /// lives. On a big-endian machine the columns are kept on the heap and no file is
    /// written.
    ///
    /// # Errors
    /// As [`ColumnIndex::build`]; [`GraphError::Io`] when the file cannot be written or
    /// mapped (its temporary file is removed).
    pub fn build_in_file(
        rows: &Embeddings,
        inv_norms: &[f32],
        path: impl AsRef<Path>,
    ) -> Result<Self, GraphError> {
        let path = path.as_ref();
        let (n, dim) = check_rows(rows, inv_norms)?;
        if cfg!(target_endian = "big") {
            return Self::build(rows, inv_norms);
        }
        write_file(path, (n, dim), 0, &mut |first, count, buf| {
            buf.resize(count * dim * BLOCK, 0i16);
            fill_blocks(rows, inv_norms, first, buf);
        })?;
        let file = fs::File::open(path).map_err(|e| GraphError::io(path, e))?;
        Self::mapped(path, &file, n, dim)
    }

    /// Write these columns to the file `path` (a temporary file beside it, synced, then
    /// renamed over it), with the FNV-1a 64 checksum of the values and `source`, a number
    /// the caller binds them to (a saved index passes its graph file's checksum) for
    /// [`ColumnIndex::open_file`] to compare. The values are copied a few blocks at a
    /// time, from the heap or the map.
    ///
    /// # Errors
    /// [`GraphError::Io`] when the file cannot be written (its temporary file is removed);
    /// [`GraphError::InvalidArgument`] on a big-endian machine, where no file is written.
    pub fn save_file(&self, path: impl AsRef<Path>, source: u64) -> Result<(), GraphError> {
        if cfg!(target_endian = "big") {
            return Err(GraphError::arg(
                "ColumnIndex::save_file",
                "columns files are little-endian; not written on this machine",
            ));
        }
        let all = self.blocks.as_slice();
        let per_block = self.dim * BLOCK;
        write_file(
            path.as_ref(),
            (self.n, self.dim),
            source,
            &mut |first, count, buf| {
                let start = first * per_block;
                buf.extend_from_slice(&all[start..start + count * per_block]);
            },
        )
    }

    /// The columns [`ColumnIndex::save_file`] wrote to `path` for `rows` rows of width
    /// `dim` bound to `source`, their checksum verified: memory-mapped with `map` (the
    /// file is read once through the checksum without counting against this process's
    /// memory, then mapped; it must not be changed in place while the index lives), else
    /// read to the heap. The rows to search must be the ones the file was made from: the
    /// binding is the caller's check of that.
    ///
    /// # Errors
    /// [`GraphError::Io`] when the file cannot be read; [`GraphError::Format`] for a file
    /// that is not a columns file, holds another number of rows, width or block length,
    /// is bound to another `source`, or is truncated; [`GraphError::ChecksumMismatch`]
    /// when its values do not hash to its checksum.
    pub fn open_file(
        path: impl AsRef<Path>,
        rows: usize,
        dim: usize,
        source: u64,
        map: bool,
    ) -> Result<Self, GraphError> {
        let path = path.as_ref();
        // Big-endian machines read the values to the heap instead of mapping them.
        let map = map && cfg!(target_endian = "little");
        let io = |e| GraphError::io(path, e);
        let bad = |m: String| GraphError::format(path, m);
        let mut file = fs::File::open(path).map_err(io)?;
        let mut head = [0u8; FILE_HEADER];
        file.read_exact(&mut head).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => bad("the file ends inside its header".into()),
            _ => io(e),
        })?;
        if &head[..8] != FILE_MAGIC {
            return Err(bad("not an lprag columns file (bad magic)".into()));
        }
        let field = |i: usize| {
            let at = 8 + 8 * i;
            u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"))
        };
        let found = (field(0), field(1), field(2));
        let want = (rows as u64, dim as u64, BLOCK as u64);
        if found != want {
            return Err(bad(format!(
                "the columns are of {} rows of width {} in blocks of {}; expected {} of {} in \
                 blocks of {}",
                found.0, found.1, found.2, want.0, want.1, want.2
            )));
        }
        if field(4) != source {
            return Err(bad(format!(
                "the columns were made from other rows (bound to {:#018x}, expected {source:#018x})",
                field(4)
            )));
        }
        let len = rows.div_ceil(BLOCK) * dim * BLOCK;
        let total = file.metadata().map_err(io)?.len();
        if total != (FILE_HEADER + len * 2) as u64 {
            return Err(bad(format!(
                "the file is {total} bytes; {len} values need {} (truncated?)",
                FILE_HEADER + len * 2
            )));
        }
        let expected = field(3);
        let mut hash = Fnv1a::new();
        let mut heap = if map { Vec::new() } else { vec![0i16; len] };
        if map {
            let mut r = std::io::BufReader::with_capacity(1 << 20, &mut file);
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let k = r.read(&mut buf).map_err(io)?;
                if k == 0 {
                    break;
                }
                hash.update(&buf[..k]);
            }
        } else {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut heap);
            for piece in bytes.chunks_mut(1 << 20) {
                file.read_exact(piece).map_err(io)?;
                hash.update(piece);
            }
            if cfg!(target_endian = "big") {
                heap.iter_mut().for_each(|v| *v = i16::from_le(*v));
            }
        }
        let actual = hash.finish();
        if actual != expected {
            return Err(GraphError::ChecksumMismatch {
                path: path.to_path_buf(),
                expected,
                actual,
            });
        }
        if map {
            return Self::mapped(path, &file, rows, dim);
        }
        Ok(Self {
            n: rows,
            dim,
            blocks: Columns::Heap(heap),
        })
    }

    /// `file` (the columns file at `path`, of `n` rows of width `dim`) memory-mapped, its
    /// values checked in bounds and aligned.
    fn mapped(path: &Path, file: &fs::File, n: usize, dim: usize) -> Result<Self, GraphError> {
        // SAFETY: the file was written and renamed into place by lprag (`write_file`) and
        // is mapped read-only; lprag never writes it in place (a later build or save
        // renames a new one over it, which leaves this mapping intact), and the
        // documentation tells callers not to either. A mapping of a file changed by
        // another process regardless reads the new bytes (or faults, when truncated);
        // nothing relies on them beyond their type (any `i16` is a valid column value).
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| GraphError::io(path, e))?;
        let len = n.div_ceil(BLOCK) * dim * BLOCK;
        let in_bounds = map
            .get(FILE_HEADER..FILE_HEADER + len * 2)
            .is_some_and(|b| bytemuck::try_cast_slice::<u8, i16>(b).is_ok());
        if !in_bounds {
            return Err(GraphError::format(
                path,
                format!("the columns file is not {len} values long"),
            ));
        }
        let blocks = Columns::Mapped {
            map: Arc::new(map),
            start: FILE_HEADER,
            len,
        };
        Ok(Self { n, dim, blocks })
    }

    /// Whether the columns are read from a memory-mapped file
    /// ([`ColumnIndex::build_in_file`]) rather than held on the heap.
    pub fn is_mapped(&self) -> bool {
        matches!(self.blocks, Columns::Mapped { .. })
    }

    /// Rows indexed.
    pub fn rows(&self) -> usize {
        self.n
    }

    /// Width of the indexed rows.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bytes of the quantised columns (on the heap, or mapped: see
    /// [`ColumnIndex::is_mapped`]).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(self.blocks.as_slice())
    }

    /// The `m` rows `keep` admits that are most cosine-similar to `query`, best first, as
    /// `(row, cosine × ‖query‖)`: exactly [`crate::nearest_by_cosine_where`]`(rows,
    /// inv_norms, query, m, keep)`, which it falls back to for a query of the wrong width
    /// or with a non-finite value. `rows` and `inv_norms` must be the ones the index was
    /// built from.
    pub fn nearest_where(
        &self,
        rows: &Embeddings,
        inv_norms: &[f32],
        query: &[f32],
        m: usize,
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        let n = self.n.min(inv_norms.len()).min(rows.rows());
        if query.len() != self.dim
            || n != self.n
            || self.dim == 0
            || query.iter().any(|v| !v.is_finite())
        {
            return nearest_by_cosine_where(rows, inv_norms, query, m, keep);
        }
        if m == 0 || n == 0 {
            return Vec::new();
        }
        // The query's non-zero coordinates, pre-divided by the quantisation scale.
        let sparse: Vec<(usize, f32)> = query
            .iter()
            .enumerate()
            .filter(|&(_, &q)| q != 0.0)
            .map(|(d, &q)| (d, q / SCALE))
            .collect();
        let l1: f32 = query.iter().map(|q| q.abs()).sum();
        let l2 = dot(query, query).sqrt();
        // |quantised score − row-scan score| ≤ eps: rounding to 1/SCALE steps moves a score
        // by at most ‖q‖₁ / (2·SCALE); both sums round in f32, each within
        // (terms + 2)·2⁻²⁴·‖q‖₂ of the real value for unit rows (counted at 2⁻²³ here).
        let terms = (sparse.len() + self.dim + 4) as f32;
        let eps = 1.01 * (l1 * (0.5 / SCALE) + terms * f32::EPSILON * l2) + f32::MIN_POSITIVE;

        let approx = self.quantised_scores(n, &sparse, keep);
        let threshold = rescore_threshold(&approx, m, eps);
        let scored: Vec<(u32, f32)> = approx
            .par_iter()
            .enumerate()
            .filter(|&(_, &a)| a > f32::NEG_INFINITY && a >= threshold)
            .map(|(i, _)| (i as u32, dot(rows.row(i), query) * inv_norms[i]))
            .collect();
        best_first(scored, m)
    }

    /// Every row's quantised score against the query's non-zero coordinates `sparse`
    /// (pre-divided by the scale); `-∞` for the rows past `n` and those `keep` rejects.
    fn quantised_scores(
        &self,
        n: usize,
        sparse: &[(usize, f32)],
        keep: &(dyn Fn(usize) -> bool + Sync),
    ) -> Vec<f32> {
        let blocks = self.blocks.as_slice();
        let mut approx = vec![0f32; blocks.len() / self.dim];
        let accumulate = accumulator();
        approx
            .par_chunks_mut(BLOCK)
            .zip(blocks.par_chunks(self.dim * BLOCK))
            .enumerate()
            .for_each(|(b, (acc, block))| {
                accumulate(acc, block, sparse);
                let lo = b * BLOCK;
                for (j, a) in acc.iter_mut().enumerate() {
                    if lo + j >= n || !keep(lo + j) {
                        *a = f32::NEG_INFINITY;
                    }
                }
            });
        approx
    }
}

/// The rows and width [`ColumnIndex::build`] indexes, checked: `inv_norms` no longer than
/// `rows`, every indexed row finite.
fn check_rows(rows: &Embeddings, inv_norms: &[f32]) -> Result<(usize, usize), GraphError> {
    let n = inv_norms.len();
    if n > rows.rows() {
        return Err(GraphError::arg(
            "inv_norms",
            format!("{n} norms for {} rows", rows.rows()),
        ));
    }
    if let Some(row) = (0..n).find(|&i| rows.row(i).iter().any(|v| !v.is_finite())) {
        return Err(GraphError::NonFinite {
            matrix: "chunk embeddings",
            row,
        });
    }
    Ok((n, rows.dim()))
}

/// Fill `out` (whole blocks, zeroed) with the quantised, transposed blocks from block
/// `first` on, one block per task.
fn fill_blocks(rows: &Embeddings, inv_norms: &[f32], first: usize, out: &mut [i16]) {
    let (n, dim) = (inv_norms.len(), rows.dim());
    if dim == 0 {
        return;
    }
    out.par_chunks_mut(dim * BLOCK)
        .enumerate()
        .for_each(|(k, block)| {
            let lo = (first + k) * BLOCK;
            let hi = (lo + BLOCK).min(n);
            for t in (lo..hi).step_by(TILE) {
                let te = (t + TILE).min(hi);
                for d in 0..dim {
                    let out = &mut block[d * BLOCK + (t - lo)..d * BLOCK + (te - lo)];
                    for (o, i) in out.iter_mut().zip(t..te) {
                        *o = quantise(rows.row(i)[d] * inv_norms[i]);
                    }
                }
            }
        });
}

/// Write a columns file of `n` rows of width `dim` bound to `source` at `path`: to a
/// temporary file beside it, `group` filling a buffer with the values of `count` blocks
/// from block `first` on (a few blocks at a time), the checksum written into the header
/// at the end, synced, then renamed over `path`. The temporary file is removed on failure
/// (little-endian machines only: the values are written as they lie).
fn write_file(
    path: &Path,
    (n, dim): (usize, usize),
    source: u64,
    group: &mut dyn FnMut(usize, usize, &mut Vec<i16>),
) -> Result<(), GraphError> {
    let (dir, tmp) = temp_beside(path)?;
    let written = write_values(&tmp, (n, dim), source, group).and_then(|()| {
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        GraphError::io(path, e)
    })
}

/// [`write_file`]'s writing of the temporary file `tmp`.
fn write_values(
    tmp: &Path,
    (n, dim): (usize, usize),
    source: u64,
    group: &mut dyn FnMut(usize, usize, &mut Vec<i16>),
) -> std::io::Result<()> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut head = [0u8; FILE_HEADER];
    head[..8].copy_from_slice(FILE_MAGIC);
    for (i, v) in [n as u64, dim as u64, BLOCK as u64, 0, source]
        .into_iter()
        .enumerate()
    {
        head[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    out.write_all(&head)?;
    let nblocks = n.div_ceil(BLOCK);
    let per_group = (2 * rayon::current_num_threads()).max(1);
    let mut hash = Fnv1a::new();
    let mut buf = Vec::new();
    for first in (0..nblocks).step_by(per_group) {
        let count = per_group.min(nblocks - first);
        buf.clear();
        group(first, count, &mut buf);
        let bytes: &[u8] = bytemuck::cast_slice(&buf);
        hash.update(bytes);
        out.write_all(bytes)?;
    }
    let mut file = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    file.seek(SeekFrom::Start(CHECKSUM_AT as u64))?;
    file.write_all(&hash.finish().to_le_bytes())?;
    file.sync_all()
}

/// The quantised score from which rows are scored again exactly: the `m`-th best of
/// `approx` (each block's best `m`, then the best `m` of those) less `2·eps`, or `-∞` when
/// fewer than `m` rows are admitted.
fn rescore_threshold(approx: &[f32], m: usize, eps: f32) -> f32 {
    let best: Vec<f32> = approx
        .par_chunks(BLOCK)
        .flat_map_iter(|acc| top_values(acc, m))
        .collect();
    if best.len() >= m {
        top_values(&best, m)
            .last()
            .copied()
            .unwrap_or(f32::NEG_INFINITY)
            - 2.0 * eps
    } else {
        f32::NEG_INFINITY
    }
}

/// Adds `q · column` of each `(column, q)` of `sparse` to `acc` (one block's scores).
type Accumulate = fn(&mut [f32], &[i16], &[(usize, f32)]);

/// The widest accumulation this CPU runs. Every variant computes each score with the same
/// operations in the same order, so the scores do not depend on the CPU.
fn accumulator() -> Accumulate {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        return |acc, block, sparse| {
            // SAFETY: the CPU supports AVX2 (detected above); the function only reads and
            // writes through safe slices.
            unsafe { accumulate_avx2(acc, block, sparse) }
        };
    }
    accumulate
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn accumulate_avx2(acc: &mut [f32], block: &[i16], sparse: &[(usize, f32)]) {
    accumulate(acc, block, sparse)
}

/// Four columns per pass over `acc`: `acc[j] += ((q₀c₀ + q₁c₁) + q₂c₂) + q₃c₃`.
#[inline(always)]
fn accumulate(acc: &mut [f32], block: &[i16], sparse: &[(usize, f32)]) {
    let acc = &mut acc[..BLOCK];
    let col = |d: usize| &block[d * BLOCK..(d + 1) * BLOCK];
    let mut groups = sparse.chunks_exact(4);
    for g in &mut groups {
        let (c0, c1, c2, c3) = (col(g[0].0), col(g[1].0), col(g[2].0), col(g[3].0));
        let (q0, q1, q2, q3) = (g[0].1, g[1].1, g[2].1, g[3].1);
        for ((((a, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(c0).zip(c1).zip(c2).zip(c3) {
            *a += q0 * f32::from(x0) + q1 * f32::from(x1) + q2 * f32::from(x2) + q3 * f32::from(x3);
        }
    }
    for &(d, q) in groups.remainder() {
        for (a, &x) in acc.iter_mut().zip(col(d)) {
            *a += q * f32::from(x);
        }
    }
}

fn quantise(x: f32) -> i16 {
    (x.clamp(-1.0, 1.0) * SCALE).round() as i16
}

/// The (up to) `m` largest values of `values` above `-∞`, sorted descending.
fn top_values(values: &[f32], m: usize) -> Vec<f32> {
    let mut v: Vec<f32> = values
        .iter()
        .copied()
        .filter(|a| *a > f32::NEG_INFINITY)
        .collect();
    let desc = |a: &f32, b: &f32| b.total_cmp(a);
    if m < v.len() {
        v.select_nth_unstable_by(m - 1, desc);
        v.truncate(m);
    }
    v.sort_unstable_by(desc);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{inverse_norms, nearest_by_cosine_where};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Rows with few non-zero coordinates (like hashing features), some duplicated (exact
    /// ties), one zero row; queries sparse and dense.
    fn corpus(n: usize, dim: usize, seed: u64) -> (Embeddings, Vec<Vec<f32>>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut data = vec![0f32; n * dim];
        for i in 0..n {
            if i == 3 {
                continue;
            }
            if i % 97 == 5 {
                let (a, b) = data.split_at_mut(i * dim);
                b[..dim].copy_from_slice(&a[(i - 5) * dim..(i - 4) * dim]);
                continue;
            }
            for _ in 0..dim / 4 {
                data[i * dim + rng.random_range(0..dim)] += rng.random_range(-1.0..1.0f32);
            }
            // Unnormalised rows: the index normalises them.
            let s = rng.random_range(0.1..10.0f32);
            data[i * dim..(i + 1) * dim]
                .iter_mut()
                .for_each(|v| *v *= s);
        }
        let rows = Embeddings::new(dim, data).unwrap();
        let mut queries = Vec::new();
        for k in 0..12 {
            let mut q = vec![0f32; dim];
            let nz = if k % 3 == 0 { dim } else { 1 + k };
            for _ in 0..nz {
                q[rng.random_range(0..dim)] = rng.random_range(-2.0..2.0f32);
            }
            queries.push(q);
        }
        // A query equal to a row: many near-ties at the top.
        queries.push(rows.row(10).to_vec());
        (rows, queries)
    }

    #[test]
    fn equals_the_row_scan_to_the_bit() {
        // More than one block, the last one partial.
        let (rows, queries) = corpus(2 * BLOCK + 321, 48, 7);
        let inv = inverse_norms(&rows, rows.rows() - 5);
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        assert_eq!(index.rows(), rows.rows() - 5);
        assert_eq!(index.memory_bytes(), 3 * BLOCK * 48 * 2);
        let odd = |i: usize| i % 2 == 1;
        let few = |i: usize| i.is_multiple_of(1000);
        for q in &queries {
            for m in [1, 3, 20, 257] {
                let keeps: [&(dyn Fn(usize) -> bool + Sync); 3] = [&|_| true, &odd, &few];
                for keep in keeps {
                    let want = nearest_by_cosine_where(&rows, &inv, q, m, keep);
                    let got = index.nearest_where(&rows, &inv, q, m, keep);
                    assert_eq!(got, want, "m = {m}");
                }
            }
        }
        // Every row asked for, and none.
        let q = &queries[1];
        let all = index.nearest_where(&rows, &inv, q, usize::MAX, &|_| true);
        assert_eq!(all.len(), inv.len());
        assert_eq!(
            all,
            nearest_by_cosine_where(&rows, &inv, q, usize::MAX, &|_| true)
        );
        assert!(index.nearest_where(&rows, &inv, q, 0, &|_| true).is_empty());
    }

    #[test]
    fn columns_in_a_file_answer_as_on_the_heap() {
        // Several write groups of blocks, the last block partial.
        let groups = 2 * rayon::current_num_threads();
        let (rows, queries) = corpus(groups * BLOCK + BLOCK + 77, 8, 5);
        let inv = inverse_norms(&rows, rows.rows() - 2);
        let heap = ColumnIndex::build(&rows, &inv).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("columns.bin");
        let mapped = ColumnIndex::build_in_file(&rows, &inv, &path).unwrap();
        assert!(mapped.is_mapped() && !heap.is_mapped());
        assert_eq!(mapped.blocks.as_slice(), heap.blocks.as_slice());
        assert_eq!(mapped.memory_bytes(), heap.memory_bytes());
        let header = 64 + heap.memory_bytes() as u64;
        assert_eq!(std::fs::metadata(&path).unwrap().len(), header);
        // Built again over the same path: the first mapping still reads its own file.
        let inv2 = inverse_norms(&rows, 100);
        let again = ColumnIndex::build_in_file(&rows, &inv2, &path).unwrap();
        assert_eq!(again.rows(), 100);
        for q in &queries {
            let want = nearest_by_cosine_where(&rows, &inv, q, 10, &|_| true);
            assert_eq!(mapped.nearest_where(&rows, &inv, q, 10, &|_| true), want);
            assert_eq!(
                again.nearest_where(&rows, &inv2, q, 10, &|_| true),
                nearest_by_cosine_where(&rows, &inv2, q, 10, &|_| true)
            );
        }
        // Nothing but the file is left; a non-finite row is refused before writing.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let mut bad = rows.as_slice().to_vec();
        bad[8 * 7 + 1] = f32::NAN;
        let bad = Embeddings::new(8, bad).unwrap();
        let other = dir.path().join("other.bin");
        assert!(matches!(
            ColumnIndex::build_in_file(&bad, &inv, &other),
            Err(GraphError::NonFinite { row: 7, .. })
        ));
        assert!(!other.exists());
        // A directory that does not exist is an I/O error naming the path.
        let missing = dir.path().join("no").join("columns.bin");
        let err = ColumnIndex::build_in_file(&rows, &inv, &missing).unwrap_err();
        assert!(err.to_string().contains("columns.bin"), "{err}");
    }

    #[test]
    fn saved_columns_open_on_the_heap_or_mapped_and_refuse_what_does_not_match() {
        let (rows, queries) = corpus(2 * BLOCK + 5, 8, 9);
        let inv = inverse_norms(&rows, rows.rows());
        let heap = ColumnIndex::build(&rows, &inv).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("columns.bin");
        heap.save_file(&path, 42).unwrap();
        let (n, dim) = (rows.rows(), 8);
        for map in [false, true] {
            let read = ColumnIndex::open_file(&path, n, dim, 42, map).unwrap();
            assert_eq!(read.is_mapped(), map);
            assert_eq!(read.blocks.as_slice(), heap.blocks.as_slice());
            for q in &queries {
                assert_eq!(
                    read.nearest_where(&rows, &inv, q, 7, &|_| true),
                    heap.nearest_where(&rows, &inv, q, 7, &|_| true)
                );
            }
        }
        // A mapped index saves its file again (from the map), bound anew.
        let mapped = ColumnIndex::open_file(&path, n, dim, 42, true).unwrap();
        let copy = dir.path().join("copy.bin");
        mapped.save_file(&copy, 7).unwrap();
        let again = ColumnIndex::open_file(&copy, n, dim, 7, false).unwrap();
        assert_eq!(again.blocks.as_slice(), heap.blocks.as_slice());
        // What does not match is a typed error naming the file.
        let format = |r: Result<ColumnIndex, GraphError>, what: &str| match r {
            Err(GraphError::Format { path: p, message }) => {
                assert_eq!(p, path);
                assert!(message.contains(what), "{message}");
            }
            other => panic!("{other:?}"),
        };
        let shape = |rows: usize, width: usize| format!("expected {rows} of {width} in");
        format(
            ColumnIndex::open_file(&path, n - 1, dim, 42, true),
            &shape(n - 1, dim),
        );
        format(
            ColumnIndex::open_file(&path, n, dim + 1, 42, true),
            &shape(n, dim + 1),
        );
        format(
            ColumnIndex::open_file(&path, n, dim, 43, false),
            "other rows",
        );
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        bad[FILE_HEADER + 3] ^= 4;
        std::fs::write(&path, &bad).unwrap();
        for map in [false, true] {
            assert!(matches!(
                ColumnIndex::open_file(&path, n, dim, 42, map),
                Err(GraphError::ChecksumMismatch { .. })
            ));
        }
        std::fs::write(&path, &good[..good.len() - 2]).unwrap();
        format(ColumnIndex::open_file(&path, n, dim, 42, true), "truncated");
        std::fs::write(&path, &good[..10]).unwrap();
        format(ColumnIndex::open_file(&path, n, dim, 42, true), "header");
        let mut magic = good.clone();
        magic[0] = b'X';
        std::fs::write(&path, &magic).unwrap();
        format(ColumnIndex::open_file(&path, n, dim, 42, true), "magic");
        // The file a build maps is unbound (0) and checksummed too.
        let built = dir.path().join("built.bin");
        ColumnIndex::build_in_file(&rows, &inv, &built).unwrap();
        let read = ColumnIndex::open_file(&built, n, dim, 0, false).unwrap();
        assert_eq!(read.blocks.as_slice(), heap.blocks.as_slice());
        let missing = dir.path().join("missing.bin");
        assert!(matches!(
            ColumnIndex::open_file(&missing, n, dim, 0, true),
            Err(GraphError::Io { .. })
        ));
    }

    #[test]
    fn near_ties_closer_than_the_quantisation_step_keep_their_exact_order() {
        // Rows a hair apart (1e-4 of a unit vector, below the 1/32767 step): the quantised
        // scores alone would order them wrongly; the exact second pass must not.
        let (dim, n) = (32, BLOCK + 900);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let base: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0..1.0f32)).collect();
        let mut data = Vec::with_capacity(n * dim);
        for _ in 0..n {
            data.extend(base.iter().map(|b| b + rng.random_range(-1e-4..1e-4f32)));
        }
        let rows = Embeddings::new(dim, data).unwrap();
        let inv = inverse_norms(&rows, n);
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        for k in 0..5 {
            let q: Vec<f32> = base
                .iter()
                .map(|b| b + rng.random_range(-1e-3..1e-3f32) * k as f32)
                .collect();
            for m in [1, 10, 100] {
                assert_eq!(
                    index.nearest_where(&rows, &inv, &q, m, &|_| true),
                    nearest_by_cosine_where(&rows, &inv, &q, m, &|_| true),
                    "query {k}, m = {m}"
                );
            }
        }
    }

    #[test]
    fn a_query_it_cannot_read_goes_to_the_row_scan() {
        let (rows, queries) = corpus(300, 16, 3);
        let inv = inverse_norms(&rows, rows.rows());
        let index = ColumnIndex::build(&rows, &inv).unwrap();
        let mut bad = queries[0].clone();
        bad[2] = f32::NAN;
        let ids = |v: Vec<(u32, f32)>| v.into_iter().map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(
            ids(index.nearest_where(&rows, &inv, &bad, 5, &|_| true)),
            ids(nearest_by_cosine_where(&rows, &inv, &bad, 5, &|_| true))
        );
        let short = &queries[1][..15];
        assert_eq!(
            index.nearest_where(&rows, &inv, short, 5, &|_| true),
            nearest_by_cosine_where(&rows, &inv, short, 5, &|_| true)
        );
        // An all-zero query scores every row 0: the lowest indices win.
        let zero = vec![0f32; 16];
        let got = index.nearest_where(&rows, &inv, &zero, 4, &|_| true);
        assert_eq!(
            got.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn refuses_non_finite_rows_and_too_many_norms() {
        let mut rows = Embeddings::from_rows(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let inv = inverse_norms(&rows, 2);
        assert!(matches!(
            ColumnIndex::build(&rows, &[1.0, 1.0, 1.0]),
            Err(GraphError::InvalidArgument { .. })
        ));
        let mut data = rows.clone().into_vec();
        data[3] = f32::INFINITY;
        rows = Embeddings::new(2, data).unwrap();
        assert!(matches!(
            ColumnIndex::build(&rows, &inv),
            Err(GraphError::NonFinite { row: 1, .. })
        ));
    }
}
