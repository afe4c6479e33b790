//! How a transform's passes are cut ([`NttShape`]): the radix of each pass, the tile a group
//! transforms and the elements a thread holds, within what the device's groups allow.

use crate::context::GpuDevice;
use crate::device::{Device, DeviceInfo};
use crate::kernels::NTT_MAX_G;

/// Bytes of a field element.
pub(super) const FR: u64 = 32;
/// The largest tile a group transforms (2^10 elements: 33 KiB of local memory with its
/// padding, under CUDA's 48 KiB without opting in).
pub(super) const MAX_LOG_TILE: u32 = 10;
/// Elements a thread holds in the rounds, by default (log2).
const DEFAULT_LOG_PER_THREAD: u32 = 2;
/// A group's tile, by default (log2).
const DEFAULT_LOG_TILE: u32 = 9;

/// How a transform's passes are cut: the most points a column of one pass holds, the
/// elements of one group's tile and the elements a thread holds in the rounds (all powers of
/// two, as logarithms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NttShape {
    /// log2 of the largest radix of a pass.
    pub max_log_radix: u32,
    /// log2 of a group's tile (columns times radix).
    pub log_tile: u32,
    /// log2 of the elements a thread holds in the rounds (G: 1 to [`NTT_MAX_G`]); a pass takes
    /// ceil(radix / G) exchanges through local memory.
    pub log_per_thread: u32,
}

impl NttShape {
    /// The default: tiles of 2^9 elements (or the largest the device's local memory and group
    /// size allow), four elements a thread, passes of up to a tile's points. Measured on the
    /// H200 (`docs/design-decisions.md#ntt`): against tiles of 2^10 with eight elements a
    /// thread and four columns, 4% faster at 2^24 and 7% at 2^27, the H pipeline 5-7%; two
    /// elements a thread were slower in every shape tried. Passes of up to
    /// 2^9 points rather than 2^8 change only the sizes they take in fewer passes (the radices
    /// are spread evenly over as few passes as the largest allows), where a pass of 2^9 points
    /// has one column a tile: 2^27 in three passes instead of four was 2.2% faster, its H
    /// pipeline 1.3%; 2^24 is three passes of 2^8 either way.
    pub fn for_device<D: Device>(gpu: &GpuDevice<D>) -> Self {
        let info = gpu.device.info();
        let log_per_thread = DEFAULT_LOG_PER_THREAD;
        let mut log_tile = DEFAULT_LOG_TILE;
        while log_tile > log_per_thread && group_fit(info, log_tile, log_per_thread).is_err() {
            log_tile -= 1;
        }
        NttShape {
            max_log_radix: log_tile,
            log_tile,
            log_per_thread,
        }
    }

    /// The shape as `RADIX/TILE/G` (the logarithms), as benchmarks name it.
    pub fn name(&self) -> String {
        format!(
            "{}/{}/{}",
            self.max_log_radix, self.log_tile, self.log_per_thread
        )
    }

    /// A shape from `RADIX/TILE/G` (the logarithms); `G` defaults to the device default's.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not RADIX/TILE[/G] (logarithms)");
        let parts: Vec<u32> = s
            .split('/')
            .map(|x| x.trim().parse::<u32>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let shape = match parts[..] {
            [max_log_radix, log_tile] => NttShape {
                max_log_radix,
                log_tile,
                log_per_thread: DEFAULT_LOG_PER_THREAD,
            },
            [max_log_radix, log_tile, log_per_thread] => NttShape {
                max_log_radix,
                log_tile,
                log_per_thread,
            },
            _ => return Err(bad()),
        };
        shape.check().map(|()| shape)
    }

    /// Whether the kernels can run this shape.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=NTT_MAX_G).contains(&self.log_per_thread) {
            return Err(format!(
                "an NTT thread holds 2^1 to 2^{NTT_MAX_G} elements, not 2^{}",
                self.log_per_thread
            ));
        }
        if self.max_log_radix == 0 || self.max_log_radix > MAX_LOG_TILE {
            return Err(format!(
                "an NTT pass's radix is 2^1 to 2^{MAX_LOG_TILE}, not 2^{}",
                self.max_log_radix
            ));
        }
        if self.log_tile > MAX_LOG_TILE {
            return Err(format!(
                "an NTT tile holds at most 2^{MAX_LOG_TILE} elements, not 2^{}",
                self.log_tile
            ));
        }
        Ok(())
    }

    /// The radices of a transform of 2^log_n points: as few passes as the largest radix allows,
    /// as even as they can be. One point takes one pass of radix 1 (a copy), so that the last
    /// pass's finishing step runs at every size.
    pub fn radices(&self, log_n: u32) -> Vec<u32> {
        if log_n == 0 {
            return vec![0];
        }
        let passes = log_n.div_ceil(self.max_log_radix.max(1));
        (0..passes)
            .map(|i| log_n / passes + u32::from(i < log_n % passes))
            .collect()
    }
}

