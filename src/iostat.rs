//! A disk's I/O counters from `/sys/block/X/stat` (Documentation/block/stat.rst),
//! the same on every kernel, with or without the knobs.

use crate::sysfs::Sysfs;

/// `stat` counts sectors of 512 bytes whatever the disk's block size.
pub const SECTOR_BYTES: u64 = 512;

/// The counters blkqos reports; times in milliseconds, as the kernel keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    /// Time the disk had I/O in flight.
    pub io_ms: u64,
    /// Time in queue: I/O time weighted by the number in flight.
    pub queue_ms: u64,
}

pub fn read(sysfs: &Sysfs, disk: &str) -> Option<DiskStat> {
    parse(&sysfs.attr(&format!("block/{disk}/stat"))?)
}

/// The first eleven fields (the ones every kernel since 2.6 has); later
/// kernels append discard and flush counters, which are ignored.
pub fn parse(text: &str) -> Option<DiskStat> {
    let f: Vec<u64> = (text.split_ascii_whitespace().take(11))
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // merges, per-direction times and I/Os in flight are not reported
    let &[
        reads,
        _,
        read_sectors,
        _,
        writes,
        _,
        write_sectors,
        _,
        _,
        io_ms,
        queue_ms,
    ] = f.as_slice()
    else {
        return None;
    };
    Some(DiskStat {
        reads,
        read_sectors,
        writes,
        write_sectors,
        io_ms,
        queue_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_stat_line_with_or_without_discard_and_flush_fields() {
        let line = "  1200  3 96000  410   800  5 64000  900  2  1300  1310  0 0 0 0  7 12\n";
        let s = parse(line).expect("parses");
        assert_eq!((s.reads, s.read_sectors), (1200, 96000));
        assert_eq!((s.writes, s.write_sectors), (800, 64000));
        assert_eq!((s.io_ms, s.queue_ms), (1300, 1310));
        assert_eq!(
            parse(
                &line
                    .split_whitespace()
                    .take(11)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Some(s)
        );
        assert_eq!(parse("1 2 3"), None);
        assert_eq!(parse("1 2 3 4 5 6 7 8 9 10 x"), None);
    }
}
