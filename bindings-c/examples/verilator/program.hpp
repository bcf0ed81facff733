// The program Tiny5 runs, written with a small RV32I assembler: real machine code, each word with
// its disassembly (the instruction records' names in the trace).
#ifndef TINY5_PROGRAM_HPP
#define TINY5_PROGRAM_HPP

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tiny5 {

/** One instruction: its 32-bit word, its disassembly and its class. */
struct Insn {
    std::uint32_t word;
    std::string text;
    const char *kind;  // "alu", "mem", "branch" or "system"
};

/** An assembler for the instructions the program uses; branch targets are labels. */
class Asm {
public:
    void label(const std::string &name) {
        if (!labels_.emplace(name, here()).second) {
            throw std::invalid_argument("label twice: " + name);
        }
    }
    void lui(int rd, std::uint32_t imm20) {
        emit(imm20 << 12 | reg(rd) << 7 | 0x37, "lui", x(rd) + ", " + std::to_string(imm20), "alu");
    }
    void addi(int rd, int rs1, int imm) { op_imm(0, "addi", rd, rs1, imm); }
    void add(int rd, int rs1, int rs2) { op(0, "add", rd, rs1, rs2); }
    void lw(int rd, int imm, int rs1) {
        emit(imm12(imm) << 20 | reg(rs1) << 15 | 2u << 12 | reg(rd) << 7 | 0x03, "lw",
             x(rd) + ", " + std::to_string(imm) + "(" + x(rs1) + ")", "mem");
    }
    void sw(int rs2, int imm, int rs1) {
        std::uint32_t i = imm12(imm);
        emit((i >> 5) << 25 | reg(rs2) << 20 | reg(rs1) << 15 | 2u << 12 | (i & 0x1f) << 7 | 0x23,
             "sw", x(rs2) + ", " + std::to_string(imm) + "(" + x(rs1) + ")", "mem");
    }
    void bne(int rs1, int rs2, const std::string &to) { branch(1, "bne", rs1, rs2, to); }
    void blt(int rs1, int rs2, const std::string &to) { branch(4, "blt", rs1, rs2, to); }
    void ecall() { emit(0x73, "ecall", "", "system"); }

    /** The program, with every label resolved. */
    std::vector<Insn> finish() const {
        std::vector<Insn> out = code_;
        for (const Fixup &f : fixups_) {
            auto at = labels_.find(f.label);
            if (at == labels_.end()) throw std::invalid_argument("no label " + f.label);
            auto off = static_cast<std::uint32_t>(
                static_cast<std::int64_t>(at->second) - static_cast<std::int64_t>(4 * f.index));
            // The B-type immediate's scattered bits.
            out[f.index].word |= (off >> 12 & 1) << 31 | (off >> 5 & 0x3f) << 25 |
                                 (off >> 1 & 0xf) << 8 | (off >> 11 & 1) << 7;
        }
        return out;
    }

private:
    struct Fixup {
        std::size_t index;
        std::string label;
    };
    static std::string x(int r) { return "x" + std::to_string(r); }
    static std::uint32_t reg(int r) {
        if (r < 0 || r > 31) throw std::invalid_argument("no register x" + std::to_string(r));
        return static_cast<std::uint32_t>(r);
    }
    static std::uint32_t imm12(int imm) {
        if (imm < -2048 || imm > 2047) throw std::invalid_argument("immediate out of range");
        return static_cast<std::uint32_t>(imm) & 0xfff;
    }
    std::uint32_t here() const { return static_cast<std::uint32_t>(4 * code_.size()); }
    void emit(std::uint32_t word, const char *mn, const std::string &args, const char *kind) {
        code_.push_back({word, args.empty() ? mn : std::string(mn) + " " + args, kind});
    }
    void op_imm(std::uint32_t f3, const char *mn, int rd, int rs1, int imm) {
        emit(imm12(imm) << 20 | reg(rs1) << 15 | f3 << 12 | reg(rd) << 7 | 0x13, mn,
             x(rd) + ", " + x(rs1) + ", " + std::to_string(imm), "alu");
    }
    void op(std::uint32_t f3, const char *mn, int rd, int rs1, int rs2) {
        emit(reg(rs2) << 20 | reg(rs1) << 15 | f3 << 12 | reg(rd) << 7 | 0x33, mn,
             x(rd) + ", " + x(rs1) + ", " + x(rs2), "alu");
    }
    void branch(std::uint32_t f3, const char *mn, int rs1, int rs2, const std::string &to) {
        fixups_.push_back({code_.size(), to});
        emit(reg(rs2) << 20 | reg(rs1) << 15 | f3 << 12 | 0x63, mn,
             x(rs1) + ", " + x(rs2) + ", " + to, "branch");
    }

    std::vector<Insn> code_;
    std::vector<Fixup> fixups_;
    std::map<std::string, std::uint32_t> labels_;
};

/**
 * Sums the `n` words at data address 0 and finds their maximum (signed); stores the sum at word
 * n and the maximum at word n + 1, then halts. Each iteration has a load-use interlock (the add
 * after the load) and a taken loop branch (two squashed fetches); the maximum's branch is taken
 * or not depending on the data.
 */
inline std::vector<Insn> sum_and_max(int n) {
    if (n < 1 || n > 1000) throw std::invalid_argument("n must be in [1, 1000]");
    Asm a;
    a.addi(1, 0, 0);         // x1: address of the next word
    a.addi(2, 0, n);         // x2: words left
    a.addi(3, 0, 0);         // x3: sum
    a.lui(6, 0x80000);       // x6: maximum so far, starts at INT32_MIN
    a.label("loop");
    a.lw(4, 0, 1);           // x4 = data[i]
    a.add(3, 3, 4);          // load-use: waits one cycle for x4
    a.blt(4, 6, "next");     // not a new maximum
    a.addi(6, 4, 0);
    a.label("next");
    a.addi(1, 1, 4);
    a.addi(2, 2, -1);
    a.bne(2, 0, "loop");
    a.sw(3, 0, 1);           // data[n] = sum
    a.sw(6, 4, 1);           // data[n + 1] = maximum
    a.ecall();
    return a.finish();
}

}  // namespace tiny5

#endif
