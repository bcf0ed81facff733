//! The RV32I subset the pipeline runs: real RISC-V encodings, decoded from 32-bit words.
//!
//! Supported: `LUI`, `AUIPC`, `JAL`, `JALR`, the six branches, `LW`, `SW`, the register-immediate
//! and register-register ALU operations of RV32I, and `ECALL` (which halts the simulation). Byte
//! and half-word loads and stores, `FENCE` and CSRs are not modelled: they decode as
//! [`Insn::Illegal`], which stops the simulation with an error if it ever retires.

use std::fmt;

/// An ALU operation (the `funct3`/`funct7` of `OP` and `OP-IMM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AluOp {
    /// `add` / `addi`.
    Add,
    /// `sub` (register form only).
    Sub,
    /// `sll` / `slli`.
    Sll,
    /// `slt` / `slti`.
    Slt,
    /// `sltu` / `sltiu`.
    Sltu,
    /// `xor` / `xori`.
    Xor,
    /// `srl` / `srli`.
    Srl,
    /// `sra` / `srai`.
    Sra,
    /// `or` / `ori`.
    Or,
    /// `and` / `andi`.
    And,
}

impl AluOp {
    /// Applies the operation.
    pub fn apply(self, a: u32, b: u32) -> u32 {
        match self {
            AluOp::Add => a.wrapping_add(b),
            AluOp::Sub => a.wrapping_sub(b),
            AluOp::Sll => a << (b & 31),
            AluOp::Slt => u32::from((a as i32) < (b as i32)),
            AluOp::Sltu => u32::from(a < b),
            AluOp::Xor => a ^ b,
            AluOp::Srl => a >> (b & 31),
            AluOp::Sra => ((a as i32) >> (b & 31)) as u32,
            AluOp::Or => a | b,
            AluOp::And => a & b,
        }
    }

    fn funct3(self) -> u32 {
        match self {
            AluOp::Add | AluOp::Sub => 0,
            AluOp::Sll => 1,
            AluOp::Slt => 2,
            AluOp::Sltu => 3,
            AluOp::Xor => 4,
            AluOp::Srl | AluOp::Sra => 5,
            AluOp::Or => 6,
            AluOp::And => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AluOp::Add => "add",
            AluOp::Sub => "sub",
            AluOp::Sll => "sll",
            AluOp::Slt => "slt",
            AluOp::Sltu => "sltu",
            AluOp::Xor => "xor",
            AluOp::Srl => "srl",
            AluOp::Sra => "sra",
            AluOp::Or => "or",
            AluOp::And => "and",
        }
    }
}

/// A branch condition (`funct3` of `BRANCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// `beq`.
    Eq,
    /// `bne`.
    Ne,
    /// `blt` (signed).
    Lt,
    /// `bge` (signed).
    Ge,
    /// `bltu`.
    Ltu,
    /// `bgeu`.
    Geu,
}

impl Cond {
    /// Whether the branch is taken for operands `a`, `b`.
    pub fn holds(self, a: u32, b: u32) -> bool {
        match self {
            Cond::Eq => a == b,
            Cond::Ne => a != b,
            Cond::Lt => (a as i32) < (b as i32),
            Cond::Ge => (a as i32) >= (b as i32),
            Cond::Ltu => a < b,
            Cond::Geu => a >= b,
        }
    }

    fn funct3(self) -> u32 {
        match self {
            Cond::Eq => 0,
            Cond::Ne => 1,
            Cond::Lt => 4,
            Cond::Ge => 5,
            Cond::Ltu => 6,
            Cond::Geu => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cond::Eq => "beq",
            Cond::Ne => "bne",
            Cond::Lt => "blt",
            Cond::Ge => "bge",
            Cond::Ltu => "bltu",
            Cond::Geu => "bgeu",
        }
    }
}

