//! `jets convert`: snapshots of every target on a small trace, and the properties viewers rely on
//! (Chrome slices nest per thread, Kanata time never goes back, Perfetto is well-formed protobuf,
//! JETS → DFTracer → JETS keeps names, durations and nesting).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use jets::format::{Line, Status};
use jets::{Metadata, Trace};
use serde_json::Value;

mod common;
use common::{captured_pipeline, data, jets};

/// `jets import --from dftracer PFW -o BACK`, which must succeed.
fn import_dftracer(pfw: &Path, back: &Path) {
    let (pfw, back) = (pfw.to_str().expect("utf8"), back.to_str().expect("utf8"));
    let o = jets(&["import", "--from", "dftracer", pfw, "-o", back]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn convert(input: &Path, to: &str, out: &Path, extra: &[&str]) {
    let mut args = vec![
        "convert",
        input.to_str().expect("utf8"),
        "--to",
        to,
        "-o",
        out.to_str().expect("utf8"),
    ];
    args.extend_from_slice(extra);
    let o = jets(&args);
    assert!(o.status.success(), "jets {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `jets convert` where it must fail: asserts that it did and left no output, and gives
/// back what it said.
fn convert_refused(input: &Path, to: &str, out: &Path) -> String {
    let args =
        ["convert", input.to_str().expect("utf8"), "--to", to, "-o", out.to_str().expect("utf8")];
    let o = jets(&args);
    assert!(!o.status.success(), "jets {args:?} succeeded");
    assert!(!out.exists(), "jets {args:?}: partial output left behind");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes the small test trace with the SDK writer.
fn small_trace(path: &Path) {
    let meta = Metadata::new().hardware_model("Test core").clock_frequency_mhz(1000.0);
    let t = Trace::create(path, meta).expect("create");
    let core = t.root("core0", "Core").unit_id(0).begin_at(0).expect("core");
    let mem = t.root("mem", "Memory").unit_id(1).begin_at(0).expect("mem");
    let add = core
        .child("add", "Instruction")
        .display_label("ADD x1")
        .field("pc", 0x1000u64)
        .begin_at(2)
        .expect("add");
    add.annotation("regs").data_json(r#"{"rd":1,"rs":[2,3]}"#).emit().expect("ann");
    add.event("F").emit_at(2).expect("e");
    let ld = core.child("ld", "Instruction").field("pc", 0x1004u64).begin_at(4).expect("ld");
    ld.event("F").emit_at(4).expect("e");
    add.event("D").emit_at(4).expect("e");
    let br = core.child("br", "Instruction").field("status", "flushed").begin_at(6).expect("br");
    br.event("F").emit_at(6).expect("e");
    ld.event("D").emit_at(6).expect("e");
    add.event("X").description("execute").emit_at(6).expect("e");
    add.event("stall").severity(jets::format::Severity::Warning).emit_at(7).expect("e");
    br.end_at(9).expect("end");
    let dc = ld.child("dcache", "CacheAccess").status(Status::Stalled).begin_at(9).expect("dc");
    ld.event("X").emit_at(9).expect("e");
    add.event("W").emit_at(10).expect("e");
    let req = mem.child("req", "MemRequest").unit_id(1).begin_at(10).expect("req");
    add.end_at(12).expect("end");
    dc.end_at(14).expect("end");
    req.end_at(14).expect("end");
    ld.event("W").emit_at(15).expect("e");
    ld.end_at(20).expect("end");
    let mul = core.child("mul", "Instruction").begin_at(30).expect("mul");
    mul.event("F").color(jets::format::Color::rgb(0xff0000)).emit_at(30).expect("e");
    drop(mul);
    mem.end_at(38).expect("end");
    core.end_at(40).expect("end");
    t.close_at(40).expect("close");
}

#[test]
fn small_trace_fixture_is_what_the_sdk_writes() {
    let dir = tempfile::tempdir().expect("tmp");
    let fresh = dir.path().join("small.jets");
    small_trace(&fresh);
    let fresh = std::fs::read_to_string(&fresh).expect("read");
    let committed = std::fs::read_to_string(data("trace/small.jets")).unwrap_or_default();
    if fresh != committed {
        std::fs::write(data("trace/small.jets"), &fresh).expect("update fixture");
        panic!("tests/data/trace/small.jets was out of date and has been rewritten; rerun");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read output")
}

#[test]
fn chrome_snapshot() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("small.json");
    convert(&data("trace/small.jets"), "chrome", &out, &[]);
    insta::assert_snapshot!(read(&out));
}

/// Exact picoseconds of a decimal µs value as written (up to 6 fraction digits).
fn ps(v: &Value) -> i128 {
    let s = v.to_string();
    let (whole, frac) = s.split_once('.').unwrap_or((&s, ""));
    let frac = format!("{frac:0<6}");
    whole.parse::<i128>().expect("whole") * 1_000_000 + frac.parse::<i128>().expect("frac")
}

fn check_chrome_nesting(path: &Path) -> usize {
    let doc: Value = serde_json::from_str(&read(path)).expect("Chrome output is JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut threads: BTreeMap<(u64, u64), Vec<(i128, i128)>> = BTreeMap::new();
    for e in events {
        if e["ph"] == "X" {
            let s = ps(&e["ts"]);
            let d = ps(&e["dur"]);
            assert!(d >= 0);
            let key = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
            threads.entry(key).or_default().push((s, s + d));
        }
    }
    let mut n = 0;
    for (key, mut slices) in threads {
        slices.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<(i128, i128)> = Vec::new();
        for (s, e) in slices {
            while stack.last().is_some_and(|&(_, te)| te <= s) {
                stack.pop();
            }
            if let Some(&(ts, te)) = stack.last() {
                assert!(ts <= s && e <= te, "{key:?}: [{s},{e}] overlaps [{ts},{te}] partially");
            }
            stack.push((s, e));
            n += 1;
        }
    }
    n
}

#[test]
fn chrome_slices_nest_per_thread() {
    let dir = tempfile::tempdir().expect("tmp");
    for (name, records) in [("small.jets", 8), ("rjets_tests_trace.jets", 103)] {
        let out = dir.path().join(format!("{name}.json"));
        convert(&data(&format!("trace/{name}")), "chrome", &out, &[]);
        assert_eq!(check_chrome_nesting(&out), records, "{name}: one X event per record");
    }
}

#[test]
fn chrome_without_clock_says_one_cycle_is_one_microsecond() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("noclock.jets");
    let t = Trace::create(&input, Metadata::new()).expect("create");
    let r = t.root("r", "Top").begin_at(5).expect("r");
    r.end_at(8).expect("end");
    t.close().expect("close");
    let out = dir.path().join("o.json");
    convert(&input, "chrome", &out, &[]);
    let doc: Value = serde_json::from_str(&read(&out)).expect("json");
    assert!(doc["otherData"]["time_unit"].as_str().expect("unit").contains("1 cycle = 1 µs"));
    let x = doc["traceEvents"].as_array().expect("events").iter().find(|e| e["ph"] == "X");
    let x = x.expect("slice");
    assert_eq!((x["ts"].as_u64(), x["dur"].as_u64()), (Some(5), Some(3)));
}

/// CV-TIME-3: the clock the Chrome and Perfetto files state reads short at any
/// `clock_frequency_mhz` the validator accepts (`{}` wrote 1e300 in 301 digits). CV-TIME-4: a
/// cycle whose time is past what the format holds is an error naming the line, with no output
/// (a cast saturated, and the sum after it overflowed: a panic, or in a release build a
/// timestamp of 0).
#[test]
fn extreme_clocks_state_a_short_clock_and_refuse_times_past_the_format() {
    let dir = tempfile::tempdir().expect("tmp");
    let trace = |mhz: f64, end: u64| {
        let input = dir.path().join("clock.jets");
        let t = Trace::create(&input, Metadata::new().clock_frequency_mhz(mhz)).expect("create");
        let r = t.root("r", "Top").begin_at(0).expect("r");
        r.end_at(end).expect("end");
        t.close().expect("close");
        input
    };
    for (mhz, cycle) in [(1e300, "1.000e-306 s"), (1e-300, "1.000e294 s"), (1000.0, "1.0 ns")] {
        let input = trace(mhz, 0);
        let out = dir.path().join("o.json");
        convert(&input, "chrome", &out, &[]);
        let doc: Value = serde_json::from_str(&read(&out)).expect("json");
        let unit = doc["otherData"]["time_unit"].as_str().expect("unit");
        assert!(unit.starts_with(&format!("1 cycle = {cycle} (clock_frequency_mhz ")), "{unit}");
        assert!(unit.len() < 80, "{unit}");
        let out = dir.path().join("o.perfetto-trace");
        convert(&input, "perfetto", &out, &[]);
        let bytes = std::fs::read(&out).expect("read");
        let note = format!("JETS trace; 1 cycle = {cycle} (clock_frequency_mhz ");
        assert!(bytes.windows(note.len()).any(|w| w == note.as_bytes()), "{mhz}: no {note:?}");
    }
    // Cycle 5 at 1e-300 MHz is 5e306 ps: past 2^128 ps (Chrome) and 2^64 ns (Perfetto).
    let input = trace(1e-300, 5);
    for (to, what) in [("chrome", "Chrome time"), ("perfetto", "Perfetto timestamp")] {
        let err = convert_refused(&input, to, &dir.path().join(format!("past.{to}")));
        assert!(!err.contains("panicked"), "{to}: {err}");
        assert!(err.contains("clock.jets:3: cycle 5 at 1e-300 MHz is past the largest"), "{err}");
        assert!(err.contains(what), "{to}: {err}");
    }
}

#[test]
fn kanata_snapshot() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("small.kanata");
    convert(&data("trace/small.jets"), "kanata", &out, &[]);
    insta::assert_snapshot!(read(&out));
}

/// Checks the Kanata 0004 command grammar and that time never goes back; returns the number of
/// instructions and retirements. Ids count from 1 and retire ids number retired (not flushed)
/// instructions from 1 (CV-KANATA-3); the log starts at `C=\t0` (CV-KANATA-3).
fn check_kanata(text: &str) -> (usize, usize) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("Kanata\t0004"));
    assert_eq!(lines.next(), Some("C=\t0"));
    let mut now = 0u64;
    let mut live: HashMap<u64, bool> = HashMap::new();
    let mut next_id = 1;
    let (mut inserted, mut retired, mut committed) = (0, 0, 0u64);
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let num =
            |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("bad number: {line}")) };
        match f[0] {
            "C" => {
                assert_eq!(f.len(), 2, "{line}");
                assert!(num(1) > 0, "zero advance: {line}");
                now += num(1);
            }
            "I" => {
                assert_eq!(f.len(), 4, "{line}");
                assert_eq!(num(1), next_id, "ids in order");
                next_id += 1;
                live.insert(num(1), true);
                inserted += 1;
            }
            "L" | "S" | "E" => {
                assert_eq!(f.len(), 4, "{line}");
                assert_eq!(live.get(&num(1)), Some(&true), "{line}: unknown or retired id");
                assert!(num(2) <= 2, "{line}");
                if f[0] != "L" {
                    assert!(!f[3].is_empty());
                }
            }
            "R" => {
                assert_eq!(f.len(), 4, "{line}");
                assert_eq!(live.insert(num(1), false), Some(true), "{line}: retired twice");
                assert!(num(3) <= 1, "{line}");
                if num(3) == 0 {
                    committed += 1;
                }
                assert_eq!(num(2), committed, "{line}: retire ids number retired instructions");
                retired += 1;
            }
            other => panic!("unknown Kanata command {other:?} in {line:?}"),
        }
    }
    assert!(now > 0 || inserted == 0, "time never moved");
    (inserted, retired)
}

