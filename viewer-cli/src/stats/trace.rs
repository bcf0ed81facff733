//! `jets stats` for JETS traces: one streaming pass, memory that grows with open records and
//! distinct names, never with events or records.
//!
//! Durations go into a log-bucket histogram per record_type ([`Histogram`]): exact below 128
//! cycles, within 1/64 (1.6%) above, with exact count, total, min and max. Unit utilization is the
//! time a unit's outermost records (those whose parent is not on the same unit) cover, summed, over
//! the trace's extent: it exceeds 1 when a unit runs overlapping (pipelined) records, which is
//! then its average occupancy.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use jets::capture::{FooterCapture, LeftOut};
use jets::format::{Line, LineType};
use serde_json::{json, Map, Value};

/// A sum of cycles in the JSON report: the number while it fits the 64-bit range JETS integers
/// live in, `null` past it (possible only with durations near that range; CV-UNIT-2). The text
/// report prints it exactly; a cast wrapped it into a wrong total.
fn json_u64(sum: u128) -> Value {
    u64::try_from(sum).map_or(Value::Null, Value::from)
}

/// Sub-buckets per power of two above the exact range.
const SUB: u64 = 64;
/// Values below this are counted exactly.
const EXACT: u64 = 128;

/// A log-bucket histogram of cycle counts with exact count, sum, min and max.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    /// Values added.
    pub count: u64,
    /// Their sum.
    pub total: u128,
    /// The smallest.
    pub min: u64,
    /// The largest.
    pub max: u64,
}

impl Histogram {
    fn index(v: u64) -> usize {
        if v < EXACT {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as u64; // >= 7
        let sub = (v >> (e - 6)) & (SUB - 1);
        (EXACT + (e - 7) * SUB + sub) as usize
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < EXACT {
            return i;
        }
        let e = (i - EXACT) / SUB + 7;
        let sub = (i - EXACT) % SUB;
        let low = (SUB + sub) << (e - 6);
        let width = 1u64 << (e - 6);
        low + width / 2
    }

    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        let i = Self::index(v);
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.count += 1;
        self.total += v as u128;
    }

    /// The value at quantile `q` (0..=1): exact below 128, within 1.6% above, always within
    /// [min, max].
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::value(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total as f64 / self.count as f64
        }
    }
}

#[derive(Default)]
struct TypeStats {
    records: u64,
    durations: Histogram,
    unended: u64,
}

struct Open {
    record_type: usize,
    start: u64,
    unit: Option<u64>,
    /// Counts towards its unit's busy time (no ancestor on the same unit).
    outermost: bool,
}

/// Everything `jets stats` reports on a JETS trace.
#[derive(Default)]
pub struct TraceStats {
    lines: BTreeMap<LineType, u64>,
    first_clk: Option<u64>,
    last_clk: Option<u64>,
    mhz: Option<f64>,
    types: Vec<(String, TypeStats)>,
    type_index: HashMap<String, usize>,
    events: HashMap<String, u64>,
    /// Per unit: busy cycles (a sum of durations, which may pass the 64-bit range: CV-UNIT-2),
    /// records.
    units: BTreeMap<u64, (u128, u64)>,
    open: HashMap<u64, Open>,
    /// Records whose id a later record took while they were open (a duplicate id, E013): they
    /// never end (CV-DUP-1).
    displaced: u64,
    footer: Option<jets::format::Footer>,
    unended_examples: Vec<u64>,
}

