//! `jets convert --to kanata` read the way Konata reads it. Konata is not in a package registry,
//! so `konata` below models its Kanata parser and statistics from the format document
//! (docs/kanata-log-format.md in shioyadan/Konata) and what its parser does with each command
//! (src/core/onikiri_parser.ts, src/core/stats.ts): `C=` is ignored and cycles count from 0 with
//! `C`; `S` closes the lane's open stage; `R` closes every open stage and maps its retire id to the
//! instruction only when it is not a flush; a stage whose start and end cycles are equal is not
//! drawn; the statistics take the last instruction id as "fetched", the last retire id as
//! "committed", the last cycle as "cycles", and IPC = committed / cycles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use jets::{Metadata, Trace};

mod konata {
    use std::collections::HashMap;

    /// A stage as Konata keeps it: `end` 0 while open.
    #[derive(Clone, Debug)]
    pub struct Stage {
        pub name: String,
        pub start: u64,
        pub end: u64,
    }

    #[derive(Clone, Debug, Default)]
    pub struct Op {
        pub tid: u64,
        pub rid: Option<u64>,
        pub flush: bool,
        pub fetched: u64,
        pub retired: Option<u64>,
        pub label: String,
        pub stage_labels: Vec<String>,
        pub lanes: HashMap<String, Vec<Stage>>,
    }

    impl Op {
        /// The stages Konata draws: those lasting at least one cycle.
        pub fn drawn(&self) -> Vec<(String, Stage)> {
            let mut out = Vec::new();
            for (lane, stages) in &self.lanes {
                for s in stages {
                    let end = if s.end == 0 { self.retired.unwrap_or(0) } else { s.end };
                    if end != s.start {
                        out.push((lane.clone(), Stage { end, ..s.clone() }));
                    }
                }
            }
            out
        }

        /// Stages Konata parses but never draws.
        pub fn dropped(&self) -> usize {
            self.lanes.values().map(Vec::len).sum::<usize>() - self.drawn().len()
        }
    }

    #[derive(Debug, Default)]
    pub struct Parsed {
        pub ops: HashMap<u64, Op>,
        pub retired_ops: HashMap<u64, u64>,
        pub last_id: u64,
        pub last_rid: u64,
        pub cycle: u64,
        pub warnings: Vec<String>,
    }

    impl Parsed {
        pub fn ipc(&self) -> f64 {
            self.last_rid as f64 / self.cycle as f64
        }
    }

    pub fn parse(text: &str) -> Parsed {
        let mut p = Parsed::default();
        let mut lines = text.lines();
        assert!(lines.next().is_some_and(|l| l.starts_with("Kanata")), "not a Kanata log");
        let mut active: HashMap<u64, Op> = HashMap::new();
        for (n, line) in lines.enumerate() {
            let a: Vec<&str> = line.split('\t').collect();
            let num = |i: usize| -> u64 {
                a.get(i)
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or_else(|| panic!("line {}: bad number in {line:?}", n + 2))
            };
            match a[0] {
                "C=" => {}
                "C" => p.cycle += num(1),
                "I" | "L" | "S" | "E" | "R" | "W" => {
                    assert_eq!(a.len(), 4, "line {}: {line:?}", n + 2);
                    let id = num(1);
                    if a[0] == "I" {
                        assert!(
                            !active.contains_key(&id) && !p.ops.contains_key(&id),
                            "{id} redefined"
                        );
                        let op = Op { tid: num(3), fetched: p.cycle, ..Op::default() };
                        active.insert(id, op);
                        continue;
                    }
                    let Some(op) = active.get_mut(&id) else {
                        p.warnings.push(format!("line {}: {line:?} on an op not alive", n + 2));
                        continue;
                    };
                    match a[0] {
                        "L" => match num(2) {
                            0 => op.label += a[3],
                            1 => {}
                            _ => op.stage_labels.push(a[3].to_owned()),
                        },
                        "S" => {
                            let lane = op.lanes.entry(a[2].to_owned()).or_default();
                            if let Some(prev) = lane.last_mut().filter(|s| s.end == 0) {
                                prev.end = p.cycle;
                            }
                            lane.push(Stage { name: a[3].to_owned(), start: p.cycle, end: 0 });
                        }
                        "E" => {
                            let lane = op.lanes.get_mut(a[2]).expect("E on an unknown lane");
                            if let Some(s) = lane.iter_mut().rev().find(|s| s.name == a[3]) {
                                s.end = p.cycle;
                            }
                        }
                        "R" => {
                            let mut op = active.remove(&id).expect("alive");
                            op.flush = num(3) == 1;
                            op.rid = Some(num(2));
                            op.retired = Some(p.cycle);
                            for stages in op.lanes.values_mut() {
                                if let Some(s) = stages.last_mut().filter(|s| s.end == 0) {
                                    s.end = p.cycle;
                                }
                            }
                            if !op.flush {
                                p.retired_ops.insert(num(2), id);
                                p.last_rid = p.last_rid.max(num(2));
                            }
                            p.last_id = p.last_id.max(id);
                            p.ops.insert(id, op);
                        }
                        _ => {}
                    }
                }
                other => p.warnings.push(format!("line {}: unknown command {other:?}", n + 2)),
            }
        }
        for (id, op) in active {
            p.last_id = p.last_id.max(id);
            p.ops.insert(id, op);
        }
        p
    }
}

fn jets(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jets")).args(args).output().expect("run jets")
}