#[test]
fn kanata_follows_the_grammar_and_time_moves_forward() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("small.kanata");
    convert(&data("trace/small.jets"), "kanata", &out, &[]);
    let text = read(&out);
    // add, ld, br, mul; mul never ends.
    assert_eq!(check_kanata(&text), (4, 3));
    assert!(text.contains("R\t3\t0\t1"), "br is flushed:\n{text}");
    assert!(text.contains("S\t1\t1\tstall"), "the stall is on lane 1:\n{text}");
    assert!(text.contains("S\t2\t1\tdcache"), "the stalled child record is on lane 1:\n{text}");
    let out = dir.path().join("rjets.kanata");
    convert(&data("trace/rjets_tests_trace.jets"), "kanata", &out, &[]);
    assert_eq!(check_kanata(&read(&out)), (100, 100));
}

#[test]
fn kanata_needs_records_of_the_chosen_type() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("x.kanata");
    let input = data("trace/small.jets");
    let o = jets(&[
        "convert",
        input.to_str().expect("utf8"),
        "--to",
        "kanata",
        "--record-type",
        "Nope",
        "-o",
        out.to_str().expect("utf8"),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no record has record_type \"Nope\""));
    assert!(!out.exists(), "no half-written output is left behind");
}

/// Decodes a protobuf message into `(field, value)` pairs; `None` when the bytes are not one.
fn decode(mut b: &[u8]) -> Option<Vec<(u64, Wire)>> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut b)?),
            1 => {
                let (v, rest) = b.split_at_checked(8)?;
                b = rest;
                Wire::Fixed64(u64::from_le_bytes(v.try_into().ok()?))
            }
            2 => {
                let len = varint(&mut b)? as usize;
                let (v, rest) = b.split_at_checked(len)?;
                b = rest;
                Wire::Bytes(v.to_vec())
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

#[derive(Debug)]
enum Wire {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
}

/// A readable dump: messages known to nest are decoded, other bytes shown as text.
fn dump(msg: &[(u64, Wire)], nested: &[u64], indent: usize, out: &mut String) {
    for (f, v) in msg {
        let pad = " ".repeat(indent);
        match v {
            Wire::Varint(x) => out.push_str(&format!("{pad}{f}: {x}\n")),
            Wire::Fixed64(x) => out.push_str(&format!("{pad}{f}: {}\n", f64::from_bits(*x))),
            Wire::Bytes(b) if nested.contains(f) => {
                out.push_str(&format!("{pad}{f} {{\n"));
                let inner = decode(b).expect("nested message");
                // TrackDescriptor 60, TrackEvent 11 (> DebugAnnotation 4), InternedData 12
                // (> entries 1, 2), ClockSnapshot 6 (> Clock 1).
                let next: &[u64] = match f {
                    11 => &[4],
                    12 => &[1, 2],
                    6 => &[1],
                    _ => &[],
                };
                dump(&inner, next, indent + 2, out);
                out.push_str(&format!("{pad}}}\n"));
            }
            Wire::Bytes(b) => {
                out.push_str(&format!("{pad}{f}: {:?}\n", String::from_utf8_lossy(b)))
            }
        }
    }
}

#[test]
fn perfetto_snapshot_and_structure() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("small.pftrace");
    convert(&data("trace/small.jets"), "perfetto", &out, &[]);
    let bytes = std::fs::read(&out).expect("read");
    let trace = decode(&bytes).expect("the trace is a protobuf message");
    let mut text = String::new();
    let mut begins: HashMap<u64, i64> = HashMap::new();
    let mut tracks = Vec::new();
    for (f, packet) in &trace {
        assert_eq!(*f, 1, "Trace holds only packets");
        let Wire::Bytes(p) = packet else { panic!("packet is not a message") };
        let fields = decode(p).expect("packet decodes");
        text.push_str("packet {\n");
        dump(&fields, &[60, 11, 12, 6], 2, &mut text);
        text.push_str("}\n");
        for (pf, v) in &fields {
            if let (60, Wire::Bytes(td)) = (pf, v) {
                let td = decode(td).expect("td");
                tracks.extend(td.iter().filter_map(|(k, v)| match (k, v) {
                    (1, Wire::Varint(u)) => Some(*u),
                    _ => None,
                }));
            }
            if let (11, Wire::Bytes(te)) = (pf, v) {
                let te = decode(te).expect("te");
                let get = |n: u64| {
                    te.iter().find_map(|(k, v)| match (k, v) {
                        (k, Wire::Varint(u)) if *k == n => Some(*u),
                        _ => None,
                    })
                };
                let track = get(11).expect("track_uuid");
                assert!(tracks.contains(&track), "track {track} used before its descriptor");
                match get(9) {
                    Some(1) => *begins.entry(track).or_default() += 1,
                    Some(2) => {
                        let n = begins.entry(track).or_default();
                        *n -= 1;
                        assert!(*n >= 0, "slice end without begin on track {track}");
                    }
                    Some(3) => {}
                    other => panic!("unexpected TrackEvent type {other:?}"),
                }
            }
        }
    }
    assert!(begins.values().all(|&n| n == 0), "every slice ends: {begins:?}");
    insta::assert_snapshot!(text);
}