/// A decoded instruction. Register numbers are 0..=31; immediates are sign-extended.
///
/// Fields carry the RISC-V manual's operand names: `rd`, `rs1`, `rs2`, `imm`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    /// `lui rd, imm` (`imm` is the value placed in `rd`, low 12 bits zero).
    Lui { rd: u8, imm: i32 },
    /// `auipc rd, imm`.
    Auipc { rd: u8, imm: i32 },
    /// `jal rd, offset`.
    Jal { rd: u8, imm: i32 },
    /// `jalr rd, imm(rs1)`.
    Jalr { rd: u8, rs1: u8, imm: i32 },
    /// A conditional branch to `pc + imm`.
    Branch { cond: Cond, rs1: u8, rs2: u8, imm: i32 },
    /// `lw rd, imm(rs1)`.
    Lw { rd: u8, rs1: u8, imm: i32 },
    /// `sw rs2, imm(rs1)`.
    Sw { rs1: u8, rs2: u8, imm: i32 },
    /// Register-immediate ALU operation.
    OpImm { op: AluOp, rd: u8, rs1: u8, imm: i32 },
    /// Register-register ALU operation.
    Op { op: AluOp, rd: u8, rs1: u8, rs2: u8 },
    /// `ecall`: halts the simulation when it retires.
    Ecall,
    /// A word outside the subset.
    Illegal(u32),
}

/// What kind of work an instruction does, for statistics and colors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// ALU operations, `lui`, `auipc`.
    Alu,
    /// `lw`.
    Load,
    /// `sw`.
    Store,
    /// Branches and jumps.
    Control,
    /// `ecall` and illegal words.
    System,
}

fn bits(word: u32, hi: u32, lo: u32) -> u32 {
    (word >> lo) & ((1 << (hi - lo + 1)) - 1)
}

fn sext(value: u32, width: u32) -> i32 {
    let shift = 32 - width;
    ((value << shift) as i32) >> shift
}

impl Insn {
    /// Decodes a 32-bit instruction word.
    pub fn decode(word: u32) -> Insn {
        let rd = bits(word, 11, 7) as u8;
        let rs1 = bits(word, 19, 15) as u8;
        let rs2 = bits(word, 24, 20) as u8;
        let f3 = bits(word, 14, 12);
        let f7 = bits(word, 31, 25);
        let i_imm = sext(bits(word, 31, 20), 12);
        match bits(word, 6, 0) {
            0x37 => Insn::Lui { rd, imm: (word & 0xffff_f000) as i32 },
            0x17 => Insn::Auipc { rd, imm: (word & 0xffff_f000) as i32 },
            0x6f => {
                let imm = bits(word, 31, 31) << 20
                    | bits(word, 19, 12) << 12
                    | bits(word, 20, 20) << 11
                    | bits(word, 30, 21) << 1;
                Insn::Jal { rd, imm: sext(imm, 21) }
            }
            0x67 if f3 == 0 => Insn::Jalr { rd, rs1, imm: i_imm },
            0x63 => {
                let cond = match f3 {
                    0 => Cond::Eq,
                    1 => Cond::Ne,
                    4 => Cond::Lt,
                    5 => Cond::Ge,
                    6 => Cond::Ltu,
                    7 => Cond::Geu,
                    _ => return Insn::Illegal(word),
                };
                let imm = bits(word, 31, 31) << 12
                    | bits(word, 7, 7) << 11
                    | bits(word, 30, 25) << 5
                    | bits(word, 11, 8) << 1;
                Insn::Branch { cond, rs1, rs2, imm: sext(imm, 13) }
            }
            0x03 if f3 == 2 => Insn::Lw { rd, rs1, imm: i_imm },
            0x23 if f3 == 2 => {
                let imm = bits(word, 31, 25) << 5 | bits(word, 11, 7);
                Insn::Sw { rs1, rs2, imm: sext(imm, 12) }
            }
            0x13 => {
                let op = match (f3, f7) {
                    (0, _) => AluOp::Add,
                    (1, 0) => AluOp::Sll,
                    (2, _) => AluOp::Slt,
                    (3, _) => AluOp::Sltu,
                    (4, _) => AluOp::Xor,
                    (5, 0) => AluOp::Srl,
                    (5, 0x20) => AluOp::Sra,
                    (6, _) => AluOp::Or,
                    (7, _) => AluOp::And,
                    _ => return Insn::Illegal(word),
                };
                let imm = if matches!(op, AluOp::Sll | AluOp::Srl | AluOp::Sra) {
                    rs2 as i32
                } else {
                    i_imm
                };
                Insn::OpImm { op, rd, rs1, imm }
            }
            0x33 => {
                let op = match (f3, f7) {
                    (0, 0) => AluOp::Add,
                    (0, 0x20) => AluOp::Sub,
                    (1, 0) => AluOp::Sll,
                    (2, 0) => AluOp::Slt,
                    (3, 0) => AluOp::Sltu,
                    (4, 0) => AluOp::Xor,
                    (5, 0) => AluOp::Srl,
                    (5, 0x20) => AluOp::Sra,
                    (6, 0) => AluOp::Or,
                    (7, 0) => AluOp::And,
                    _ => return Insn::Illegal(word),
                };
                Insn::Op { op, rd, rs1, rs2 }
            }
            0x73 if word == 0x0000_0073 => Insn::Ecall,
            _ => Insn::Illegal(word),
        }
    }

