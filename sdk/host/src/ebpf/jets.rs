//! Decoded I/O operations as JETS events on a `HostIo` record (spec/host-io.md), each at the
//! simulated cycle the operation happened at.

use std::collections::VecDeque;

use jets::{RecordHandle, SimClock};

use super::decode::Row;

/// record_type of the root record carrying the I/O events.
pub const IO_RECORD_TYPE: &str = "HostIo";
/// Annotation with the collector's capabilities (which streams work, and why not).
pub const IO_CAPABILITIES_ANNOTATION: &str = "HostIoCapabilities";
/// Annotation with the per-stream counts and lost events, written when the collector stops.
pub const IO_STATS_ANNOTATION: &str = "HostIoStats";

/// Where an operation's cycle came from, and how exact it is (HIO1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The cycle: interpolated between the clock readings around the operation's time.
    pub clk: u64,
    /// The true cycle lies in `clk ± uncertainty` (for a simulator clock that does not go back):
    /// the readings around the operation bound it. `None` when no reading after the operation
    /// exists (the cycle is then a lower bound).
    pub uncertainty: Option<u64>,
}

/// A reading of the simulator's clock: the cycle read just before (`lo`) and just after (`hi`)
/// `CLOCK_MONOTONIC`, so the cycle at `mono` lies in `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reading {
    mono: u64,
    lo: u64,
    hi: u64,
}

/// `CLOCK_MONOTONIC` → simulated cycle, through readings of the trace's clock taken as the
/// collector runs: a cycle is interpolated between the readings before and after the instant
/// (as spec/host-sync.md's HS3), never extrapolated past the last one (HIO1).
#[derive(Debug)]
pub struct CycleMap {
    clock: SimClock,
    readings: VecDeque<Reading>,
    /// The cycle the `HostIo` record started at: the lower bound before the first reading.
    start_clk: u64,
    /// The largest cycle given out.
    max_clk: u64,
}

/// Readings kept for operations whose time lies far back (a long `fsync` is stamped with its
/// entry): about a minute at the default 20 ms poll, more when records keep the collector busy.
const KEEP: usize = 1 << 16;

impl CycleMap {
    /// A map reading `clock`, with a first reading now; `start_clk` is the record's start.
    pub fn new(clock: SimClock, start_clk: u64) -> CycleMap {
        let mut m = CycleMap { clock, readings: VecDeque::new(), start_clk, max_clk: start_clk };
        m.sample();
        m
    }

    /// Reads the clock with the monotonic time now. A clock that went back is held at its last
    /// value (HS1).
    pub fn sample(&mut self) {
        let lo = self.clock.now();
        let mono = crate::procfs::clock_ns(libc::CLOCK_MONOTONIC);
        let hi = self.clock.now();
        self.push(Reading { mono, lo, hi });
    }

    fn push(&mut self, r: Reading) {
        let (lo, hi) = match self.readings.back() {
            Some(last) if last.mono >= r.mono => return,
            Some(last) => (r.lo.max(last.hi), r.hi.max(last.hi)),
            None => (r.lo.max(self.start_clk), r.hi.max(self.start_clk)),
        };
        let r = Reading { mono: r.mono, lo, hi };
        // A pause: readings in the middle of a run of one cycle add nothing.
        let n = self.readings.len();
        if n >= 2 {
            let (a, b) = (self.readings[n - 2], self.readings[n - 1]);
            if a.lo == a.hi && a.hi == b.lo && b.lo == b.hi && b.hi == r.lo && r.lo == r.hi {
                self.readings[n - 1] = r;
                return;
            }
        }
        if self.readings.len() == KEEP {
            self.readings.pop_front();
        }
        self.readings.push_back(r);
    }

    /// The time of the latest reading: every operation up to it can be stamped.
    pub fn latest(&self) -> u64 {
        self.readings.back().map_or(0, |r| r.mono)
    }

    /// The cycle at monotonic time `mono_ns` and how exact it is.
    pub fn stamp(&mut self, mono_ns: u64) -> Stamp {
        let i = self.readings.partition_point(|r| r.mono < mono_ns);
        let s = match (i.checked_sub(1).map(|j| self.readings[j]), self.readings.get(i)) {
            (_, Some(b)) if b.mono == mono_ns => Stamp {
                clk: b.lo + (b.hi - b.lo) / 2,
                uncertainty: Some((b.hi - b.lo).div_ceil(2)),
            },
            (Some(a), Some(b)) => {
                // Between a and b: the cycle lies in [a.lo, b.hi]; the estimate interpolates the
                // readings' middles.
                let (ca, cb) = (a.lo + (a.hi - a.lo) / 2, b.lo + (b.hi - b.lo) / 2);
                let f = (mono_ns - a.mono) as u128;
                let span = (b.mono - a.mono) as u128;
                let clk = ca + (((cb - ca) as u128 * f) / span) as u64;
                let clk = clk.clamp(a.lo, b.hi);
                Stamp { clk, uncertainty: Some((clk - a.lo).max(b.hi - clk)) }
            }
            (None, Some(b)) => Stamp { clk: b.lo, uncertainty: Some(b.hi - self.start_clk) },
            (Some(a), None) => Stamp { clk: a.hi, uncertainty: None },
            (None, None) => Stamp { clk: self.start_clk, uncertainty: None },
        };
        self.max_clk = self.max_clk.max(s.clk);
        s
    }

    /// A cycle the kernel read from the simulator's clock at the operation: exact (held at the
    /// record's start if the simulator went back before it).
    pub fn exact(&mut self, clk: u64) -> Stamp {
        let clk = clk.max(self.start_clk);
        self.max_clk = self.max_clk.max(clk);
        Stamp { clk, uncertainty: Some(0) }
    }

