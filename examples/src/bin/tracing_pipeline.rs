//! A toy in-order RISC pipeline instrumented only with `jets::JetsLayer` and `#[jets::record]`.
//!
//! ```text
//! cargo run -p jets-examples --bin tracing_pipeline -- [OUT.jets] [INSTRUCTIONS]
//! ```
//!
//! Every instruction is a record (a `tracing` span made by `#[jets::record]`), each pipeline stage
//! a child record, hazards are `tracing` events, and the retired count is a field recorded late
//! (an annotation). The simulator advances the trace's `SimClock`; the layer reads it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use jets::{Metadata, SimClock, TraceBuilder};
use tracing_subscriber::layer::SubscriberExt;

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    Load,
    Branch,
}

#[derive(Clone, Copy, Debug)]
struct Insn {
    op: Op,
    rd: u8,
    rs1: u8,
    rs2: u8,
}

impl Insn {
    fn mnemonic(&self) -> &'static str {
        match self.op {
            Op::Add => "ADD",
            Op::Load => "LD",
            Op::Branch => "BEQ",
        }
    }
}

struct Cpu {
    clock: SimClock,
    regs: [u64; 8],
    /// The register each in-flight load writes, and the cycle its value is ready.
    pending_load: Option<(u8, u64)>,
    retired: u64,
}

impl Cpu {
    #[jets::record(record_type = "Core", description = "in-order 5-stage core", skip_all,
        unit_id = 0, color = "#3366ff", fields(retired = tracing::field::Empty))]
    fn run(&mut self, program: &[Insn]) {
        for (i, insn) in program.iter().enumerate() {
            self.execute(0x1000 + 4 * i as u64, *insn);
        }
        tracing::Span::current().record("retired", self.retired);
    }

    #[jets::record(record_type = "Instruction", skip(self, insn), display_label = insn.mnemonic(),
        fields(op = ?insn.op, rd = insn.rd), thread_id = u64::from(insn.rd % 2))]
    fn execute(&mut self, pc: u64, insn: Insn) {
        self.stage("IF", 1);
        self.stage("ID", 1);
        if let Some((reg, ready)) = self.pending_load {
            if (reg == insn.rs1 || reg == insn.rs2) && ready > self.clock.now() {
                let stall = ready - self.clock.now();
                tracing::warn!(reg, cycles = stall, jets.icon = "stall", "RAW hazard");
                self.clock.advance(stall);
            }
        }
        let latency = match insn.op {
            Op::Add | Op::Branch => 1,
            Op::Load => 3,
        };
        self.stage("EX", latency);
        let value = self.regs[insn.rs1 as usize].wrapping_add(self.regs[insn.rs2 as usize]);
        match insn.op {
            Op::Load => self.pending_load = Some((insn.rd, self.clock.now() + 4)),
            Op::Branch if value % 3 == 0 => {
                tracing::info!(target_pc = pc + 8, jets.marker_style = "diamond", "Taken")
            }
            _ => {}
        }
        self.regs[insn.rd as usize] = value.wrapping_add(1);
        self.stage("WB", 1);
        self.retired += 1;
    }

    #[jets::record(record_type = "Stage", skip(self), display_label = name)]
    fn stage(&mut self, name: &'static str, cycles: u64) -> u64 {
        self.clock.advance(cycles)
    }
}

fn program(n: usize) -> Vec<Insn> {
    let ops = [Op::Load, Op::Add, Op::Add, Op::Branch];
    (0..n)
        .map(|i| Insn {
            op: ops[i % ops.len()],
            rd: (i % 8) as u8,
            rs1: ((i + 7) % 8) as u8,
            rs2: ((i + 3) % 8) as u8,
        })
        .collect()
}

fn main() -> anyhow::Result<ExitCode> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "tracing_pipeline.jets".to_owned()));
    let n: usize = match args.next() {
        Some(text) => text.parse().with_context(|| format!("instruction count {text:?}"))?,
        None => 12,
    };
    let clock = SimClock::new();
    let meta = Metadata::new().hardware_model("Toy5").architecture("RISC Pipeline");
    let trace = TraceBuilder::new()
        .clock(clock.clone())
        .create(&out, meta.clock_frequency_mhz(1000.0))
        .with_context(|| format!("creating {}", out.display()))?;
    let layer = jets::JetsLayer::new(trace.clone());
    let errors = layer.errors();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let mut cpu = Cpu { clock, regs: [0; 8], pending_load: None, retired: 0 };
        cpu.run(&program(n));
    });
    let summary = trace.close().with_context(|| format!("writing {}", out.display()))?;
    if let Some(e) = errors.first() {
        bail!("{} instrumentation error(s), the first: {e}", errors.count());
    }
    println!(
        "{}: {} records, {} events, {} annotations, last cycle {}",
        out.display(),
        summary.records,
        summary.events,
        summary.annotations,
        summary.capture_end_clk.unwrap_or(0)
    );
    Ok(ExitCode::SUCCESS)
}