fn to_kanata(input: &Path, out: &Path) -> konata::Parsed {
    let o = jets(&[
        "convert",
        input.to_str().expect("utf8"),
        "--to",
        "kanata",
        "-o",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let parsed = konata::parse(&std::fs::read_to_string(out).expect("read"));
    assert!(parsed.warnings.is_empty(), "Konata would warn: {:?}", parsed.warnings);
    parsed
}

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(rel)
}

/// The `jets demo` run: in Konata, committed = retired, IPC = the simulator's own, every retire
/// id maps to an instruction (CV-KANATA-3), flushed instructions are the squashed ones, one
/// thread (CV-KANATA-4), and every stage it parses it also draws (CV-KANATA-5).
#[test]
fn demo_kanata_statistics_equal_the_simulators() {
    use jets_examples::pipeline::{programs, traced};
    let dir = tempfile::tempdir().expect("tmp");
    let trace = dir.path().join("pipeline.jets");
    let program = programs::bubble_sort(&programs::random_words(12, 1)).expect("program");
    let options = traced::Options { host_interval: None, ..traced::Options::default() };
    let outcome = traced::run_to_file(&trace, &program, &options).expect("run");
    let s = &outcome.stats;
    assert!(s.squashed > 0 && s.retired > 0, "{s:?}");

    let k = to_kanata(&trace, &dir.path().join("pipeline.kanata.log"));
    assert_eq!(k.last_rid, s.retired, "Konata's committed instructions");
    assert_eq!(k.cycle, s.cycles, "Konata's cycles");
    assert_eq!(k.ipc(), s.retired as f64 / s.cycles as f64, "Konata's IPC");
    assert_eq!(k.last_id, s.fetched, "Konata's fetched instructions");
    for rid in 1..=k.last_rid {
        let id =
            k.retired_ops.get(&rid).unwrap_or_else(|| panic!("retire id {rid} maps to nothing"));
        assert!(!k.ops[id].flush);
    }
    assert_eq!(k.ops.values().filter(|o| o.flush).count() as u64, s.squashed);
    assert!(k.ops.values().all(|o| o.tid == 0), "a single-threaded core is thread 0");
    let dropped: usize = k.ops.values().map(konata::Op::dropped).sum();
    assert_eq!(dropped, 0, "stages Konata would not draw");
    // The squash is shown on the stage it ended.
    let squashed = k.ops.values().find(|o| o.flush).expect("a flushed op");
    assert!(squashed.stage_labels.iter().any(|l| l.starts_with("Squash")), "{squashed:?}");
}

/// rjets' instructions end in the cycle of their `C` (commit) stage: Konata draws it one cycle
/// long (CV-KANATA-5), and its cycles are the trace's (the first instruction starts at cycle
/// 1000, CV-KANATA-3).
#[test]
fn rjets_commit_stage_is_drawn_and_cycles_are_the_traces() {
    let dir = tempfile::tempdir().expect("tmp");
    let k = to_kanata(&data("trace/rjets_tests_trace.jets"), &dir.path().join("rjets.log"));
    assert_eq!(k.ops.len(), 100);
    assert_eq!(k.last_rid, 100);
    let first = &k.ops[&1];
    assert_eq!(first.fetched, 1000, "Konata's cycle of the first instruction");
    for (id, op) in &k.ops {
        assert_eq!(op.dropped(), 0, "op {id}: {op:?}");
        let drawn = op.drawn();
        let commit = drawn.iter().find(|(_, s)| s.name == "C").expect("C stage drawn");
        assert_eq!(commit.1.end - commit.1.start, 1, "op {id}");
    }
}

/// Four hardware threads under one core: Konata's thread id is the thread, not the Gantt row
/// hint the instructions carry; a `thread_id` set on the Thread record numbers it (CV-KANATA-4).
#[test]
fn thread_ids_come_from_thread_and_core_records() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("smt.jets");
    let t = Trace::create(&input, Metadata::new()).expect("create");
    let core = t.root("core_0", "Core").begin_at(0).expect("core");
    let mut threads = Vec::new();
    for i in 0..4u64 {
        let mut b = core.child(format!("thread_{i}"), "Thread");
        if i == 3 {
            b = b.thread_id(7);
        }
        threads.push(b.begin_at(0).expect("thread"));
    }
    for n in 0..8u64 {
        let th = &threads[(n % 4) as usize];
        // The Gantt row hint: lane 2 for every instruction.
        let r = th.child(format!("i{n}"), "Instruction").thread_id(2).begin_at(n).expect("insn");
        r.event("F").emit_at(n).expect("F");
        r.event("X").emit_at(n + 1).expect("X");
        r.end_at(n + 2).expect("end");
    }
    for th in threads {
        th.end_at(20).expect("end");
    }
    core.end_at(20).expect("end");
    // A second core without threads: its instructions are on the core's thread id.
    let core1 = t.root("core_1", "Core").begin_at(0).expect("core");
    let r = core1.child("j", "Instruction").begin_at(1).expect("insn");
    r.event("F").emit_at(1).expect("F");
    r.end_at(3).expect("end");
    core1.end_at(20).expect("end");
    t.close().expect("close");

    let k = to_kanata(&input, &dir.path().join("smt.log"));
    let mut tids: HashMap<String, u64> = HashMap::new();
    for op in k.ops.values() {
        tids.insert(op.label.clone(), op.tid);
    }
    for n in 0..8u64 {
        let want = [0, 1, 2, 7][(n % 4) as usize];
        assert_eq!(tids[&format!("i{n}")], want, "i{n}: {tids:?}");
    }
    assert_eq!(tids["j"], 1, "the second core");
    assert_eq!(k.cycle, 20, "Konata's cycles end at the end of the trace");
}
