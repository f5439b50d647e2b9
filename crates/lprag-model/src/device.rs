//! [`ComputeDevice`]: where training and scoring run, named without burn types, so the
//! facade's API stays free of burn.

use burn::tensor::Device;
use lprag_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Where a link predictor trains and scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeDevice {
    /// The CPU (burn's flex backend, all cores through rayon). Always available.
    #[default]
    Cpu,
    /// The CUDA GPU with this index; needs the `cuda` cargo feature.
    Cuda(usize),
    /// The discrete GPU with this index through wgpu (Vulkan, Metal, DX12); needs the
    /// `wgpu` cargo feature.
    Wgpu(usize),
}

impl ComputeDevice {
    /// The burn device.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when this build lacks the cargo feature the device needs.
    pub fn to_burn(self) -> Result<Device> {
        match self {
            ComputeDevice::Cpu => Ok(Device::flex()),
            #[cfg(feature = "cuda")]
            ComputeDevice::Cuda(i) => Ok(Device::cuda(i)),
            #[cfg(feature = "wgpu")]
            ComputeDevice::Wgpu(i) => Ok(Device::wgpu(burn::tensor::DeviceKind::DiscreteGpu(i))),
            #[allow(unreachable_patterns)]
            other => Err(Error::invalid(
                "ComputeDevice",
                format!(
                    "{other:?} needs lprag built with the `{}` cargo feature",
                    match other {
                        ComputeDevice::Cuda(_) => "cuda",
                        _ => "wgpu",
                    }
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_always_there_and_a_missing_backend_is_a_typed_error() {
        assert!(ComputeDevice::Cpu.to_burn().is_ok());
        #[cfg(not(feature = "cuda"))]
        {
            let err = ComputeDevice::Cuda(0).to_burn().unwrap_err();
            assert!(err.to_string().contains("`cuda` cargo feature"), "{err}");
        }
        #[cfg(not(feature = "wgpu"))]
        {
            let err = ComputeDevice::Wgpu(0).to_burn().unwrap_err();
            assert!(err.to_string().contains("`wgpu` cargo feature"), "{err}");
        }
    }
}
