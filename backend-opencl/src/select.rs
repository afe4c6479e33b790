//! Platform and device selection (`--opencl-device`): `PLATFORM[:N]`, where PLATFORM is a
//! case-insensitive part of a platform's name (`nvidia`, `portable`) and N a device index within
//! it; `:N` alone indexes the default list. By default every GPU of every platform is used, and
//! when there is none, every device of every platform (POCL's CPU device, in CI).

use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::platform::get_platforms;

/// A device found, with its platform.
pub struct Found {
    /// The platform's name.
    pub platform: String,
    /// The platform's version string.
    pub platform_version: String,
    /// The device.
    pub device: Device,
}

/// What `--opencl-device` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Part of the platform's name.
    pub platform: Option<String>,
    /// A device index among the platform's (or the default list's) devices.
    pub index: Option<usize>,
}

impl Selector {
    /// Parses `PLATFORM[:N]`, `:N` or `` (the default).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (platform, index) = match s.rsplit_once(':') {
            Some((p, i)) => {
                let i = i
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| format!("--opencl-device {s:?}: {i:?} is not a device index"))?;
                (p.trim(), Some(i))
            }
            None => (s.trim(), None),
        };
        Ok(Selector {
            platform: (!platform.is_empty()).then(|| platform.to_lowercase()),
            index,
        })
    }
}

/// One platform as the loader lists it.
struct Listed {
    name: String,
    version: String,
    all: Vec<Device>,
    gpus: Vec<Device>,
}

/// Every platform's devices, as the loader lists them; an error when there is no OpenCL at all.
fn all() -> Result<Vec<Listed>, String> {
    let platforms = get_platforms().map_err(|e| {
        format!("no OpenCL platform found ({e}): install an OpenCL driver and its ICD loader (libOpenCL.so.1), e.g. ocl-icd-libopencl1 and pocl-opencl-icd on Debian")
    })?;
    if platforms.is_empty() {
        return Err("no OpenCL platform found: the ICD loader lists none (is a driver's .icd file in /etc/OpenCL/vendors?)".into());
    }
    let mut out = Vec::new();
    for p in platforms {
        let name = p.name().unwrap_or_else(|_| "unknown platform".into());
        let version = p.version().unwrap_or_default();
        // A platform without devices of a type answers CL_DEVICE_NOT_FOUND: an empty list.
        let ids = |ty| {
            p.get_devices(ty)
                .map(|ids| ids.into_iter().map(Device::new).collect::<Vec<_>>())
                .or_else(|e| {
                    if e.0 == opencl3::error_codes::CL_DEVICE_NOT_FOUND {
                        Ok(Vec::new())
                    } else {
                        Err(format!("listing the devices of {name:?}: {e}"))
                    }
                })
        };
        out.push(Listed {
            all: ids(CL_DEVICE_TYPE_ALL)?,
            gpus: ids(CL_DEVICE_TYPE_GPU)?,
            name,
            version,
        });
    }
    Ok(out)
}

/// The devices `selector` picks, or an error naming what exists.
pub fn select(selector: &Selector) -> Result<Vec<Found>, String> {
    let platforms = all()?;
    let listing = || {
        platforms
            .iter()
            .map(|p| {
                let names: Vec<String> =
                    p.all.iter().map(|d| d.name().unwrap_or_default()).collect();
                format!("{:?}: [{}]", p.name, names.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let found = |p: &Listed, d: &Device| Found {
        platform: p.name.clone(),
        platform_version: p.version.clone(),
        device: *d,
    };
    let mut picked: Vec<Found> = match &selector.platform {
        Some(want) => platforms
            .iter()
            .filter(|p| p.name.to_lowercase().contains(want))
            .flat_map(|p| p.all.iter().map(|d| found(p, d)))
            .collect(),
        None => {
            let gpus: Vec<Found> = platforms
                .iter()
                .flat_map(|p| p.gpus.iter().map(|d| found(p, d)))
                .collect();
            if gpus.is_empty() {
                platforms
                    .iter()
                    .flat_map(|p| p.all.iter().map(|d| found(p, d)))
                    .collect()
            } else {
                gpus
            }
        }
    };
    if let Some(i) = selector.index {
        if i >= picked.len() {
            return Err(format!(
                "--opencl-device: index {i} but {} device(s) match; platforms: {}",
                picked.len(),
                listing()
            ));
        }
        picked = vec![picked.swap_remove(i)];
    }
    if picked.is_empty() {
        return Err(format!(
            "no OpenCL device matches {:?}; platforms: {}",
            selector.platform.as_deref().unwrap_or("(default)"),
            listing()
        ));
    }
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_and_bad_ones_are_refused() {
        assert_eq!(Selector::parse("").unwrap(), Selector::default());
        assert_eq!(
            Selector::parse("NVIDIA:1").unwrap(),
            Selector {
                platform: Some("nvidia".into()),
                index: Some(1)
            }
        );
        assert_eq!(
            Selector::parse(":0").unwrap(),
            Selector {
                platform: None,
                index: Some(0)
            }
        );
        assert!(Selector::parse("pocl:x").is_err());
        assert!(Selector::parse("pocl:-1").is_err());
    }
}