/// Whether a group transforming a tile of 2^log_tile elements, 2^log_per_thread a thread, fits
/// the device's group size and local memory (else what it needs and what the device allows).
pub(super) fn group_fit(
    info: &DeviceInfo,
    log_tile: u32,
    log_per_thread: u32,
) -> Result<(), String> {
    let threads = 1usize << log_tile.saturating_sub(log_per_thread);
    let bytes = local_bytes(1 << log_tile);
    if bytes > info.local_memory_bytes || threads > info.max_group_size {
        return Err(format!(
            "groups of {threads} threads and {bytes} bytes of local memory; the device allows {} \
             and {}",
            info.max_group_size, info.local_memory_bytes
        ));
    }
    Ok(())
}

/// Local memory of a tile of `elements`: one plane per limb, one word of padding per 32.
pub(super) fn local_bytes(elements: u64) -> u64 {
    (elements + elements / 32) * FR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radices_cover_the_size_in_few_even_passes() {
        for max_log_radix in 1..=10 {
            let shape = NttShape {
                max_log_radix,
                log_tile: 10,
                log_per_thread: 3,
            };
            for log_n in 1..=31 {
                let r = shape.radices(log_n);
                assert_eq!(r.iter().sum::<u32>(), log_n, "{shape:?} 2^{log_n}");
                assert_eq!(r.len() as u32, log_n.div_ceil(max_log_radix));
                assert!(r.iter().all(|&d| d >= 1 && d <= max_log_radix));
                assert!(r.iter().max().unwrap() - r.iter().min().unwrap() <= 1);
            }
            // One point: one copying pass, so that a finishing step still runs.
            assert_eq!(shape.radices(0), vec![0]);
        }
        // Negative twin: 2^24 in radix 2^8 is three passes, not two of 12.
        let r = NttShape {
            max_log_radix: 8,
            log_tile: 10,
            log_per_thread: 3,
        }
        .radices(24);
        assert_eq!(r, vec![8, 8, 8]);
        assert_ne!(r.len(), 2);
    }

    #[test]
    fn shapes_parse_and_the_kernels_bound_them() {
        let s = NttShape::parse("8/10/1").unwrap();
        assert_eq!((s.max_log_radix, s.log_tile, s.log_per_thread), (8, 10, 1));
        assert_eq!(NttShape::parse(&s.name()), Ok(s));
        let d = NttShape::parse("9/9").unwrap();
        assert_eq!(d.log_per_thread, DEFAULT_LOG_PER_THREAD);
        // Negative twins: a thread of 2^0 or 2^4 elements has no kernel; radices and tiles
        // past 2^10 and malformed names are refused.
        for bad in [
            "8/10/0", "8/10/4", "0/10/2", "11/10/2", "8/11/2", "8", "8/10/1/1", "a/b",
        ] {
            assert!(NttShape::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_group_fits_the_devices_group_size_and_local_memory() {
        let info = |max_group_size, local_memory_bytes| DeviceInfo {
            name: "test".into(),
            platform: "test".into(),
            driver: "0".into(),
            compute_units: 1,
            memory_bytes: 1 << 30,
            max_alloc_bytes: 1 << 30,
            local_memory_bytes,
            max_group_size,
            program_from_cache: false,
        };
        // 2^10 elements, 2 a thread: 512 threads, 33 KiB.
        let big = info(1024, 48 << 10);
        assert!(group_fit(&big, 10, 1).is_ok());
        assert_eq!(local_bytes(1 << 10), 33 << 10);
        // Negative twins: too few threads a group, too little local memory, each alone.
        let few_threads = group_fit(&info(256, 48 << 10), 10, 1).unwrap_err();
        assert!(few_threads.contains("512 threads"), "{few_threads}");
        assert!(group_fit(&info(1024, 32 << 10), 10, 1).is_err());
        // Four a thread halves the threads: fits 256.
        assert!(group_fit(&info(256, 48 << 10), 10, 2).is_ok());
    }
}
