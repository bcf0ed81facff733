//! A tiny assembler with labels, so example programs read like assembly and become real RV32I
//! machine code.
//!
//! ```
//! use jets_examples::pipeline::asm::{Asm, reg::*};
//! let mut a = Asm::new();
//! a.addi(T0, ZERO, 3);
//! a.label("loop");
//! a.addi(T0, T0, -1);
//! a.bne(T0, ZERO, "loop");
//! a.ecall();
//! let words = a.finish().unwrap();
//! assert_eq!(words.len(), 4);
//! ```

use std::collections::HashMap;

use super::isa::{AluOp, Cond, Insn};

/// ABI register names.
pub mod reg {
    #![allow(missing_docs)]
    pub const ZERO: u8 = 0;
    pub const RA: u8 = 1;
    pub const SP: u8 = 2;
    pub const T0: u8 = 5;
    pub const T1: u8 = 6;
    pub const T2: u8 = 7;
    pub const A0: u8 = 10;
    pub const A1: u8 = 11;
    pub const A2: u8 = 12;
    pub const A3: u8 = 13;
    pub const T3: u8 = 28;
    pub const T4: u8 = 29;
    pub const T5: u8 = 30;
    pub const T6: u8 = 31;
}

/// A label that was used but never defined, or defined twice, or a branch out of range.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AsmError {
    /// A branch or jump names a label that is not defined.
    #[error("undefined label {0:?}")]
    Undefined(String),
    /// A label is defined twice.
    #[error("label {0:?} defined twice")]
    Duplicate(String),
    /// The offset does not fit the instruction's immediate.
    #[error("branch to {label:?} at offset {offset} is out of range")]
    OutOfRange {
        /// The target.
        label: String,
        /// The byte offset.
        offset: i64,
    },
}

enum Item {
    Insn(Insn),
    Branch { cond: Cond, rs1: u8, rs2: u8, label: String },
    Jal { rd: u8, label: String },
}

/// Collects instructions and labels; [`Asm::finish`] resolves labels into PC-relative offsets.
#[derive(Default)]
pub struct Asm {
    items: Vec<Item>,
    labels: HashMap<String, usize>,
    duplicate: Option<String>,
}

macro_rules! alu {
    ($($name:ident $namei:ident $op:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), " rd, rs1, rs2`.")]
        pub fn $name(&mut self, rd: u8, rs1: u8, rs2: u8) {
            self.push(Insn::Op { op: AluOp::$op, rd, rs1, rs2 });
        }
        #[doc = concat!("`", stringify!($namei), " rd, rs1, imm`.")]
        pub fn $namei(&mut self, rd: u8, rs1: u8, imm: i32) {
            self.push(Insn::OpImm { op: AluOp::$op, rd, rs1, imm });
        }
    )*};
}

macro_rules! branch {
    ($($name:ident $cond:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), " rs1, rs2, label`.")]
        pub fn $name(&mut self, rs1: u8, rs2: u8, label: &str) {
            self.items.push(Item::Branch { cond: Cond::$cond, rs1, rs2, label: label.to_owned() });
        }
    )*};
}

impl Asm {
    /// An empty program, assembled at address 0.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Appends an instruction.
    pub fn push(&mut self, insn: Insn) {
        self.items.push(Item::Insn(insn));
    }

    /// Defines `name` at the next instruction.
    pub fn label(&mut self, name: &str) {
        if self.labels.insert(name.to_owned(), self.items.len()).is_some() {
            self.duplicate.get_or_insert_with(|| name.to_owned());
        }
    }

    /// Loads a 32-bit constant into `rd` (`lui` + `addi`, or `addi` alone when it fits).
    pub fn li(&mut self, rd: u8, value: i32) {
        if (-2048..2048).contains(&value) {
            self.addi(rd, 0, value);
            return;
        }
        let low = (value << 20) >> 20;
        let high = value.wrapping_sub(low);
        self.push(Insn::Lui { rd, imm: high });
        if low != 0 {
            self.addi(rd, rd, low);
        }
    }

    /// `lw rd, imm(rs1)`.
    pub fn lw(&mut self, rd: u8, imm: i32, rs1: u8) {
        self.push(Insn::Lw { rd, rs1, imm });
    }

