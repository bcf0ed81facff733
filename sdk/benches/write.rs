//! Writer benchmarks: producer-side cost per call, and end-to-end lines per second to a file.
//! `producer/reference_store_16_words` is the same-run reference for the event's figure: storing
//! the event's 16 ring words alone.
//!
//! Producer-side numbers time only the emitting calls: between timed chunks the bench waits,
//! untimed, for the writer thread to drain the queue, so the chunk never blocks on a full queue.
//! That is the cost a simulator thread pays while the writer keeps up (as it does whenever the
//! simulator emits fewer lines per second than the end-to-end figure).
//!
//! Producer chunks are timed in the emitting thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so
//! that on a shared, loaded machine the time a thread spends preempted is not counted as the
//! call's cost; `JETS_BENCH_WALL=1` times them by the wall clock instead, as earlier versions of
//! this bench did.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};

mod common;
use common::Clock;

/// Lines per timed chunk: well below the queue capacity.
const CHUNK: u64 = 1 << 15;

fn quiet_trace() -> Trace {
    TraceBuilder::new().capacity(1 << 16).writer(std::io::sink(), Metadata::new()).expect("open")
}

type Emit = Arc<dyn Fn(&RecordHandle, u64) + Send + Sync>;

/// Long-lived emitting threads, like a simulator's: each keeps its ring for the whole benchmark.
/// The bench thread is producer 0; `extra` more threads run the same chunk in parallel.
struct Producers {
    root: Arc<RecordHandle>,
    emit: Emit,
    go: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
}

impl Producers {
    /// `foreign_root`: the record every thread emits under is made on a thread of its own, which
    /// has exited, so that no emitting thread has a record of its own open between calls (the
    /// workers of a thread pool making children of another thread's record).
    fn new(trace: &Trace, extra: usize, emit: Emit, foreign_root: bool) -> Producers {
        let root = if foreign_root {
            let trace = trace.clone();
            let made = thread::spawn(move || trace.root("bench", "Bench").begin_at(0));
            Arc::new(made.join().expect("join").expect("root"))
        } else {
            Arc::new(trace.root("bench", "Bench").begin_at(0).expect("root"))
        };
        let (done_tx, done) = mpsc::channel();
        let go = (0..extra)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<u64>();
                let (root, emit, done_tx) = (Arc::clone(&root), Arc::clone(&emit), done_tx.clone());
                thread::spawn(move || {
                    let (clock, origin) = (Clock::from_env(), Instant::now());
                    for n in rx {
                        let start = clock.now(origin);
                        for i in 0..n {
                            emit(&root, i);
                        }
                        let _ = done_tx.send(clock.now(origin) - start);
                    }
                });
                tx
            })
            .collect();
        Producers { root, emit, go, done }
    }

    /// Runs `iters` calls per thread, timing only the emitting chunks; returns the mean per-thread
    /// time, i.e. the cost per call as seen by each simulator thread.
    fn time(&self, trace: &Trace, iters: u64) -> Duration {
        let (clock, origin) = (Clock::from_env(), Instant::now());
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < iters {
            let n = CHUNK.min(iters - done);
            for tx in &self.go {
                tx.send(n).expect("worker alive");
            }
            let start = clock.now(origin);
            for i in 0..n {
                (self.emit)(&self.root, i);
            }
            let mut sum = clock.now(origin) - start;
            for _ in &self.go {
                sum += self.done.recv().expect("worker done");
            }
            total += sum / (self.go.len() as u32 + 1);
            done += n;
            trace.flush().expect("flush");
        }
        total
    }
}