/// Per sequence, packet timestamps never decrease, every track has a name, and slices balance;
/// returns (sequences, track names).
fn check_perfetto_order(bytes: &[u8]) -> (usize, Vec<String>) {
    let trace = decode(bytes).expect("protobuf");
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut depth: HashMap<u64, i64> = HashMap::new();
    for (_, packet) in &trace {
        let Wire::Bytes(p) = packet else { panic!("packet") };
        let fields = decode(p).expect("packet decodes");
        let get = |msg: &[(u64, Wire)], n: u64| {
            msg.iter().find_map(|(k, v)| match v {
                Wire::Varint(u) if *k == n => Some(*u),
                _ => None,
            })
        };
        let seq = get(&fields, 10).expect("sequence id");
        if let Some(ts) = get(&fields, 8) {
            let prev = last.insert(seq, ts).unwrap_or(0);
            assert!(ts >= prev, "sequence {seq}: {ts} after {prev}");
        }
        for (k, v) in &fields {
            match (k, v) {
                (60, Wire::Bytes(td)) => {
                    let td = decode(td).expect("td");
                    let uuid = get(&td, 1).expect("uuid");
                    let name = td.iter().find_map(|(k, v)| match v {
                        Wire::Bytes(b) if *k == 2 => Some(String::from_utf8_lossy(b).into_owned()),
                        _ => None,
                    });
                    names.insert(uuid, name.expect("every track has a name"));
                }
                (11, Wire::Bytes(te)) => {
                    let te = decode(te).expect("te");
                    let track = get(&te, 11).expect("track");
                    assert!(names.contains_key(&track), "track {track} before its descriptor");
                    match get(&te, 9) {
                        Some(1) => *depth.entry(track).or_default() += 1,
                        Some(2) => {
                            let d = depth.entry(track).or_default();
                            *d -= 1;
                            assert!(*d >= 0, "end without begin on {track}");
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0), "unbalanced slices");
    let mut list: Vec<String> = names.into_values().collect();
    list.sort();
    (last.len(), list)
}

/// A trace longer than the Perfetto writer's hold-back buffer, with a core and two threads open
/// from start to end: timestamps still never go back on a sequence (CV-PERFETTO-1), the long
/// records get tracks of their own named after them, and lanes carry core/thread names
/// (CV-NEST-2).
#[test]
fn perfetto_packets_are_in_time_order_and_every_track_is_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("long.jets");
    let t = Trace::create(&input, Metadata::new().clock_frequency_mhz(1000.0)).expect("create");
    let root = t.root("cluster_0", "Cluster").begin_at(0).expect("root");
    let core = root.child("core_0", "Core").begin_at(0).expect("core");
    let threads: Vec<_> = (0..2)
        .map(|i| core.child(format!("thread_{i}"), "Thread").begin_at(0).expect("thread"))
        .collect();
    let n = 8_000u64;
    for i in 0..n {
        let th = &threads[(i % 2) as usize];
        let r = th.child(format!("i{i}"), "Instruction").begin_at(i).expect("insn");
        r.event("F").emit_at(i).expect("F");
        r.end_at(i + 3).expect("end");
    }
    for th in threads {
        th.end_at(n + 10).expect("end");
    }
    core.end_at(n + 10).expect("end");
    root.end_at(n + 10).expect("end");
    t.close().expect("close");
    let out = dir.path().join("long.pftrace");
    convert(&input, "perfetto", &out, &[]);
    let (sequences, names) = check_perfetto_order(&std::fs::read(&out).expect("read"));
    assert_eq!(sequences, 1, "{names:?}");
    for want in ["core_0 (Core)", "thread_0 (Thread)", "thread_1 (Thread)"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // The same trace in Chrome JSON: lanes named after the core and the threads.
    let json = dir.path().join("long.json");
    convert(&input, "chrome", &json, &[]);
    let doc: Value = serde_json::from_str(&read(&json)).expect("json");
    let mut lane_names: HashMap<(u64, u64), String> = HashMap::new();
    for e in doc["traceEvents"].as_array().expect("events") {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            let key = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
            lane_names.insert(key, e["args"]["name"].as_str().expect("name").to_owned());
        }
    }
    let last: Vec<&String> = lane_names.values().collect();
    for want in ["core_0 (Core)", "thread_1 (Thread)"] {
        assert!(last.iter().any(|n| *n == want), "{want} in {last:?}");
    }
}

#[test]
fn dftracer_snapshot() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("small.pfw");
    convert(&data("trace/small.jets"), "dftracer", &out, &[]);
    insta::assert_snapshot!(read(&out));
}

/// Every record as (name, record_type, parent's name, duration or None), sorted; events and
/// annotations as (record name, name).
#[allow(clippy::type_complexity)]
fn shape(
    path: &Path,
) -> (
    Vec<(String, String, Option<String>, Option<u64>)>,
    Vec<(String, String, u64)>,
    Vec<(String, String)>,
) {
    let text = read(path);
    let mut names: HashMap<u64, (String, String, Option<u64>, u64)> = HashMap::new();
    let mut ends: HashMap<u64, u64> = HashMap::new();
    let mut events = Vec::new();
    let mut annotations = Vec::new();
    for l in text.lines() {
        match Line::parse(l).expect("JETS line") {
            Line::Record(r) => {
                names.insert(r.id, (r.name.into(), r.record_type.into(), r.parent_id, r.clk));
            }
            Line::RecordEnd(e) => {
                ends.insert(e.record_id, e.clk);
            }
            Line::Event(e) => events.push((names[&e.record_id].0.clone(), e.name.into(), e.clk)),
            Line::Annotation(a) => annotations.push((names[&a.record_id].0.clone(), a.name.into())),
            _ => {}
        }
    }
    let mut records: Vec<_> = names
        .iter()
        .map(|(id, (n, t, p, s))| {
            (n.clone(), t.clone(), p.map(|p| names[&p].0.clone()), ends.get(id).map(|e| e - s))
        })
        .collect();
    records.sort();
    events.sort();
    annotations.sort();
    (records, events, annotations)
}

#[test]
fn jets_to_dftracer_to_jets_keeps_names_durations_and_nesting() {
    let dir = tempfile::tempdir().expect("tmp");
    for (name, gz) in [("small.jets", false), ("rjets_tests_trace.jets", true)] {
        let input = data(&format!("trace/{name}"));
        let pfw = dir.path().join(if gz { "t.pfw.gz" } else { "t.pfw" });
        convert(&input, "dftracer", &pfw, &[]);
        let back = dir.path().join("back.jets");
        import_dftracer(&pfw, &back);
        let (diagnostics, report) =
            jets_read::validate::validate_bytes(&std::fs::read(&back).expect("read"));
        assert!(report.is_valid(), "{name}: {diagnostics:#?}");
        assert_eq!(shape(&back), shape(&input), "{name}");
        let header = |p: &Path| read(p).lines().next().map(str::to_owned);
        assert_eq!(header(&back), header(&input), "{name}: header metadata comes back");
    }
}

/// DFTracer's readers take `ts`/`dur` as integers in the unit of the leading `CM` event: every
/// duration of a cycle or more stays at least 1, at any clock, and the round trip through
/// `jets import` gives the cycles back exactly (CV-DFT-2).
#[test]
fn dftracer_times_are_integers_no_cycle_becomes_zero_and_round_trip_exactly() {
    let dir = tempfile::tempdir().expect("tmp");
    for mhz in [None, Some(700.0), Some(1000.0), Some(2520.0), Some(4000.0)] {
        let input = dir.path().join("clock.jets");
        let meta = match mhz {
            Some(f) => Metadata::new().clock_frequency_mhz(f),
            None => Metadata::new(),
        };
        let t = Trace::create(&input, meta).expect("create");
        let root = t.root("core", "Core").begin_at(3).expect("root");
        for i in 0..5u64 {
            let r = root.child(format!("i{i}"), "Instruction").begin_at(10 + i).expect("r");
            r.event("F").emit_at(10 + i).expect("e");
            r.end_at(11 + i).expect("end");
        }
        root.end_at(1_000_003).expect("end");
        t.close().expect("close");
        let pfw = dir.path().join("clock.pfw");
        convert(&input, "dftracer", &pfw, &[]);
        let text = read(&pfw);
        let events: Vec<Value> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(events[0]["name"], "CM", "{mhz:?}: the time metric leads");
        assert_eq!(events[0]["args"]["value"], "NS");
        for e in events.iter().filter(|e| e["ph"] == "X" && e["cat"] != "jets_event") {
            assert!(e["ts"].is_u64() && e["dur"].is_u64(), "{mhz:?}: {e}");
            assert!(e["dur"].as_u64() >= Some(1), "{mhz:?}: a cycle became 0: {e}");
        }
        let back = dir.path().join("back.jets");
        import_dftracer(&pfw, &back);
        assert_eq!(shape(&back), shape(&input), "{mhz:?}");
    }
}

#[test]
fn perfetto_links_host_sync_points_with_clock_snapshots() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("sync.jets");
    let t = Trace::create(&input, Metadata::new().clock_frequency_mhz(1000.0)).expect("create");
    let host = t.root("host", "HostProcess").begin_at(0).expect("host");
    for (clk, mono) in [(0u64, 5_000u64), (1000, 9_000)] {
        host.event("HostSync")
            .field("mono_ns", mono)
            .field("real_ns", mono + 1_700_000_000_000_000_000)
            .field("cpu_ns", mono / 2)
            .emit_at(clk)
            .expect("sync");
    }
    host.end_at(1000).expect("end");
    t.close().expect("close");
    let out = dir.path().join("sync.pftrace");
    convert(&input, "perfetto", &out, &[]);
    let trace = decode(&std::fs::read(&out).expect("read")).expect("protobuf");
    let mut snapshots = Vec::new();
    for (_, packet) in &trace {
        let Wire::Bytes(p) = packet else { panic!("packet") };
        for (f, v) in decode(p).expect("packet") {
            if let (6, Wire::Bytes(cs)) = (f, v) {
                let clocks: Vec<(u64, u64)> = decode(&cs)
                    .expect("snapshot")
                    .into_iter()
                    .map(|(_, c)| {
                        let Wire::Bytes(c) = c else { panic!("clock") };
                        let c = decode(&c).expect("clock");
                        let get = |n| {
                            c.iter()
                                .find_map(|(k, v)| match v {
                                    Wire::Varint(x) if *k == n => Some(*x),
                                    _ => None,
                                })
                                .expect("field")
                        };
                        (get(1), get(2))
                    })
                    .collect();
                snapshots.push(clocks);
            }
        }
    }
    // BOOTTIME (the trace's simulated ns), MONOTONIC and REALTIME at each sync point.
    assert_eq!(
        snapshots,
        vec![
            vec![(6, 0), (3, 5_000), (1, 1_700_000_000_000_005_000)],
            vec![(6, 1_000), (3, 9_000), (1, 1_700_000_000_000_009_000)],
        ]
    );
}

#[test]
fn kanata_reorders_lines_written_out_of_time_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("late.jets");
    let t = Trace::create(&input, Metadata::new()).expect("create");
    let core = t.root("core", "Core").begin_at(0).expect("core");
    // The simulator reports the younger instruction first: file order is not time order.
    let b = core.child("b", "Instruction").begin_at(20).expect("b");
    b.event("F").emit_at(20).expect("e");
    let a = core.child("a", "Instruction").begin_at(10).expect("a");
    a.event("F").emit_at(10).expect("e");
    a.event("X").emit_at(15).expect("e");
    b.end_at(25).expect("end");
    a.end_at(18).expect("end");
    core.end_at(30).expect("end");
    t.close().expect("close");
    let out = dir.path().join("late.kanata");
    convert(&input, "kanata", &out, &[]);
    let text = read(&out);
    assert_eq!(check_kanata(&text), (2, 2));
    assert!(text.starts_with("Kanata\t0004\nC=\t0\nC\t10\nI\t1\t"), "{text}");
}