impl TraceStats {
    /// Takes one line of the trace.
    pub fn line(&mut self, line: Line<'_>) {
        *self.lines.entry(line.line_type()).or_default() += 1;
        if let Some(c) = line.clk() {
            self.first_clk = Some(self.first_clk.map_or(c, |f| f.min(c)));
            self.last_clk = Some(self.last_clk.map_or(c, |l| l.max(c)));
        }
        match line {
            Line::Header(h) => self.mhz = h.clock_frequency_mhz(),
            Line::Record(r) => {
                let t = match self.type_index.get(r.record_type.as_ref()) {
                    Some(&t) => t,
                    None => {
                        self.types.push((r.record_type.to_string(), TypeStats::default()));
                        self.type_index.insert(r.record_type.to_string(), self.types.len() - 1);
                        self.types.len() - 1
                    }
                };
                self.types[t].1.records += 1;
                let unit = r.hints().unit_id;
                let parent = r.parent_id.and_then(|p| self.open.get(&p));
                // A parent on the same unit covers this record's time already.
                let covered = unit.is_some() && parent.is_some_and(|p| p.unit == unit);
                let inherited = unit.or_else(|| parent.and_then(|p| p.unit));
                let earlier = self.open.insert(
                    r.id,
                    Open {
                        record_type: t,
                        start: r.clk,
                        unit: inherited,
                        outermost: unit.is_some() && !covered,
                    },
                );
                // A duplicate id while the first record is open: the id's `record_end` ends the
                // later record, so the earlier one never ends. Counted as unended, so that every
                // record is either ended or unended (CV-DUP-1); dropped, it was neither.
                if let Some(earlier) = earlier {
                    self.types[earlier.record_type].1.unended += 1;
                    self.displaced += 1;
                }
            }
            Line::RecordEnd(e) => {
                if let Some(o) = self.open.remove(&e.record_id) {
                    // An end before the record's start (W001) lasts 0 cycles, as the viewer
                    // draws it (CV-END-2, VW-END-2).
                    let d = e.clk.saturating_sub(o.start);
                    self.types[o.record_type].1.durations.add(d);
                    if o.outermost {
                        if let Some(u) = o.unit {
                            let slot = self.units.entry(u).or_default();
                            slot.0 += u128::from(d);
                            slot.1 += 1;
                        }
                    }
                }
            }
            Line::Event(e) => {
                if let Some(n) = self.events.get_mut(e.name.as_ref()) {
                    *n += 1;
                } else {
                    self.events.insert(e.name.into_owned(), 1);
                }
            }
            Line::Footer(f) => self.footer = Some(f),
            Line::Annotation(_) => {}
        }
    }

    /// Completes the figures after the last line.
    pub fn finish(&mut self) {
        let mut ids: Vec<u64> = self.open.keys().copied().collect();
        ids.sort_unstable();
        self.unended_examples = ids.iter().take(10).copied().collect();
        for o in self.open.values() {
            self.types[o.record_type].1.unended += 1;
        }
    }

    /// Records never ended: those open at the end, and those a duplicate id displaced.
    fn unended(&self) -> u64 {
        self.open.len() as u64 + self.displaced
    }

    fn extent(&self) -> u64 {
        match (self.first_clk, self.last_clk) {
            (Some(f), Some(l)) => l - f,
            _ => 0,
        }
    }

    fn count(&self, t: LineType) -> u64 {
        self.lines.get(&t).copied().unwrap_or(0)
    }

    /// The records of `record_type` in the trace.
    pub fn records_of(&self, record_type: &str) -> u64 {
        self.type_index.get(record_type).map_or(0, |&i| self.types[i].1.records)
    }

    /// Footer totals against what the trace holds: (field, footer value, counted value).
    fn footer_checks(&self) -> Vec<(&'static str, u64, u64)> {
        let Some(f) = &self.footer else { return Vec::new() };
        let mut out = Vec::new();
        let pairs = [
            ("total_records", f.total_records, self.count(LineType::Record)),
            ("total_events", f.total_events, self.count(LineType::Event)),
            ("total_annotations", f.total_annotations, self.count(LineType::Annotation)),
            ("capture_end_clk", f.capture_end_clk, self.last_clk.unwrap_or(0)),
        ];
        for (name, stated, counted) in pairs {
            if let Some(stated) = stated {
                out.push((name, stated, counted));
            }
        }
        out
    }

    /// What the footer says of capture control (CAP-FOOT-1, CAP-COUNT-1), when the trace is not
    /// the whole run.
    fn capture(&self) -> Option<FooterCapture> {
        FooterCapture::read(self.footer.as_ref()?)
    }