    /// `sw rs2, imm(rs1)`.
    pub fn sw(&mut self, rs2: u8, imm: i32, rs1: u8) {
        self.push(Insn::Sw { rs1, rs2, imm });
    }

    /// `jal rd, label` (`j label` is `jal(ZERO, label)`).
    pub fn jal(&mut self, rd: u8, label: &str) {
        self.items.push(Item::Jal { rd, label: label.to_owned() });
    }

    /// `ecall`: halts the simulation.
    pub fn ecall(&mut self) {
        self.push(Insn::Ecall);
    }

    alu!(add addi Add, slt slti Slt, sltu sltiu Sltu, xor xori Xor, or ori Or, and andi And,
         sll slli Sll, srl srli Srl, sra srai Sra);

    /// `sub rd, rs1, rs2`.
    pub fn sub(&mut self, rd: u8, rs1: u8, rs2: u8) {
        self.push(Insn::Op { op: AluOp::Sub, rd, rs1, rs2 });
    }

    branch!(beq Eq, bne Ne, blt Lt, bge Ge, bltu Ltu, bgeu Geu);

    /// The machine code, one word per instruction, starting at address 0.
    pub fn finish(self) -> Result<Vec<u32>, AsmError> {
        if let Some(name) = self.duplicate {
            return Err(AsmError::Duplicate(name));
        }
        let target = |label: &str, at: usize, limit: i64| -> Result<i32, AsmError> {
            let to = *self.labels.get(label).ok_or_else(|| AsmError::Undefined(label.into()))?;
            let offset = (to as i64 - at as i64) * 4;
            if !(-limit..limit).contains(&offset) {
                return Err(AsmError::OutOfRange { label: label.into(), offset });
            }
            Ok(offset as i32)
        };
        self.items
            .iter()
            .enumerate()
            .map(|(at, item)| {
                let insn = match item {
                    Item::Insn(i) => *i,
                    Item::Branch { cond, rs1, rs2, label } => Insn::Branch {
                        cond: *cond,
                        rs1: *rs1,
                        rs2: *rs2,
                        imm: target(label, at, 1 << 12)?,
                    },
                    Item::Jal { rd, label } => {
                        Insn::Jal { rd: *rd, imm: target(label, at, 1 << 20)? }
                    }
                };
                Ok(insn.encode())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::reg::*;
    use super::*;

    #[test]
    fn labels_resolve_backwards_and_forwards() {
        let mut a = Asm::new();
        a.label("top");
        a.beq(T0, T1, "end");
        a.jal(ZERO, "top");
        a.label("end");
        a.ecall();
        let w = a.finish().unwrap();
        assert_eq!(Insn::decode(w[0]), Insn::Branch { cond: Cond::Eq, rs1: T0, rs2: T1, imm: 8 });
        assert_eq!(Insn::decode(w[1]), Insn::Jal { rd: 0, imm: -4 });
    }

    #[test]
    fn li_builds_any_constant() {
        for v in [0, 1, -1, 2047, -2048, 2048, 0x1000, 0x1234_5fff, i32::MIN, i32::MAX] {
            let mut a = Asm::new();
            a.li(T0, v);
            let mut x = 0u32;
            for w in a.finish().unwrap() {
                x = match Insn::decode(w) {
                    Insn::Lui { imm, .. } => imm as u32,
                    Insn::OpImm { op: AluOp::Add, rs1: 0, imm, .. } => imm as u32,
                    Insn::OpImm { op: AluOp::Add, imm, .. } => x.wrapping_add(imm as u32),
                    other => panic!("unexpected {other}"),
                };
            }
            assert_eq!(x as i32, v);
        }
    }

    #[test]
    fn errors_name_the_label() {
        let mut a = Asm::new();
        a.jal(ZERO, "nowhere");
        assert_eq!(a.finish(), Err(AsmError::Undefined("nowhere".into())));
        let mut a = Asm::new();
        a.label("x");
        a.label("x");
        assert_eq!(a.finish(), Err(AsmError::Duplicate("x".into())));
    }
}
