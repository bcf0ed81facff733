//! The clock beacon: a small memory-mapped file through which a simulator tells a monitor in
//! another process (`jets run`) which cycle it is at.
//!
//! Layout (64 bytes, native endianness, both sides on the same host): bytes 0..8 the magic
//! `JETSCLK1`, 8..16 the last published cycle (`u64::MAX` until the first publish), 16..24 the
//! `CLOCK_MONOTONIC` time of that publish in ns. Both words are atomics, so a reader never sees a
//! torn value; the pair is not read atomically, which only matters to the staleness estimate.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

use super::HostError;

/// The environment variable that names the beacon file for the monitored simulator.
pub const BEACON_ENV: &str = "JETS_CLOCK_BEACON";

const MAGIC: &[u8; 8] = b"JETSCLK1";
const LEN: usize = 64;
const NEVER: u64 = u64::MAX;

/// A mapped beacon file, either side.
#[derive(Debug)]
pub struct ClockBeacon {
    map: MmapMut,
    path: PathBuf,
}

impl ClockBeacon {
    /// Creates (or resets) the beacon file: the monitor's side.
    pub fn create(path: impl AsRef<Path>) -> Result<ClockBeacon, HostError> {
        let path = path.as_ref();
        let io = |source| HostError::Io { path: path.to_path_buf(), source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        file.set_len(LEN as u64).map_err(io)?;
        // SAFETY: we just created the file at its full length; the only other writer is a
        // simulator that maps it the same way and only writes through atomics.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
        map[..8].copy_from_slice(MAGIC);
        let beacon = ClockBeacon { map, path: path.to_path_buf() };
        beacon.word(1).store(NEVER, Ordering::Release);
        beacon.word(2).store(0, Ordering::Release);
        Ok(beacon)
    }

    /// Opens an existing beacon file: the simulator's side.
    pub fn open(path: impl AsRef<Path>) -> Result<ClockBeacon, HostError> {
        let path = path.as_ref();
        let io = |source| HostError::Io { path: path.to_path_buf(), source };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < LEN as u64 {
            return Err(HostError::Beacon {
                path: path.to_path_buf(),
                what: format!("{len} bytes, expected {LEN}"),
            });
        }
        // SAFETY: the file is at least LEN bytes; see `create` for the sharing discipline.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
        if &map[..8] != MAGIC {
            return Err(HostError::Beacon {
                path: path.to_path_buf(),
                what: "no JETSCLK1 magic".into(),
            });
        }
        Ok(ClockBeacon { map, path: path.to_path_buf() })
    }

    /// Opens the beacon named by [`BEACON_ENV`], if the variable is set.
    pub fn from_env() -> Result<Option<ClockBeacon>, HostError> {
        match std::env::var_os(BEACON_ENV) {
            Some(p) if !p.is_empty() => ClockBeacon::open(PathBuf::from(p)).map(Some),
            _ => Ok(None),
        }
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: the map is page-aligned and at least LEN bytes, so word i < 8 is an aligned,
        // in-bounds u64 that lives as long as `self`; other processes touch it only atomically.
        unsafe { &*(self.map.as_ptr().add(i * 8) as *const AtomicU64) }
    }

    /// Publishes the current cycle (one atomic store each for the cycle and the time).
    pub fn publish(&self, cycle: u64) {
        self.word(2).store(super::procfs::clock_ns(libc::CLOCK_MONOTONIC), Ordering::Relaxed);
        self.word(1).store(cycle, Ordering::Release);
    }

    /// The last published cycle, `None` before the first publish.
    pub fn cycle(&self) -> Option<u64> {
        let c = self.word(1).load(Ordering::Acquire);
        (c != NEVER).then_some(c)
    }

    /// `CLOCK_MONOTONIC` ns of the last publish (0 before the first).
    pub fn published_at_ns(&self) -> u64 {
        self.word(2).load(Ordering::Relaxed)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_is_seen_through_another_mapping() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("beacon");
        let monitor = ClockBeacon::create(&p).expect("create");
        let sim = ClockBeacon::open(&p).expect("open");
        assert_eq!(monitor.cycle(), None);
        sim.publish(12345);
        assert_eq!(monitor.cycle(), Some(12345));
        assert!(monitor.published_at_ns() > 0);
        std::fs::write(&p, [0u8; 64]).expect("clobber");
        assert!(matches!(ClockBeacon::open(&p), Err(HostError::Beacon { .. })));
    }
}