/// The Kanata writer's own refusals (a line further back in time than its reorder buffer
/// reaches, a line on an instruction before the instruction begins) name the input line that
/// caused them, which is not the line being read when the buffer finds out.
#[test]
fn kanata_refusals_name_the_line_that_caused_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let refused = |name: &str, lines: &[String]| {
        let input = dir.path().join(format!("{name}.jets"));
        std::fs::write(&input, lines.join("\n") + "\n").expect("write");
        convert_refused(&input, "kanata", &dir.path().join(format!("{name}.kanata")))
    };
    let header = r#"{"type":"header","version":"2.0","metadata":{}}"#.to_owned();
    let insn = |id: u64, clk: u64| {
        format!(
            r#"{{"clk":{clk},"type":"record","name":"i{id}","record_type":"Instruction","id":{id},"parent_id":null,"description":""}}"#
        )
    };
    let event = |id: u64, clk: u64| {
        format!(r#"{{"clk":{clk},"type":"event","name":"F","record_id":{id},"description":""}}"#)
    };
    // An event of instruction 1 at cycle 5, before it begins at 10: line 3.
    let err = refused("early", &[header.clone(), insn(1, 10), event(1, 5)]);
    assert!(err.contains("line 3") && err.contains("before its start"), "{err}");
    // Instruction 1 at cycle 1 000 000 and many events after it, then one at cycle 3 on
    // instruction 2, once the buffer has written far past it.
    let mut lines = vec![header, insn(1, 1_000_000), insn(2, 0)];
    lines.extend((0..300_000).map(|i| event(1, 1_000_000 + i)));
    lines.push(event(2, 3));
    let back = lines.len();
    let err = refused("back", &lines);
    assert!(err.contains(&format!("line {back}")) && err.contains("back in time"), "{err}");
}