    /// Encodes the instruction (the inverse of [`Insn::decode`]).
    pub fn encode(self) -> u32 {
        let r = |f7: u32, rs2: u8, rs1: u8, f3: u32, rd: u8, opcode: u32| {
            f7 << 25
                | u32::from(rs2) << 20
                | u32::from(rs1) << 15
                | f3 << 12
                | u32::from(rd) << 7
                | opcode
        };
        let i = |imm: i32, rs1: u8, f3: u32, rd: u8, opcode: u32| {
            ((imm as u32) & 0xfff) << 20
                | u32::from(rs1) << 15
                | f3 << 12
                | u32::from(rd) << 7
                | opcode
        };
        match self {
            Insn::Lui { rd, imm } => (imm as u32 & 0xffff_f000) | u32::from(rd) << 7 | 0x37,
            Insn::Auipc { rd, imm } => (imm as u32 & 0xffff_f000) | u32::from(rd) << 7 | 0x17,
            Insn::Jal { rd, imm } => {
                let v = imm as u32;
                bits(v, 20, 20) << 31
                    | bits(v, 10, 1) << 21
                    | bits(v, 11, 11) << 20
                    | bits(v, 19, 12) << 12
                    | u32::from(rd) << 7
                    | 0x6f
            }
            Insn::Jalr { rd, rs1, imm } => i(imm, rs1, 0, rd, 0x67),
            Insn::Branch { cond, rs1, rs2, imm } => {
                let v = imm as u32;
                bits(v, 12, 12) << 31
                    | bits(v, 10, 5) << 25
                    | u32::from(rs2) << 20
                    | u32::from(rs1) << 15
                    | cond.funct3() << 12
                    | bits(v, 4, 1) << 8
                    | bits(v, 11, 11) << 7
                    | 0x63
            }
            Insn::Lw { rd, rs1, imm } => i(imm, rs1, 2, rd, 0x03),
            Insn::Sw { rs1, rs2, imm } => {
                let v = imm as u32;
                bits(v, 11, 5) << 25
                    | u32::from(rs2) << 20
                    | u32::from(rs1) << 15
                    | 2 << 12
                    | bits(v, 4, 0) << 7
                    | 0x23
            }
            Insn::OpImm { op, rd, rs1, imm } => {
                let imm = match op {
                    AluOp::Sra => (imm & 31) | 0x400,
                    AluOp::Sll | AluOp::Srl => imm & 31,
                    _ => imm,
                };
                i(imm, rs1, op.funct3(), rd, 0x13)
            }
            Insn::Op { op, rd, rs1, rs2 } => {
                let f7 = if matches!(op, AluOp::Sub | AluOp::Sra) { 0x20 } else { 0 };
                r(f7, rs2, rs1, op.funct3(), rd, 0x33)
            }
            Insn::Ecall => 0x0000_0073,
            Insn::Illegal(word) => word,
        }
    }

    /// The destination register, if the instruction writes one other than `x0`.
    pub fn rd(self) -> Option<u8> {
        let rd = match self {
            Insn::Lui { rd, .. }
            | Insn::Auipc { rd, .. }
            | Insn::Jal { rd, .. }
            | Insn::Jalr { rd, .. }
            | Insn::Lw { rd, .. }
            | Insn::OpImm { rd, .. }
            | Insn::Op { rd, .. } => rd,
            _ => 0,
        };
        (rd != 0).then_some(rd)
    }