    /// Whether a footer check passes. `capture_end_clk` may lie after the last line (a simulation
    /// can run on after its last traced cycle), never before it.
    fn agrees(name: &str, stated: u64, counted: u64) -> bool {
        if name == "capture_end_clk" {
            stated >= counted
        } else {
            stated == counted
        }
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let mut lines = Map::new();
        for &t in LineType::ALL {
            lines.insert(t.as_str().into(), self.count(t).into());
        }
        let mut types = Map::new();
        for (name, t) in &self.types {
            let h = &t.durations;
            types.insert(
                name.clone(),
                json!({
                    "count": t.records, "ended": h.count, "unended": t.unended,
                    "duration_cycles": {
                        "total": json_u64(h.total), "min": h.min, "mean": h.mean(),
                        "p50": h.quantile(0.5), "p95": h.quantile(0.95), "p99": h.quantile(0.99),
                        "max": h.max,
                    }
                }),
            );
        }
        let extent = self.extent();
        let mut units = Map::new();
        for (u, (busy, n)) in &self.units {
            let util = if extent > 0 { *busy as f64 / extent as f64 } else { 0.0 };
            units.insert(
                u.to_string(),
                json!({"busy_cycles": json_u64(*busy), "records": n, "utilization": util}),
            );
        }
        let mut events: Vec<(&String, &u64)> = self.events.iter().collect();
        events.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let events: Map<String, Value> =
            events.into_iter().map(|(k, v)| (k.clone(), (*v).into())).collect();
        let footer = self.footer.as_ref().map(|_| {
            let checks: Vec<Value> = self
                .footer_checks()
                .into_iter()
                .map(|(f, s, c)| {
                    json!({"field": f, "footer": s, "counted": c, "agrees": Self::agrees(f, s, c)})
                })
                .collect();
            Value::Array(checks)
        });
        json!({
            "kind": "jets",
            "time": {
                "first_clk": self.first_clk, "last_clk": self.last_clk, "extent_cycles": extent,
                "clock_frequency_mhz": self.mhz,
                "extent_seconds": self.mhz.and_then(|f| extent_seconds(extent, f)),
            },
            "lines": lines,
            "record_types": types,
            "events": events,
            "units": units,
            "unended_records": {
                "count": self.unended(), "first_ids": self.unended_examples,
            },
            "footer": footer,
            "capture": self.capture().map(|c| {
                let map = |counts: &LeftOut| -> Map<String, Value> {
                    counts.by_kind().into_iter().map(|(k, n)| (k.to_owned(), n.into())).collect()
                };
                let mut out = json!({
                    "setting": c.spelled, "left_out": map(&c.left_out), "text": c.describe(),
                });
                if let Some(counted) = &c.counted {
                    out["counted"] = Value::Object(map(counted));
                }
                if let Some(n) = c.recorder_dumps {
                    out["recorder_dumps"] = n.into();
                }
                if c.limit_reached {
                    out["limit_reached"] = true.into();
                }
                out
            }),
        })
    }

    /// The report for people.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let extent = self.extent();
        match (self.first_clk, self.last_clk) {
            (Some(f), Some(l)) => {
                let _ = write!(s, "time      clk {f} .. {l} ({extent} cycles");
                if let Some(mhz) = self.mhz {
                    let _ = write!(
                        s,
                        ", {} at {} MHz",
                        crate::human::cycles_time(extent, mhz),
                        crate::human::number(mhz)
                    );
                }
                let _ = writeln!(s, ")");
            }
            _ => {
                let _ = writeln!(s, "time      no timed lines");
            }
        }
        let _ = write!(s, "lines    ");
        for &t in LineType::ALL {
            let _ = write!(s, " {} {}", t.as_str(), self.count(t));
        }
        let _ = writeln!(s);
        if !self.types.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<24} {:>10} {:>8} {:>14} {:>10} {:>12} {:>10} {:>10} {:>10} {:>12}",
                "record_type",
                "count",
                "unended",
                "total",
                "min",
                "mean",
                "p50",
                "p95",
                "p99",
                "max"
            );
            let mut types: Vec<&(String, TypeStats)> = self.types.iter().collect();
            types.sort_by(|a, b| b.1.records.cmp(&a.1.records).then(a.0.cmp(&b.0)));
            for (name, t) in types {
                let h = &t.durations;
                let _ = writeln!(
                    s,
                    "{:<24} {:>10} {:>8} {:>14} {:>10} {:>12.1} {:>10} {:>10} {:>10} {:>12}",
                    name,
                    t.records,
                    t.unended,
                    h.total,
                    h.min,
                    h.mean(),
                    h.quantile(0.5),
                    h.quantile(0.95),
                    h.quantile(0.99),
                    h.max
                );
            }
        }
        if !self.events.is_empty() {
            let mut events: Vec<(&String, &u64)> = self.events.iter().collect();
            events.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let _ = writeln!(s, "\n{:<32} {:>10}", "event", "count");
            for (name, n) in events {
                let _ = writeln!(s, "{name:<32} {n:>10}");
            }
        }
        if !self.units.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<10} {:>10} {:>14} {:>12}",
                "unit_id", "records", "busy cycles", "utilization"
            );
            for (u, (busy, n)) in &self.units {
                let util = if extent > 0 { *busy as f64 / extent as f64 } else { 0.0 };
                let _ = writeln!(s, "{u:<10} {n:>10} {busy:>14} {:>11.1}%", util * 100.0);
            }
        }
        let _ = writeln!(s, "\nunended records: {}", self.unended());
        if !self.unended_examples.is_empty() {
            let ids: Vec<String> = self.unended_examples.iter().map(u64::to_string).collect();
            let _ = writeln!(s, "  first ids: {}", ids.join(", "));
        }
        match &self.footer {
            None => {
                let _ = writeln!(s, "footer: none");
            }
            Some(_) => {
                let checks = self.footer_checks();
                let bad: Vec<String> = checks
                    .iter()
                    .filter(|(f, st, c)| !Self::agrees(f, *st, *c))
                    .map(|(f, st, c)| format!("{f} says {st}, trace has {c}"))
                    .collect();
                if bad.is_empty() {
                    let _ = writeln!(s, "footer: agrees ({} fields checked)", checks.len());
                } else {
                    let _ = writeln!(s, "footer: DISAGREES: {}", bad.join("; "));
                }
                if let Some(c) = self.capture() {
                    s.push_str(&c.describe());
                    if c.counted.is_none() && !c.compiled_out() {
                        s.push_str("; figures above describe the captured lines only");
                    }
                    s.push('\n');
                }
            }
        }
        s
    }
}

