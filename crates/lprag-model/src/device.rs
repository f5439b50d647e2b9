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
                    "`{other}` needs lprag built with the `{}` cargo feature",
                    match other {
                        ComputeDevice::Cuda(_) => "cuda",
                        _ => "wgpu",
                    }
                ),
            )),
        }
    }
}

impl std::fmt::Display for ComputeDevice {
    /// `cpu`, `cuda:N` or `wgpu:N`, the form that `str::parse` reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ComputeDevice::Cpu => f.write_str("cpu"),
            ComputeDevice::Cuda(i) => write!(f, "cuda:{i}"),
            ComputeDevice::Wgpu(i) => write!(f, "wgpu:{i}"),
        }
    }
}

impl std::str::FromStr for ComputeDevice {
    type Err = Error;

    /// `cpu`, `cuda`, `cuda:N`, `wgpu` or `wgpu:N` (no index means 0), for command lines
    /// and environment variables. Whether this build can use the device is checked later,
    /// by [`ComputeDevice::to_burn`].
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "ComputeDevice",
                format!("`{s}` is not a device (known: cpu, cuda, cuda:N, wgpu, wgpu:N)"),
            )
        };
        let (kind, index) = match s.trim().split_once(':') {
            Some((kind, index)) => (kind, index.parse::<usize>().map_err(|_| bad())?),
            None => (s.trim(), 0),
        };
        match kind.to_ascii_lowercase().as_str() {
            "cpu" if !s.contains(':') => Ok(ComputeDevice::Cpu),
            "cuda" => Ok(ComputeDevice::Cuda(index)),
            "wgpu" => Ok(ComputeDevice::Wgpu(index)),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_read_and_print_the_same_names() {
        for (text, device) in [
            ("cpu", ComputeDevice::Cpu),
            ("CUDA", ComputeDevice::Cuda(0)),
            ("cuda:3", ComputeDevice::Cuda(3)),
            ("wgpu", ComputeDevice::Wgpu(0)),
            (" wgpu:1 ", ComputeDevice::Wgpu(1)),
        ] {
            let parsed: ComputeDevice = text.parse().unwrap();
            assert_eq!(parsed, device, "{text}");
            assert_eq!(device.to_string().parse::<ComputeDevice>().unwrap(), device);
        }
        for bad in ["", "gpu", "cpu:0", "cuda:", "cuda:-1", "cuda:x"] {
            let err = bad.parse::<ComputeDevice>().unwrap_err();
            assert!(err.to_string().contains("not a device"), "{bad}: {err}");
        }
    }

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
