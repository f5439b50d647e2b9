//! Seeded weights and noise that stay reproducible when several trainings share a process.
//!
//! burn keeps one random generator per process and creates parameters lazily, at their
//! first use. A module built right after `device.seed(s)` therefore draws its weights
//! whenever its first forward pass runs, from whatever state another training left the
//! generator in. [`seeded`] builds a module and materialises every parameter while holding
//! one process-wide lock, right after seeding; a trainer holds the lock ([`seed_generator`])
//! through its first step instead; [`standard_normal`] draws training noise from a
//! generator of its own instead of burn's.

use std::sync::{Mutex, MutexGuard, PoisonError};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Bool, Device, Int, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Held from seeding burn's generator until the module built from it has drawn every
/// parameter.
static GENERATOR: Mutex<()> = Mutex::new(());

/// Touches every parameter, so that a lazily created one draws its values now.
struct Materialise;

impl ModuleVisitor for Materialise {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let _ = param.val();
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        let _ = param.val();
    }

    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<D, Bool>>) {
        let _ = param.val();
    }
}

/// `init()` with burn's generator seeded with `seed` on `device`, every parameter drawn
/// before another thread may seed or draw: the weights depend on `seed` alone, whatever
/// else runs in the process.
pub(crate) fn seeded<M: Module>(device: &Device, seed: u64, init: impl FnOnce() -> M) -> M {
    let draws = seed_generator(device, seed);
    let module = init();
    draws.finish(&module);
    module
}

/// burn's generator, seeded and held by one training until its model has drawn every
/// parameter (see [`seed_generator`]).
#[must_use = "the generator stays held until `finish`, or until this is dropped"]
pub(crate) struct Draws {
    _held: MutexGuard<'static, ()>,
}

/// Seed burn's generator with `seed` on `device` and hold it: no other training seeds or
/// draws until [`Draws::finish`]. A trainer keeps it through its first step, so that the
/// parameters are drawn lazily in the order of the first forward pass, as they were before
/// this lock existed: every seeded model, and every figure measured with one, stays as it
/// was.
pub(crate) fn seed_generator(device: &Device, seed: u64) -> Draws {
    let held = GENERATOR.lock().unwrap_or_else(PoisonError::into_inner);
    device.seed(seed);
    Draws { _held: held }
}

impl Draws {
    /// Draw every parameter of `module` not drawn yet, then release the generator.
    pub(crate) fn finish<M: Module>(self, module: &M) {
        module.visit(&mut Materialise);
    }
}

/// `len` draws from the standard normal distribution (Box–Muller over a generator seeded
/// with `seed`): the same values for the same seed on every run and platform.
pub(crate) fn standard_normal(seed: u64, len: usize) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(len + 1);
    while out.len() < len {
        // u1 in (0, 1], so that its logarithm is finite.
        let u1 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        out.push((r * t.cos()) as f32);
        out.push((r * t.sin()) as f32);
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};

    fn weights(l: &Linear) -> Vec<f32> {
        l.weight.val().into_data().try_into_vec::<f32>().unwrap()
    }

    #[test]
    fn seeded_modules_have_drawn_their_weights_and_repeat_them() {
        let device = Device::default();
        let a: Linear = seeded(&device, 5, || LinearConfig::new(4, 3).init(&device));
        assert!(a.weight.is_initialized());
        // Draws made after the seeded section do not reach the module's weights.
        let _noise = Tensor::<2>::random(
            [8, 8],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let b: Linear = seeded(&device, 5, || LinearConfig::new(4, 3).init(&device));
        let c: Linear = seeded(&device, 6, || LinearConfig::new(4, 3).init(&device));
        assert_eq!(weights(&a), weights(&b));
        assert_ne!(weights(&a), weights(&c));
    }

    #[test]
    fn standard_normal_is_seeded_and_roughly_standard() {
        let a = standard_normal(9, 20_001);
        assert_eq!(a.len(), 20_001);
        assert_eq!(a, standard_normal(9, 20_001));
        assert_ne!(a[..10], standard_normal(10, 10)[..]);
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
        let var = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / a.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
        assert!(a.iter().all(|v| v.is_finite()));
    }
}