#[test]
fn bad_input_is_an_error_naming_file_and_line_and_leaves_no_output() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("bad.jets");
    let text = std::fs::read_to_string(data("trace/small.jets")).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[5] = r#"{"clk":4,"type":"record_end","record_id":99}"#;
    std::fs::write(&input, lines.join("\n")).expect("write");
    for to in ["chrome", "perfetto", "kanata", "dftracer"] {
        let out = dir.path().join(format!("out.{to}"));
        let o = jets(&[
            "convert",
            input.to_str().expect("utf8"),
            "--to",
            to,
            "-o",
            out.to_str().expect("utf8"),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        if to == "kanata" {
            // Kanata draws only instructions: an unknown record_end is not its concern.
            assert!(o.status.success(), "{err}");
            continue;
        }
        assert!(!o.status.success(), "{to}");
        assert!(err.contains("bad.jets:6") && err.contains("99"), "{to}: {err}");
        assert!(!out.exists(), "{to}: partial output removed");
    }
}

#[test]
fn compressed_traces_convert_like_plain_ones() {
    let dir = tempfile::tempdir().expect("tmp");
    for ext in ["gz", "zst"] {
        let input = dir.path().join(format!("small.jets.{ext}"));
        small_trace(&input);
        let (plain, packed) = (dir.path().join("plain.json"), dir.path().join("packed.json"));
        convert(&data("trace/small.jets"), "chrome", &plain, &[]);
        convert(&input, "chrome", &packed, &[]);
        assert_eq!(read(&packed), read(&plain), "{ext}");
    }
}

/// A trace that a size limit stopped (CAP-LIM-1) says where in the Chrome and Perfetto exports:
/// one global instant, `capture stops: size limit`, at the last cycle its lines reach (the run,
/// whose end the footer gives, went on past it), instead of the mark at the first cycle.
#[test]
fn exports_mark_where_a_size_limit_stopped_capture() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("limited.jets");
    // 10 000 cycles of three lines, about 0.8 MB: the limit is reached at the first batch.
    captured_pipeline(
        &path,
        Some("limit=64KiB"),
        Metadata::new().clock_frequency_mhz(1000.0),
        10_000,
    );
    let last = common::last_line_clk(&path);
    assert!(last < 9_000, "the limit stopped capture early: the last line at {last}");
    let out = dir.path().join("limited.json");
    convert(&path, "chrome", &out, &[]);
    let doc: Value = serde_json::from_str(&read(&out)).expect("json");
    let marks: Vec<(&str, i128)> = doc["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["s"] == "g")
        .map(|e| (e["name"].as_str().expect("name"), ps(&e["ts"])))
        .collect();
    assert_eq!(marks, [("capture stops: size limit", i128::from(last) * 1000)]);
    let pb = dir.path().join("limited.pftrace");
    convert(&path, "perfetto", &pb, &[]);
    let bytes = std::fs::read(&pb).expect("the Perfetto export");
    let name = b"capture stops: size limit";
    assert!(
        bytes.windows(name.len()).any(|w| w == name),
        "no size limit mark in the Perfetto export"
    );
}

/// A trace of a capture window says so in the Chrome export: global instants at the window's
/// edges, carrying the line `jets stats` prints (CV-CAP-1); a repeated window gets one mark at
/// the first cycle, and a whole run none.
#[test]
fn chrome_marks_where_a_capture_window_begins_and_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (setting, the marks: name and cycle)
    type Case = (Option<&'static str>, &'static [(&'static str, u64)]);
    let cases: [Case; 3] = [
        (Some("clk=100..200"), &[("capture window begins", 100), ("capture window ends", 200)]),
        (Some("clk=100..150;every=300"), &[("capture: a part of the run", 0)]),
        (None, &[]),
    ];
    for (i, (setting, want)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("w{i}.jets"));
        captured_pipeline(&path, setting, Metadata::new().clock_frequency_mhz(1000.0), 1000);
        let out = dir.path().join(format!("w{i}.json"));
        convert(&path, "chrome", &out, &[]);
        let doc: Value = serde_json::from_str(&read(&out)).expect("json");
        let marks: Vec<(String, i128, String)> = doc["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["s"] == "g")
            .map(|e| {
                let text = e["args"]["capture"].as_str().expect("the capture line").to_owned();
                (e["name"].as_str().expect("name").to_owned(), ps(&e["ts"]), text)
            })
            .collect();
        let got: Vec<(&str, i128)> = marks.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
        // 1 cycle = 1 ns at 1000 MHz.
        let want: Vec<(&str, i128)> =
            want.iter().map(|&(n, c)| (n, i128::from(c) * 1000)).collect();
        assert_eq!(got, want, "{setting:?}");
        for (_, _, text) in &marks {
            assert!(text.starts_with(&format!("capture: {}: a PART of the run", setting.unwrap())));
        }
    }
}