    /// The source registers read (`x0` is never a dependency).
    pub fn sources(self) -> [Option<u8>; 2] {
        let (a, b) = match self {
            Insn::Jalr { rs1, .. } | Insn::Lw { rs1, .. } | Insn::OpImm { rs1, .. } => (rs1, 0),
            Insn::Branch { rs1, rs2, .. }
            | Insn::Sw { rs1, rs2, .. }
            | Insn::Op { rs1, rs2, .. } => (rs1, rs2),
            _ => (0, 0),
        };
        [(a != 0).then_some(a), (b != 0).then_some(b)]
    }

    /// The instruction's class.
    pub fn class(self) -> Class {
        match self {
            Insn::Lw { .. } => Class::Load,
            Insn::Sw { .. } => Class::Store,
            Insn::Jal { .. } | Insn::Jalr { .. } | Insn::Branch { .. } => Class::Control,
            Insn::Ecall | Insn::Illegal(_) => Class::System,
            _ => Class::Alu,
        }
    }

    /// The mnemonic, upper case, as a short Gantt label.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Insn::Lui { .. } => "LUI",
            Insn::Auipc { .. } => "AUIPC",
            Insn::Jal { .. } => "JAL",
            Insn::Jalr { .. } => "JALR",
            Insn::Branch { cond, .. } => match cond {
                Cond::Eq => "BEQ",
                Cond::Ne => "BNE",
                Cond::Lt => "BLT",
                Cond::Ge => "BGE",
                Cond::Ltu => "BLTU",
                Cond::Geu => "BGEU",
            },
            Insn::Lw { .. } => "LW",
            Insn::Sw { .. } => "SW",
            Insn::OpImm { op, .. } => match op {
                AluOp::Add => "ADDI",
                AluOp::Sll => "SLLI",
                AluOp::Slt => "SLTI",
                AluOp::Sltu => "SLTIU",
                AluOp::Xor => "XORI",
                AluOp::Srl => "SRLI",
                AluOp::Sra => "SRAI",
                AluOp::Or => "ORI",
                AluOp::And | AluOp::Sub => "ANDI",
            },
            Insn::Op { op, .. } => match op {
                AluOp::Add => "ADD",
                AluOp::Sub => "SUB",
                AluOp::Sll => "SLL",
                AluOp::Slt => "SLT",
                AluOp::Sltu => "SLTU",
                AluOp::Xor => "XOR",
                AluOp::Srl => "SRL",
                AluOp::Sra => "SRA",
                AluOp::Or => "OR",
                AluOp::And => "AND",
            },
            Insn::Ecall => "ECALL",
            Insn::Illegal(_) => "ILLEGAL",
        }
    }
}

