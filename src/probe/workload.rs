//! The reads: 4 KiB at random offsets, one at a time (QD1), through
//! `pread` on a descriptor opened with O_DIRECT. A sustained phase, then a
//! bursty one: bursts of 8 after idle gaps of 2, 8 and 32 ms, where the
//! first read of a burst finds the serving CPUs in whatever idle state the
//! gap let them reach.
//!
//! Synchronous `pread` rather than io_uring: at QD1 it is the path a
//! database's synchronous reads take, and it needs no unsafe code (an
//! io_uring submission's buffers are the caller's to keep alive).

use super::target::{BLOCK, Target};
use crate::sysfs::Sysfs;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Reads per burst.
pub const BURST: usize = 8;
/// The idle gaps before bursts, in turn.
pub const GAPS_MS: [u64; 3] = [2, 8, 32];

pub struct Reader<'a> {
    target: &'a Target,
    buf: Vec<u8>,
    /// Where in `buf` an aligned block starts.
    at: usize,
    rng: fastrand::Rng,
    blocks: u64,
}

/// What a read phase was cut short by.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}: a read failed: {1}")]
    Io(String, io::Error),
    #[error("stopped")]
    Stopped,
}

impl<'a> Reader<'a> {
    pub fn new(target: &'a Target, seed: u64) -> Reader<'a> {
        // O_DIRECT wants the buffer aligned to the logical block size:
        // a block-aligned window of a buffer one block larger
        let buf = vec![0u8; 2 * BLOCK];
        let at = buf.as_ptr().align_offset(BLOCK);
        Reader {
            target,
            buf,
            at,
            rng: fastrand::Rng::with_seed(seed),
            blocks: target.size / BLOCK as u64,
        }
    }

    /// One read at a random block; its latency in nanoseconds.
    fn read(&mut self) -> Result<u32, ReadError> {
        let off = self.rng.u64(0..self.blocks) * BLOCK as u64;
        let window = &mut self.buf[self.at..self.at + BLOCK];
        let start = Instant::now();
        let n = rustix::io::pread(&self.target.fd, window, off)
            .map_err(|e| ReadError::Io(self.target.path.display().to_string(), e.into()))?;
        let ns = start.elapsed().as_nanos();
        if n != BLOCK {
            return Err(ReadError::Io(
                self.target.path.display().to_string(),
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short read: {n} bytes at {off}"),
                ),
            ));
        }
        Ok(u32::try_from(ns).unwrap_or(u32::MAX))
    }

    /// Reads for `dur` (a warm-up: what they cost is not kept).
    pub fn warm(&mut self, dur: Duration, stop: &AtomicBool) -> Result<(), ReadError> {
        self.qd1(dur, stop).map(|_| ())
    }

    /// The sustained phase: reads back to back for `dur`; each latency,
    /// and the phase's wall time in seconds.
    pub fn qd1(&mut self, dur: Duration, stop: &AtomicBool) -> Result<(Vec<u32>, f64), ReadError> {
        let start = Instant::now();
        let mut lat = Vec::with_capacity(16_384);
        while start.elapsed() < dur {
            if stop.load(Ordering::Relaxed) {
                return Err(ReadError::Stopped);
            }
            lat.push(self.read()?);
        }
        Ok((lat, start.elapsed().as_secs_f64()))
    }

    /// The bursty phase for `dur`: the first read of each burst, and the
    /// others.
    pub fn bursts(
        &mut self,
        dur: Duration,
        stop: &AtomicBool,
    ) -> Result<(Vec<u32>, Vec<u32>), ReadError> {
        let start = Instant::now();
        let (mut first, mut rest) = (Vec::new(), Vec::new());
        let mut gaps = GAPS_MS.iter().cycle();
        while start.elapsed() < dur {
            // `cycle` of a non-empty array never ends
            let gap = gaps.next().copied().unwrap_or(GAPS_MS[0]);
            std::thread::sleep(Duration::from_millis(gap));
            if stop.load(Ordering::Relaxed) {
                return Err(ReadError::Stopped);
            }
            first.push(self.read()?);
            for _ in 1..BURST {
                rest.push(self.read()?);
            }
        }
        Ok((first, rest))
    }
}

/// Microseconds each CPU of `cpus` spent in each idle state, summed over
/// them, in table order (`states` entries): a counter that cannot be read
/// counts 0.
pub fn idle_time(sysfs: &Sysfs, cpus: &[u32], states: usize) -> Vec<u64> {
    let mut sum = vec![0u64; states];
    for &cpu in cpus {
        for (i, slot) in sum.iter_mut().enumerate() {
            let rel = format!("devices/system/cpu/cpu{cpu}/cpuidle/state{i}/time");
            *slot += sysfs
                .attr(&rel)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    sum
}

/// The share of the CPUs' time in each state between two [`idle_time`]
/// readings `secs` apart.
pub fn residency(before: &[u64], after: &[u64], cpus: usize, secs: f64) -> Vec<f64> {
    let wall_us = secs * 1e6 * cpus.max(1) as f64;
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            let share = a.saturating_sub(*b) as f64 / wall_us;
            if share.is_finite() {
                share.clamp(0.0, 1.0)
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residency_is_the_share_of_the_cpus_time() {
        // two CPUs for half a second: 1e6 us in all
        let r = residency(&[10, 0, 5], &[250_010, 500_000, 5], 2, 0.5);
        assert_eq!(r, vec![0.25, 0.5, 0.0]);
        // a counter that went back (a CPU replugged) counts nothing
        assert_eq!(residency(&[9], &[3], 1, 1.0), vec![0.0]);
    }

    #[test]
    fn reads_a_regular_file_at_aligned_offsets() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, vec![7u8; 256 * BLOCK]).unwrap();
        let t = match super::super::target::open(&path, |_, _| Some("x".to_string())) {
            Ok(t) => t,
            // a file system without O_DIRECT (tmpfs) refuses, as it should
            Err(e) => {
                assert!(e.to_string().contains("O_DIRECT"), "{e}");
                return;
            }
        };
        assert_eq!(t.size, 256 * BLOCK as u64);
        let stop = AtomicBool::new(false);
        let mut r = Reader::new(&t, 1);
        let (lat, secs) = r.qd1(Duration::from_millis(20), &stop).unwrap();
        assert!(!lat.is_empty() && secs >= 0.02);
        assert!(lat.iter().all(|&ns| ns > 0));
        let (first, rest) = r.bursts(Duration::from_millis(5), &stop).unwrap();
        assert_eq!(rest.len(), first.len() * (BURST - 1));
        stop.store(true, Ordering::Relaxed);
        assert!(matches!(
            r.qd1(Duration::from_secs(5), &stop),
            Err(ReadError::Stopped)
        ));
    }
}