fn producer(c: &mut Criterion) {
    let mut g = c.benchmark_group("producer");
    for threads in [1usize, 2] {
        g.bench_function(BenchmarkId::new("event_two_fields", threads), |b| {
            let trace = quiet_trace();
            let emit: Emit = Arc::new(|r, i| {
                r.event("Execute")
                    .field("a", i)
                    .field("b", i ^ 7)
                    .emit_at(black_box(i + 1))
                    .expect("emit")
            });
            let producers = Producers::new(&trace, threads - 1, emit, false);
            b.iter_custom(|iters| producers.time(&trace, iters));
            drop(producers);
            trace.close().expect("close");
        });
        // The same event with its fields given at once, without a builder.
        g.bench_function(BenchmarkId::new("emit_event_fields_at", threads), |b| {
            let trace = quiet_trace();
            let emit: Emit = Arc::new(|r, i| {
                r.emit_event_fields_at(
                    black_box(i + 1),
                    "Execute",
                    [("a", i.into()), ("b", (i ^ 7).into())],
                )
                .expect("emit")
            });
            let producers = Producers::new(&trace, threads - 1, emit, false);
            b.iter_custom(|iters| producers.time(&trace, iters));
            drop(producers);
            trace.close().expect("close");
        });
        // An event with no data (a stage change), through its builder and without one.
        for (name, builder) in [("event_no_data", true), ("emit_event_at", false)] {
            g.bench_function(BenchmarkId::new(name, threads), |b| {
                let trace = quiet_trace();
                let emit: Emit = match builder {
                    true => {
                        Arc::new(|r, i| r.event_at(black_box(i + 1), "EX").emit().expect("emit"))
                    }
                    false => {
                        Arc::new(|r, i| r.emit_event_at(black_box(i + 1), "EX").expect("emit"))
                    }
                };
                let producers = Producers::new(&trace, threads - 1, emit, false);
                b.iter_custom(|iters| producers.time(&trace, iters));
                drop(producers);
                trace.close().expect("close");
            });
        }
        // A record with two fields begun and ended, through its builder and without one.
        for (name, builder) in [("record_two_fields", true), ("begin_child_fields_at", false)] {
            g.bench_function(BenchmarkId::new(name, threads), |b| {
                let trace = quiet_trace();
                let emit: Emit = match builder {
                    true => Arc::new(|r, i| {
                        let rec = r
                            .child_at(black_box(i), "insn", "Instruction")
                            .field("pc", i)
                            .field("seq", i ^ 7)
                            .begin()
                            .expect("begin");
                        rec.end_at(i + 3).expect("end");
                    }),
                    false => Arc::new(|r, i| {
                        let fields = [("pc", i.into()), ("seq", (i ^ 7).into())];
                        let rec = r
                            .begin_child_fields_at(black_box(i), "insn", "Instruction", fields)
                            .expect("begin");
                        rec.end_at(i + 3).expect("end");
                    }),
                };
                let producers = Producers::new(&trace, threads - 1, emit, false);
                b.iter_custom(|iters| producers.time(&trace, iters));
                drop(producers);
                trace.close().expect("close");
            });
        }
        // Under a record of the thread's own, and under one made on another thread (a worker).
        for (name, foreign_root) in [("record_begin_end", false), ("worker_record_begin_end", true)]
        {
            g.bench_function(BenchmarkId::new(name, threads), |b| {
                let trace = quiet_trace();
                let emit: Emit = Arc::new(|r, i| {
                    let rec = r.child("insn", "Instruction").begin_at(black_box(i)).expect("begin");
                    rec.end_at(i + 3).expect("end");
                });
                let producers = Producers::new(&trace, threads - 1, emit, foreign_root);
                b.iter_custom(|iters| producers.time(&trace, iters));
                drop(producers);
                trace.close().expect("close");
            });
        }
    }
    // The same-run reference beside the event's figure: the 16 words that event takes in its
    // ring (header, cycle, record id, name, two typed fields), made from the loop counter and
    // stored in turn into a 128 KiB buffer, a ring with nobody reading it, with volatile stores
    // so that none is left out. What storing the line alone costs on this machine now: the
    // ratio of the two is what to compare across runs on a shared machine.
    g.bench_function(BenchmarkId::new("reference_store_16_words", 1), |b| {
        const WORDS: usize = 16;
        // Header, cycle, record id, name (pointer, length), two fields (key, tag, value...):
        // the cycle and the values are filled in per event.
        const LINE: [u64; WORDS] =
            [0x0201_0010, 0, 7, 0x1000, 7, 2, 0x2000, 1, 0x10, 0, 0, 0x2008, 1, 0x10, 0, 0];
        let mut ring = vec![0u64; 1 << 14];
        let mask = ring.len() - 1;
        let clock = Clock::from_env();
        b.iter_custom(|iters| {
            let origin = Instant::now();
            let start = clock.now(origin);
            for i in 0..iters {
                let at = (i as usize * WORDS) & mask;
                let clk = black_box(i + 1);
                let mut line = LINE;
                (line[1], line[9], line[14]) = (clk, i, i ^ 7);
                for (k, w) in line.into_iter().enumerate() {
                    // SAFETY: `at + k` is within the buffer (`at` is a multiple of 16 below
                    // its length, a power of two).
                    unsafe { std::ptr::write_volatile(ring.as_mut_ptr().add(at + k), w) };
                }
            }
            clock.now(origin) - start
        });
        black_box(&ring);
    });
    g.finish();
}

fn end_to_end(c: &mut Criterion) {
    const LINES: u64 = 500_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10).throughput(Throughput::Elements(LINES));
    g.bench_function("lines_to_file", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let path = dir.path().join("bench.jets");
                let start = Instant::now();
                let trace = Trace::create(&path, Metadata::new()).expect("create");
                let root = trace.root("bench", "Bench").begin_at(0).expect("root");
                // One record, one end and eight events per instruction: 10 lines.
                for i in 0..LINES / 10 {
                    let clk = i * 4;
                    let rec = root.child("insn", "Instruction").field("pc", i * 4).begin_at(clk);
                    let rec = rec.expect("begin");
                    for stage in 0..8u64 {
                        rec.event("Stage").field("stage", stage).emit_at(clk + stage).expect("ev");
                    }
                    rec.end_at(clk + 8).expect("end");
                }
                drop(root);
                trace.close().expect("close");
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, producer, end_to_end);
criterion_main!(benches);