/// Assembly text, e.g. `addi x5, x5, 1` or `lw x6, 4(x7)`.
impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Insn::Lui { rd, imm } => write!(f, "lui x{rd}, {:#x}", (imm as u32) >> 12),
            Insn::Auipc { rd, imm } => write!(f, "auipc x{rd}, {:#x}", (imm as u32) >> 12),
            Insn::Jal { rd, imm } => write!(f, "jal x{rd}, {imm}"),
            Insn::Jalr { rd, rs1, imm } => write!(f, "jalr x{rd}, {imm}(x{rs1})"),
            Insn::Branch { cond, rs1, rs2, imm } => {
                write!(f, "{} x{rs1}, x{rs2}, {imm}", cond.name())
            }
            Insn::Lw { rd, rs1, imm } => write!(f, "lw x{rd}, {imm}(x{rs1})"),
            Insn::Sw { rs1, rs2, imm } => write!(f, "sw x{rs2}, {imm}(x{rs1})"),
            Insn::OpImm { op, rd, rs1, imm } => write!(f, "{}i x{rd}, x{rs1}, {imm}", op.name()),
            Insn::Op { op, rd, rs1, rs2 } => write!(f, "{} x{rd}, x{rs1}, x{rs2}", op.name()),
            Insn::Ecall => f.write_str("ecall"),
            Insn::Illegal(word) => write!(f, ".word {word:#010x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_words_from_the_riscv_spec() {
        // Encodings checked against the RISC-V unprivileged ISA manual's formats.
        assert_eq!(
            Insn::decode(0x0010_0093),
            Insn::OpImm { op: AluOp::Add, rd: 1, rs1: 0, imm: 1 }
        );
        assert_eq!(Insn::decode(0x0020_81b3), Insn::Op { op: AluOp::Add, rd: 3, rs1: 1, rs2: 2 });
        assert_eq!(Insn::decode(0x4020_81b3), Insn::Op { op: AluOp::Sub, rd: 3, rs1: 1, rs2: 2 });
        assert_eq!(Insn::decode(0x0081_2283), Insn::Lw { rd: 5, rs1: 2, imm: 8 });
        assert_eq!(Insn::decode(0x0051_2423), Insn::Sw { rs1: 2, rs2: 5, imm: 8 });
        assert_eq!(
            Insn::decode(0x0020_8463),
            Insn::Branch { cond: Cond::Eq, rs1: 1, rs2: 2, imm: 8 }
        );
        assert_eq!(Insn::decode(0x0100_00ef), Insn::Jal { rd: 1, imm: 16 });
        assert_eq!(
            Insn::decode(0xfff0_0093),
            Insn::OpImm { op: AluOp::Add, rd: 1, rs1: 0, imm: -1 }
        );
        assert_eq!(Insn::decode(0x0000_0073), Insn::Ecall);
        assert_eq!(Insn::decode(0x0000_1537), Insn::Lui { rd: 10, imm: 0x1000 });
        assert!(matches!(Insn::decode(0x0000_0000), Insn::Illegal(0)));
    }

    #[test]
    fn encode_inverts_decode() {
        let cases = [
            Insn::Lui { rd: 7, imm: 0x7fff_f000 },
            Insn::Auipc { rd: 1, imm: -4096 },
            Insn::Jal { rd: 0, imm: -2048 },
            Insn::Jal { rd: 1, imm: 0xf_fffe },
            Insn::Jalr { rd: 0, rs1: 1, imm: -4 },
            Insn::Branch { cond: Cond::Ge, rs1: 31, rs2: 30, imm: -4096 },
            Insn::Branch { cond: Cond::Ltu, rs1: 3, rs2: 4, imm: 4094 },
            Insn::Lw { rd: 9, rs1: 10, imm: -2048 },
            Insn::Sw { rs1: 10, rs2: 11, imm: 2047 },
            Insn::OpImm { op: AluOp::Sra, rd: 2, rs1: 3, imm: 31 },
            Insn::OpImm { op: AluOp::Sll, rd: 2, rs1: 3, imm: 5 },
            Insn::OpImm { op: AluOp::Sltu, rd: 2, rs1: 3, imm: -1 },
            Insn::Op { op: AluOp::Sra, rd: 4, rs1: 5, rs2: 6 },
            Insn::Op { op: AluOp::And, rd: 4, rs1: 5, rs2: 6 },
            Insn::Ecall,
        ];
        for insn in cases {
            assert_eq!(Insn::decode(insn.encode()), insn, "{insn} = {:#010x}", insn.encode());
        }
    }

    #[test]
    fn alu_and_branch_semantics() {
        assert_eq!(AluOp::Sra.apply(0x8000_0000, 4), 0xf800_0000);
        assert_eq!(AluOp::Srl.apply(0x8000_0000, 4), 0x0800_0000);
        assert_eq!(AluOp::Slt.apply(-1i32 as u32, 0), 1);
        assert_eq!(AluOp::Sltu.apply(-1i32 as u32, 0), 0);
        assert!(Cond::Lt.holds(-5i32 as u32, 3));
        assert!(!Cond::Ltu.holds(-5i32 as u32, 3));
        assert_eq!(Insn::decode(0x0020_81b3).to_string(), "add x3, x1, x2");
        assert_eq!(Insn::Sw { rs1: 2, rs2: 5, imm: 8 }.to_string(), "sw x5, 8(x2)");
    }
}