/// The JSON report's `extent_seconds`: `None` (null) where the seconds are no normal double, past
/// 1.8e308 or below 2.2e-308 at an extreme clock (CV-TIME-3), rather than infinity or a
/// rounded-off 0 or subnormal, which would be a wrong number. `cycles / (mhz * 1e6)` gave 0 for
/// a clock of 1e305 MHz.
fn extent_seconds(extent: u64, mhz: f64) -> Option<f64> {
    let s = extent as f64 / mhz / 1e6;
    (extent == 0 || s.is_normal()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_exact_in_small_range() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.add(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.95), 95);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!((h.min, h.max, h.count, h.total), (1, 100, 100, 5050));
    }

    #[test]
    fn histogram_relative_error_is_small() {
        let mut h = Histogram::default();
        for v in 0..100_000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        let exact = 49_999_000.0;
        assert!((p50 - exact).abs() / exact < 0.016, "{p50}");
        assert_eq!(h.max, 99_999_000);
        assert_eq!(h.quantile(1.0), 99_999_000);
    }

    #[test]
    fn a_duplicate_id_of_an_open_record_leaves_the_earlier_unended() {
        let st = stats_of(&[
            r#"{"type":"header","version":"2.0","metadata":{}}"#,
            r#"{"clk":0,"type":"record","name":"a","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":2,"type":"record","name":"b","record_type":"U","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":5,"type":"record_end","record_id":1}"#,
        ]);
        let v = st.to_json();
        // CV-DUP-1: every record is ended or unended; the end is the later record's.
        assert_eq!(v["record_types"]["T"]["unended"], 1);
        assert_eq!(v["record_types"]["U"]["ended"], 1);
        assert_eq!(v["record_types"]["U"]["duration_cycles"]["total"], 3);
        assert_eq!(v["unended_records"]["count"], 1);
        assert!(st.to_text().contains("unended records: 1"));
    }

    /// The figures of the trace made of `lines`, finished.
    fn stats_of(lines: &[&str]) -> TraceStats {
        let mut st = TraceStats::default();
        for l in lines {
            st.line(Line::parse(l).expect("line"));
        }
        st.finish();
        st
    }

    /// CV-END-2: a record that ends before it begins (W001) counts as ended, 0 cycles long.
    #[test]
    fn an_end_before_the_start_lasts_zero_cycles() {
        let st = stats_of(&[
            r#"{"type":"header","version":"2.0","metadata":{}}"#,
            r#"{"clk":10,"type":"record","name":"a","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":4,"type":"record_end","record_id":1}"#,
            r#"{"clk":20,"type":"record","name":"b","record_type":"T","id":2,"parent_id":null,"description":""}"#,
            r#"{"clk":26,"type":"record_end","record_id":2}"#,
        ]);
        let t = &st.to_json()["record_types"]["T"];
        assert_eq!((t["ended"].as_u64(), t["unended"].as_u64()), (Some(2), Some(0)), "{t}");
        let d = &t["duration_cycles"];
        assert_eq!(
            (d["min"].as_u64(), d["max"].as_u64(), d["total"].as_u64()),
            (Some(0), Some(6), Some(6)),
            "{d}"
        );
    }

    #[test]
    fn bucket_index_and_value_agree() {
        for v in [0, 1, 127, 128, 129, 1000, 1 << 20, u64::MAX / 3, u64::MAX] {
            let mid = Histogram::value(Histogram::index(v));
            assert_eq!(Histogram::index(mid), Histogram::index(v), "{v}");
        }
    }
}
