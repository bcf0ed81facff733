//! Example programs, assembled into RV32I machine code, each with the check of its result.

use super::asm::{reg::*, Asm, AsmError};
use super::{Machine, DATA_BASE};

/// How a program's result is checked against a computation done in Rust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Data memory from `DATA_BASE` holds `input` sorted, and `a2` holds its (wrapping) sum.
    Sorted {
        /// The unsorted input.
        input: Vec<i32>,
    },
    /// A register holds a value.
    Register {
        /// The register.
        reg: u8,
        /// The expected value.
        value: u32,
    },
}

/// A program: code at address 0, data at [`DATA_BASE`], and how to check the result.
#[derive(Clone, Debug)]
pub struct Program {
    /// A short name.
    pub name: String,
    /// Machine code.
    pub code: Vec<u32>,
    /// Initial data memory words.
    pub data: Vec<u32>,
    /// The result check.
    pub check: Check,
}

/// A wrong result: what was expected and what the machine holds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{program}: wrong result: {what}")]
pub struct WrongResult {
    /// The program.
    pub program: String,
    /// What differs.
    pub what: String,
}

impl Program {
    /// Checks the machine's final state; `Ok` holds a one-line description of what was verified.
    pub fn verify(&self, m: &Machine) -> Result<String, WrongResult> {
        let wrong = |what: String| WrongResult { program: self.name.clone(), what };
        match &self.check {
            Check::Sorted { input } => {
                let mut expected = input.clone();
                expected.sort_unstable();
                let got: Vec<i32> = m.data[..input.len()].iter().map(|w| *w as i32).collect();
                if got != expected {
                    return Err(wrong(format!("memory holds {got:?}, expected {expected:?}")));
                }
                let sum = expected.iter().fold(0i32, |a, v| a.wrapping_add(*v));
                if m.regs[A2 as usize] as i32 != sum {
                    return Err(wrong(format!(
                        "a2 = {}, expected {sum}",
                        m.regs[A2 as usize] as i32
                    )));
                }
                Ok(format!("{} words sorted in memory, checksum a2 = {sum}", input.len()))
            }
            Check::Register { reg, value } => {
                let got = m.regs[*reg as usize];
                if got != *value {
                    return Err(wrong(format!("x{reg} = {got}, expected {value}")));
                }
                Ok(format!("x{reg} = {value}"))
            }
        }
    }
}

/// `n` pseudo-random words in [-1000, 1000), the same for the same `seed`.
pub fn random_words(n: usize, seed: u64) -> Vec<i32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            // xorshift64*: reproducible without a dependency.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            ((x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % 2000) as i32 - 1000
        })
        .collect()
}

/// Bubble sort of `input` in place, then the sum of the sorted words into `a2`.
///
/// The inner loop loads two neighbours and compares them at once (a load-use stall on every
/// iteration), swaps with two stores, and walks the array through the small data cache.
pub fn bubble_sort(input: &[i32]) -> Result<Program, AsmError> {
    let mut a = Asm::new();
    a.li(A0, DATA_BASE as i32);
    a.li(A1, input.len() as i32);
    a.addi(T0, A1, -1);
    a.label("outer");
    a.bge(ZERO, T0, "done");
    a.addi(T1, ZERO, 0);
    a.addi(T2, A0, 0);
    a.label("inner");
    a.bge(T1, T0, "next");
    a.lw(T3, 0, T2);
    a.lw(T4, 4, T2);
    a.bge(T4, T3, "noswap");
    a.sw(T4, 0, T2);
    a.sw(T3, 4, T2);
    a.label("noswap");
    a.addi(T1, T1, 1);
    a.addi(T2, T2, 4);
    a.jal(ZERO, "inner");
    a.label("next");
    a.addi(T0, T0, -1);
    a.jal(ZERO, "outer");
    a.label("done");
    a.addi(T1, ZERO, 0);
    a.addi(T2, A0, 0);
    a.addi(A2, ZERO, 0);
    a.label("sum");
    a.bge(T1, A1, "end");
    a.lw(T3, 0, T2);
    a.add(A2, A2, T3);
    a.addi(T1, T1, 1);
    a.addi(T2, T2, 4);
    a.jal(ZERO, "sum");
    a.label("end");
    a.ecall();
    Ok(Program {
        name: format!("bubble_sort({})", input.len()),
        code: a.finish()?,
        data: input.iter().map(|v| *v as u32).collect(),
        check: Check::Sorted { input: input.to_vec() },
    })
}

/// The `n`-th Fibonacci number (wrapping at 32 bits) into `a0`, with a loop.
pub fn fibonacci(n: u32) -> Result<Program, AsmError> {
    let mut a = Asm::new();
    a.li(A0, n as i32);
    a.addi(T0, ZERO, 0);
    a.addi(T1, ZERO, 1);
    a.label("loop");
    a.beq(A0, ZERO, "end");
    a.add(T2, T0, T1);
    a.addi(T0, T1, 0);
    a.addi(T1, T2, 0);
    a.addi(A0, A0, -1);
    a.jal(ZERO, "loop");
    a.label("end");
    a.addi(A0, T0, 0);
    a.ecall();
    let (mut x, mut y) = (0u32, 1u32);
    for _ in 0..n {
        (x, y) = (y, x.wrapping_add(y));
    }
    Ok(Program {
        name: format!("fibonacci({n})"),
        code: a.finish()?,
        data: Vec::new(),
        check: Check::Register { reg: A0, value: x },
    })
}
