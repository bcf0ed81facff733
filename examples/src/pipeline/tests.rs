use super::asm::{reg::*, Asm};
use super::programs::{self, Check, Program};
use super::*;

fn program(build: impl FnOnce(&mut Asm), check: Check) -> Program {
    let mut a = Asm::new();
    build(&mut a);
    a.ecall();
    Program { name: "test".into(), code: a.finish().unwrap(), data: vec![7, 9, 11, 13], check }
}

fn run_small(p: &Program) -> (Machine, Stats) {
    run(p, CacheConfig::default(), 10_000).unwrap()
}

#[test]
fn straight_line_code_takes_n_plus_4_cycles() {
    let p = program(
        |a| {
            a.addi(T0, ZERO, 1);
            a.addi(T1, ZERO, 2);
            a.addi(T2, ZERO, 3);
        },
        Check::Register { reg: T2, value: 3 },
    );
    let (m, s) = run_small(&p);
    p.verify(&m).unwrap();
    // 4 instructions (with ecall): the last is fetched at cycle 3 and retires at cycle 7.
    assert_eq!((s.cycles, s.retired), (8, 4));
    // The three instructions fetched behind ecall are squashed when it retires.
    assert_eq!(s.squashed, 3);
    assert_eq!((s.load_use_stalls, s.mem_stall_cycles, s.forwards), (0, 0, 0));
}

#[test]
fn dependent_alu_operations_forward_without_stalls() {
    let p = program(
        |a| {
            a.addi(T0, ZERO, 5);
            a.add(T1, T0, T0); // both operands from MEM
            a.add(T2, T0, T1); // T0 from WB, T1 from MEM
            a.add(T3, T2, T0); // T2 from MEM, T0 from the register file
        },
        Check::Register { reg: T3, value: 20 },
    );
    let (m, s) = run_small(&p);
    p.verify(&m).unwrap();
    assert_eq!(s.forwards, 2 + 2 + 1);
    assert_eq!(s.load_use_stalls, 0);
    assert_eq!(s.cycles, 5 + 4);
}

#[test]
fn load_use_stalls_one_cycle_and_a_cold_miss_costs_the_penalty() {
    let p = program(
        |a| {
            a.li(A0, DATA_BASE as i32); // lui: one instruction
            a.lw(T0, 4, A0);
            a.add(T1, T0, T0);
        },
        Check::Register { reg: T1, value: 18 },
    );
    let (m, s) = run_small(&p);
    p.verify(&m).unwrap();
    assert_eq!(s.load_use_stalls, 1);
    assert_eq!((s.dcache_misses, s.dcache_hits), (1, 0));
    let penalty = CacheConfig::default().miss_penalty;
    assert_eq!(s.mem_stall_cycles, penalty);
    assert_eq!(s.cycles, 4 + 4 + 1 + penalty);
}

#[test]
fn loads_in_one_line_hit_after_the_first_miss() {
    let p = program(
        |a| {
            a.li(A0, DATA_BASE as i32);
            a.lw(T0, 0, A0);
            a.lw(T1, 4, A0);
            a.lw(T2, 12, A0);
            a.lw(T3, 16, A0); // the next line
        },
        Check::Register { reg: T2, value: 13 },
    );
    let (m, s) = run_small(&p);
    p.verify(&m).unwrap();
    assert_eq!((s.dcache_misses, s.dcache_hits), (2, 2));
    assert_eq!(s.load_use_stalls, 0);
}

#[test]
fn a_taken_branch_squashes_two_instructions() {
    let p = program(
        |a| {
            a.addi(T0, ZERO, 1);
            a.beq(ZERO, ZERO, "skip");
            a.addi(T0, ZERO, 2); // squashed in ID
            a.addi(T0, ZERO, 3); // squashed in IF
            a.label("skip");
            a.addi(T1, T0, 10);
        },
        Check::Register { reg: T1, value: 11 },
    );
    let (m, s) = run_small(&p);
    p.verify(&m).unwrap();
    assert_eq!(m.regs[T0 as usize], 1, "squashed instructions must not write back");
    assert_eq!((s.taken_branches, s.branches), (1, 1));
    // 2 on the wrong path, 3 behind ecall.
    assert_eq!(s.squashed, 2 + 3);
    assert_eq!(s.retired, 4);
    assert_eq!(s.cycles, 4 + 4 + 2);
}

#[test]
fn an_untaken_branch_costs_nothing() {
    let p = program(
        |a| {
            a.addi(T0, ZERO, 1);
            a.beq(T0, ZERO, "skip");
            a.addi(T1, ZERO, 2);
            a.label("skip");
        },
        Check::Register { reg: T1, value: 2 },
    );
    let (_, s) = run_small(&p);
    assert_eq!((s.taken_branches, s.branches, s.squashed), (0, 1, 3));
    assert_eq!(s.cycles, 4 + 4);
}

#[test]
fn fibonacci_is_right() {
    for n in [0, 1, 2, 10, 30, 47] {
        let p = programs::fibonacci(n).unwrap();
        let (m, s) = run(&p, CacheConfig::default(), 100_000).unwrap();
        p.verify(&m).unwrap();
        // One taken loop branch per iteration, plus the exit branch.
        assert_eq!(s.taken_branches, u64::from(n) + 1);
    }
}

