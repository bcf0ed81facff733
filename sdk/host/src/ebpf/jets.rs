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

/// `CLOCK_MONOTONIC` → simulated cycle, through (mono, cycle) pairs read together as the
/// collector runs (piecewise-linear, as spec/host-sync.md's HS3), held non-decreasing (HS1).
#[derive(Debug)]
pub struct CycleMap {
    clock: SimClock,
    points: VecDeque<(u64, u64)>,
    last_clk: u64,
}

impl CycleMap {
    /// A map reading `clock`.
    pub fn new(clock: SimClock) -> CycleMap {
        CycleMap { clock, points: VecDeque::new(), last_clk: 0 }
    }

    /// Reads the clock with the monotonic time now.
    pub fn sample(&mut self) {
        let mono = crate::procfs::clock_ns(libc::CLOCK_MONOTONIC);
        let clk = self.clock.now();
        if self.points.back().is_some_and(|&(m, c)| m >= mono || c > clk) {
            return;
        }
        if self.points.len() == 256 {
            self.points.pop_front();
        }
        self.points.push_back((mono, clk));
    }

    /// The cycle at monotonic time `mono_ns`, never below the previous answer.
    pub fn cycle_at(&mut self, mono_ns: u64) -> u64 {
        let n = self.points.len();
        let clk = match self.points.iter().position(|&(m, _)| m >= mono_ns) {
            _ if n == 0 => self.clock.now(),
            Some(0) => self.points[0].1,
            Some(i) => {
                let (m0, c0) = self.points[i - 1];
                let (m1, c1) = self.points[i];
                c0 + ((c1 - c0) as f64 * (mono_ns - m0) as f64 / (m1 - m0) as f64) as u64
            }
            None => self.points[n - 1].1,
        };
        self.last_clk = self.last_clk.max(clk);
        self.last_clk
    }

    /// The last cycle given out.
    pub fn last(&self) -> u64 {
        self.last_clk
    }
}

/// Writes one row as an event named after its operation.
pub fn emit(root: &RecordHandle, row: &Row, clk: u64) -> Result<(), jets::Error> {
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
    e.emit_at(clk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_samples_and_never_goes_back() {
        let clock = SimClock::new();
        let mut m = CycleMap::new(clock.clone());
        m.points.extend([(1_000, 100), (2_000, 300)]);
        assert_eq!(m.cycle_at(1_500), 200);
        assert_eq!(m.cycle_at(500), 200, "held at the last answer");
        assert_eq!(m.cycle_at(5_000), 300);
    }
}