    /// The cycle to end the record at: the largest given out, or the latest reading.
    pub fn end(&self) -> u64 {
        self.max_clk.max(self.readings.back().map_or(0, |r| r.hi))
    }
}

/// Writes one row as an event named after its operation.
pub fn emit(root: &RecordHandle, row: &Row, stamp: Stamp) -> Result<(), jets::Error> {
    let w = row.who();
    let stream = row.stream().dir();
    let name: String = match row {
        Row::Fs(r) => r.op.into(),
        Row::Block(r) => format!("BLOCK_{}", r.op.to_uppercase()),
        Row::Cache(r) => format!("CACHE_{}", r.event),
        Row::Net(r) => if r.direction == "send" { "NET_SEND" } else { "NET_RECEIVE" }.into(),
        Row::Fault(_) => "PAGE_FAULT".into(),
        Row::Uring(r) => format!("IOURING_{}", r.opcode),
        Row::Process(r) => r.op.into(),
    };
    let e = root
        .event(name)
        .field("stream", stream)
        .field("mono_ns", w.ts)
        .field("pid", w.pid)
        .field("tid", w.tid)
        .field("comm", w.comm.clone());
    let e = match stamp.uncertainty {
        Some(u) => e.field("clk_uncertainty", u),
        None => e,
    };
    let e = match row {
        Row::Fs(r) => {
            let mut e = e
                .field("syscall", r.syscall)
                .field("path", r.path.clone())
                .field("size", r.size)
                .field("flags", r.flags.clone())
                .field("latency_ns", r.latency_ns);
            if let Some(p) = &r.path2 {
                e = e.field("new_path", p.clone());
            }
            if let Some(o) = r.offset {
                e = e.field("offset", o);
            }
            if let Some(fd) = r.fd {
                e = e.field("fd", fd);
            }
            e
        }
        Row::Block(r) => {
            let mut e = e
                .field("dev", r.dev.clone())
                .field("sector", r.sector)
                .field("size", r.size)
                .field("latency_ns", r.latency_ns)
                .field("rwbs", r.rwbs.clone());
            if let Some(q) = r.queue_ns {
                e = e.field("queue_ns", q);
            }
            if r.error != 0 {
                e = e.field("error", r.error);
            }
            e
        }
        Row::Cache(r) => e
            .field("inode", r.inode)
            .field("index", r.index)
            .field("dev_id", r.dev_id)
            .field("count", r.count),
        Row::Net(r) => {
            let mut e = e.field("protocol", r.protocol.clone()).field("size", r.size);
            if !r.source_addr.is_empty() {
                e = e
                    .field("source_addr", r.source_addr.clone())
                    .field("source_port", r.source_port)
                    .field("dest_addr", r.dest_addr.clone())
                    .field("dest_port", r.dest_port);
            }
            e
        }
        Row::Fault(r) => e
            .field("fault_type", r.fault_type)
            .field("fault_severity", r.severity)
            .field("address", r.address)
            .field("inode", r.inode)
            .field("offset", r.offset),
        Row::Uring(r) => {
            let mut e = e;
            for (k, v) in [("fd", r.fd), ("result", r.result)] {
                if let Some(v) = v {
                    e = e.field(k, v);
                }
            }
            for (k, v) in
                [("length", r.length), ("latency_ns", r.latency_ns), ("user_data", r.user_data)]
            {
                if let Some(v) = v {
                    e = e.field(k, v);
                }
            }
            e
        }
        Row::Process(r) => match r.child {
            Some(c) => e.field("child", c),
            None => e,
        },
    };
    e.emit_at(stamp.clk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(readings: &[(u64, u64, u64)]) -> CycleMap {
        let mut m = CycleMap {
            clock: SimClock::new(),
            readings: VecDeque::new(),
            start_clk: 50,
            max_clk: 50,
        };
        for &(mono, lo, hi) in readings {
            m.push(Reading { mono, lo, hi });
        }
        m
    }

    #[test]
    fn interpolates_between_readings_with_a_bound() {
        let mut m = map(&[(1_000, 100, 100), (2_000, 300, 300)]);
        assert_eq!(m.stamp(1_500), Stamp { clk: 200, uncertainty: Some(100) });
        assert_eq!(m.stamp(1_000), Stamp { clk: 100, uncertainty: Some(0) });
        // Not held at the previous answer: an earlier operation gets its own, earlier cycle.
        assert_eq!(m.stamp(1_250), Stamp { clk: 150, uncertainty: Some(150) });
        assert_eq!(m.stamp(500), Stamp { clk: 100, uncertainty: Some(50) }, "since the start");
        assert_eq!(m.end(), 300);
    }

    #[test]
    fn nothing_past_the_last_reading_and_paused_clocks_are_exact() {
        let mut m = map(&[(1_000, 100, 100)]);
        // The old map stamped this with the latest reading, 100, as if exact.
        assert_eq!(m.stamp(1_700), Stamp { clk: 100, uncertainty: None });
        assert_eq!(m.latest(), 1_000);
        m.push(Reading { mono: 2_000, lo: 100, hi: 100 });
        m.push(Reading { mono: 3_000, lo: 100, hi: 100 });
        m.push(Reading { mono: 4_000, lo: 900, hi: 910 });
        assert_eq!(m.readings.len(), 3, "the middle of a pause is not kept");
        assert_eq!(m.stamp(1_700), Stamp { clk: 100, uncertainty: Some(0) });
        let s = m.stamp(3_500);
        assert_eq!(s.clk, 100 + (905 - 100) / 2);
        assert_eq!(s.uncertainty, Some(910 - s.clk));
        // A clock that went back is held.
        m.push(Reading { mono: 5_000, lo: 10, hi: 10 });
        assert_eq!(m.stamp(5_000), Stamp { clk: 910, uncertainty: Some(0) });
    }
}