#[test]
fn bubble_sort_sorts_and_misses() {
    let input = programs::random_words(24, 3);
    let p = programs::bubble_sort(&input).unwrap();
    let (m, s) = run(&p, CacheConfig::default(), 1_000_000).unwrap();
    let verified = p.verify(&m).unwrap();
    assert!(verified.contains("24 words sorted"), "{verified}");
    let n = input.len() as u64;
    let inner = n * (n - 1) / 2;
    // Every inner iteration compares a word right after loading it, and so does the sum loop.
    assert_eq!(s.load_use_stalls, inner + n, "{s:?}");
    // Bubble sort swaps once per inversion; each swap is two stores.
    let inversions = (0..input.len())
        .flat_map(|i| (i + 1..input.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| input[i] > input[j])
        .count() as u64;
    assert_eq!(s.dcache_hits + s.dcache_misses, 2 * inner + n + 2 * inversions, "{s:?}");
    // 96 bytes of data walked through a 64-byte cache: far more than the 6 cold misses.
    assert!(s.dcache_misses > 20, "{s:?}");
    assert_eq!(s.mem_stall_cycles, s.dcache_misses * CacheConfig::default().miss_penalty);
    assert_eq!(s.fetched, s.retired + s.squashed);
    assert_eq!(s.squashed, 2 * s.taken_branches + 3);
}

#[test]
fn a_wrong_result_is_reported() {
    let p = programs::fibonacci(10).unwrap();
    let (mut m, _) = run(&p, CacheConfig::default(), 100_000).unwrap();
    m.regs[A0 as usize] += 1;
    let e = p.verify(&m).unwrap_err();
    assert_eq!(e.to_string(), "fibonacci(10): wrong result: x10 = 56, expected 55");
}

#[test]
fn faults_are_errors_not_panics() {
    let p = program(|a| a.lw(T0, 0, ZERO), Check::Register { reg: 0, value: 0 });
    let e = run(&p, CacheConfig::default(), 1000).unwrap_err();
    assert!(matches!(e, SimError::MemoryFault { pc: 0, addr: 0 }), "{e}");
    let mut a = Asm::new();
    a.label("spin");
    a.jal(ZERO, "spin");
    let p = Program { code: a.finish().unwrap(), ..programs::fibonacci(1).unwrap() };
    assert!(matches!(run(&p, CacheConfig::default(), 500), Err(SimError::CycleLimit(500))));
    let p = Program { code: vec![0xffff_ffff], ..programs::fibonacci(1).unwrap() };
    assert!(matches!(run(&p, CacheConfig::default(), 500), Err(SimError::Illegal { pc: 0, .. })));
}

#[test]
fn the_traced_run_validates_clean_and_is_right() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pipeline.jets");
    let p = programs::bubble_sort(&programs::random_words(12, 1)).unwrap();
    let options = traced::Options::default();
    let out = traced::run_to_file(&path, &p, &options).unwrap();
    assert!(out.verified.contains("12 words sorted"));
    let (untraced, stats) = run(&p, options.cache, options.max_cycles).unwrap();
    p.verify(&untraced).unwrap();
    assert_eq!(out.stats, stats, "tracing must not change the simulation");

    let bytes = std::fs::read(&path).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert!(report.footer);
    assert_eq!(report.open_records, 0);
    let text = String::from_utf8(bytes).unwrap();
    let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count() as u64;
    assert_eq!(count(r#""record_type":"Instruction""#), stats.fetched);
    assert_eq!(count(r#""type":"event","name":"WB""#), stats.retired);
    assert_eq!(count(r#""name":"Squash""#), stats.squashed);
    assert_eq!(count(r#""name":"DCacheMiss""#), stats.dcache_misses);
    assert_eq!(count(r#""record_type":"Refill""#), stats.dcache_misses);
    assert_eq!(count(r#""record_type":"PipelineStage""#), 5);
    assert_eq!(count(r#""record_type":"Phase""#), 3);
    assert!(count(r#""name":"Stall""#) >= stats.load_use_stalls);
    assert_eq!(count(r#""taken_to""#), stats.taken_branches);
    assert_eq!(count(r#""rs1_from""#) + count(r#""rs2_from""#), stats.forwards);
    if cfg!(target_os = "linux") {
        assert!(count(r#""name":"HostSync""#) >= 1, "the host collector writes sync points");
    }
}

/// Pinned, a timed run's simulator runs on the CPU asked for, and the thread has its CPUs back
/// afterwards, untraced and traced alike.
#[test]
fn a_timed_run_pinned_to_a_cpu_runs_there_and_unpins() {
    let Some(cpus) = jets_host::load::allowed_cpus() else {
        eprintln!("NOT CHECKED: threads are pinned on Linux only");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timed.jets");
    let p = programs::bubble_sort(&programs::random_words(12, 1)).unwrap();
    let full = jets::capture::Capture::full();
    std::thread::spawn(move || {
        for &cpu in &cpus {
            for capture in [None, Some(&full)] {
                let run = traced::timed_run(&path, &p, capture, Some(cpu)).unwrap();
                assert_eq!(run.cpu, Some(cpu), "{capture:?}");
                assert_eq!(jets_host::load::allowed_cpus().as_ref(), Some(&cpus), "unpinned");
            }
        }
        let err = traced::timed_run(&path, &p, None, Some(1 << 20)).unwrap_err();
        assert!(err.to_string().contains("no CPU 1048576"), "{err}");
    })
    .join()
    .unwrap();
}
