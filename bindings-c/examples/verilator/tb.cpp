// Testbench of the Tiny5 RTL core (rtl/tiny5.sv, simulated by Verilator), traced with jets.hpp.
//
// Loads the program of program.hpp and an array of pseudo-random words, runs the core until it
// halts, checks the sum and maximum it stored against the same computation in C++, and writes a
// JETS trace of every cycle:
//
//   core0 (Core)
//     IF ID EX MEM WB (PipelineStage)        a load-use interlock: a Stall record under ID
//     hart0 (Thread)
//       one Instruction record per fetched instruction, named by its disassembly:
//         an event per stage it enters (IF ID EX MEM WB), a Stall event when it is held,
//         ends at retirement, or with status "flushed" after a Squash event when a taken
//         branch (or the halt) squashes it.
//
// The testbench sees the pipeline only through the core's observation ports (which fetch
// sequence number each stage holds, stall, flush, RVFI retirement) and checks they agree with each
// other: every instruction in flight is in some stage each cycle until it retires or is squashed,
// is held only during an interlock, and retires in order.
//
// Usage: tiny5_sim OUT.jets [N] [SEED]   (N words to sum, default 64; SEED default 1)
// Prints the counters, then "result ok ..." (exit 0) or "result WRONG ..." (exit 1).
#include "Vtiny5.h"
#include "program.hpp"

#include <jets.hpp>
#include <verilated.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

enum Stage { IF, ID, EX, MEM, WB, STAGES };
constexpr std::array<const char *, STAGES> kStageNames = {"IF", "ID", "EX", "MEM", "WB"};
constexpr std::array<const char *, STAGES> kStageColors = {"#4e79a7", "#f28e2b", "#e15759",
                                                           "#76b7b2", "#59a14f"};

struct Counters {
    std::uint64_t cycles = 0, fetched = 0, retired = 0, squashed = 0, load_use_stalls = 0,
                  held_cycles = 0, taken_branches = 0;
};

/** The names a cycle's lines use, interned once (jets::str) so the per-cycle calls copy nothing. */
struct Names {
    jets::str core{"core0"}, core_t{"Core"}, hart{"hart0"}, thread_t{"Thread"},
        stage_t{"PipelineStage"}, insn_t{"Instruction"}, stall{"Stall"}, load_use{"load-use"},
        outside{"(outside the program)"}, squash{"Squash"}, branch{"branch"},
        halt{"halt"}, icon_stall{"stall"}, icon_flush{"flush"}, box{"box"}, line{"line"},
        stall_label{"stall"}, stats{"PipelineStats"}, run{"Run"};
    // Field keys (hint keys are ordinary data keys; status and severity come from jets::hint).
    jets::str unit_id{"unit_id"}, thread_id{"thread_id"}, display_label{"display_label"},
        color{"color"}, icon{"icon"},
        marker_style{"marker_style"}, pc{"pc"}, seq{"seq"}, word{"word"}, cause{"cause"},
        target{"target"}, addr{"addr"}, rd{"rd"}, value{"value"}, cycles{"cycles"},
        fetched{"fetched"}, retired{"retired"}, squashed{"squashed"},
        load_use_stalls{"load_use_stalls"}, taken_branches{"taken_branches"}, n{"n"},
        seed{"seed"}, words{"words"};
    std::vector<jets::str> stages;
    std::vector<jets::str> stage_colors;

    Names() {
        for (int s = 0; s < STAGES; s++) {
            stages.emplace_back(kStageNames[s]);
            stage_colors.emplace_back(kStageColors[s]);
        }
    }
};

/** An instruction in flight: its record, the stage it is in and since when. */
struct Inflight {
    jets::record rec;
    std::uint32_t pc;
    Stage stage;
    std::uint64_t since;  // the cycle it entered `stage`
    std::uint64_t seen;   // the last cycle a stage held it
    bool held;            // a Stall event was written for the current hold
};

class Error : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

/** Turns what the observation ports show each cycle into JETS lines. */
class Tracer {
public:
    Tracer(jets::trace &t, const std::vector<tiny5::Insn> &program, int n, unsigned seed)
        : t_(t),
          program_(program),
          core_(t.root(k_.core, k_.core_t, 0,
                       {jets::field(k_.unit_id, 0u), jets::field(k_.display_label, k_.core)})),
          hart_(core_.child(k_.hart, k_.thread_t, 0,
                            {jets::field(k_.thread_id, 0u),
                             jets::field(k_.display_label, k_.hart)})) {
        for (const tiny5::Insn &i : program) {
            insn_names_.emplace_back(i.text);
            kind_colors_.emplace_back(color_of(i.kind));
        }
        core_.annotation(k_.run, {jets::field(k_.n, n), jets::field(k_.seed, seed),
                                  jets::field(k_.words, program.size())});
        for (int s = 0; s < STAGES; s++) {
            units_.push_back(core_.child(
                k_.stages[s], k_.stage_t, 0,
                {jets::field(k_.unit_id, s + 1u), jets::field(k_.thread_id, 0u),
                 jets::field(k_.display_label, k_.stages[s]),
                 jets::field(k_.color, k_.stage_colors[s]), jets::hint(jets::status::running)}));
        }
    }

    /** The cycle `c`, as the core's ports show it before the clock edge that ends it. */
    void cycle(std::uint64_t c, const Vtiny5 &top) {
        t_.set_clock(c);
        const std::array<std::pair<bool, std::uint32_t>, STAGES> at = {{
            {top.if_valid, top.if_seq},
            {top.id_valid, top.id_seq},
            {top.ex_valid, top.ex_seq},
            {top.mem_valid, top.mem_seq},
            {top.wb_valid, top.wb_seq},
        }};
        if (at[IF].first && inflight_.count(at[IF].second) == 0) fetch(c, at[IF].second, top.if_pc);
        for (int s = 0; s < STAGES; s++) {
            if (!at[s].first) continue;
            Inflight &in = find(c, at[s].second, kStageNames[s]);
            in.seen = c;
            if (in.stage != s) {
                enter(c, in, static_cast<Stage>(s), top);
            } else if (in.since < c) {
                hold(c, in, at[s].second);
            }
        }
        for (const auto &[seq, in] : inflight_) {
            if (in.seen != c) {
                throw Error("cycle " + std::to_string(c) + ": instruction #" +
                            std::to_string(seq) + " left the pipeline without retiring");
            }
        }
        if (top.stall) {
            // The interlock as an interval on the ID unit, for the Gantt view.
            counters_.load_use_stalls++;
            units_[ID]
                .child(k_.load_use, k_.stall, c,
                       {jets::hint(jets::status::stalled),
                        jets::field(k_.display_label, k_.stall_label),
                        jets::field(k_.thread_id, 1u)})
                .end(c + 1);
        }
        if (top.flush) {
            if (!top.flush_halt) counters_.taken_branches++;
            for (Stage s : {ID, IF}) {
                if (at[s].first) squash(c + 1, at[s].second, top.flush_halt, top.flush_target);
            }
        }
        if (top.rvfi_valid) retire(c, top);
        stall_before_ = top.stall;
        counters_.cycles = c + 1;
    }

    /** Ends the hardware's records at `end` with the counters; returns them. */
    Counters finish(std::uint64_t end) {
        if (!inflight_.empty()) throw Error("instructions still in flight after the halt");
        const Counters &k = counters_;
        core_.annotation(k_.stats, {jets::field(k_.cycles, k.cycles),
                                    jets::field(k_.fetched, k.fetched),
                                    jets::field(k_.retired, k.retired),
                                    jets::field(k_.squashed, k.squashed),
                                    jets::field(k_.load_use_stalls, k.load_use_stalls),
                                    jets::field(k_.taken_branches, k.taken_branches)});
        hart_.end(end);
        for (jets::record &u : units_) u.end(end);
        core_.end(end);
        return counters_;
    }

private:
    static const char *color_of(const char *kind) {
        std::string k(kind);
        if (k == "mem") return "#f28e2b";
        if (k == "branch") return "#59a14f";
        if (k == "system") return "#b07aa1";
        return "#4e79a7";
    }

    Inflight &find(std::uint64_t c, std::uint32_t seq, const char *stage) {
        auto it = inflight_.find(seq);
        if (it == inflight_.end()) {
            throw Error("cycle " + std::to_string(c) + ": " + stage + " holds instruction #" +
                        std::to_string(seq) + ", which is not in flight");
        }
        return it->second;
    }

    void fetch(std::uint64_t c, std::uint32_t seq, std::uint32_t pc) {
        counters_.fetched++;
        std::size_t i = pc / 4;
        bool known = pc % 4 == 0 && i < program_.size();
        const jets::str &name = known ? insn_names_[i] : k_.outside;
        jets::record rec = known
            ? hart_.child(name, k_.insn_t, c,
                          {jets::field(k_.pc, pc), jets::field(k_.seq, seq),
                           jets::field(k_.word, program_[i].word),
                           jets::field(k_.color, kind_colors_[i])})
            : hart_.child(name, k_.insn_t, c, {jets::field(k_.pc, pc), jets::field(k_.seq, seq)});
        rec.event(k_.stages[IF], c);
        inflight_.emplace(seq, Inflight{std::move(rec), pc, IF, c, c, false});
    }

    void enter(std::uint64_t c, Inflight &in, Stage s, const Vtiny5 &top) {
        in.stage = s;
        in.since = c;
        in.held = false;
        const jets::str &name = k_.stages[s];
        if (s == MEM && top.mem_access) {
            in.rec.event(name, c, {jets::field(k_.addr, top.mem_addr)});
        } else if (s == WB && top.rvfi_rd_addr != 0) {
            in.rec.event(name, c, {jets::field(k_.rd, top.rvfi_rd_addr),
                                   jets::field(k_.value, top.rvfi_rd_wdata)});
        } else {
            in.rec.event(name, c);
        }
    }

    void hold(std::uint64_t c, Inflight &in, std::uint32_t seq) {
        // Only the load-use interlock holds an instruction in this core.
        if (!stall_before_) {
            throw Error("cycle " + std::to_string(c) + ": instruction #" + std::to_string(seq) +
                        " stayed in " + kStageNames[in.stage] + " without an interlock");
        }
        counters_.held_cycles++;
        if (in.held) return;
        in.held = true;
        in.rec.event(k_.stall, c,
                     {jets::field(k_.cause, k_.load_use), jets::hint(jets::severity::warning),
                      jets::field(k_.icon, k_.icon_stall), jets::field(k_.marker_style, k_.box)});
    }

    void squash(std::uint64_t at, std::uint32_t seq, bool halt, std::uint32_t target) {
        auto it = inflight_.find(seq);
        Inflight &in = it->second;
        // Which fields a squash has is known only now: a run-time list.
        std::vector<jets::field_value> f{jets::field(k_.cause, halt ? k_.halt : k_.branch)};
        if (!halt) f.push_back(jets::field(k_.target, target));
        f.push_back(jets::hint(jets::severity::error));
        f.push_back(jets::field(k_.icon, k_.icon_flush));
        f.push_back(jets::field(k_.marker_style, k_.line));
        in.rec.event(k_.squash, at, f);
        // The status on the record_end makes Konata draw a flush instead of a retirement.
        in.rec.end(at, jets::status::flushed);
        inflight_.erase(it);
        counters_.squashed++;
    }

    void retire(std::uint64_t c, const Vtiny5 &top) {
        std::uint64_t order = top.rvfi_order;
        if (order != top.wb_seq || (retired_any_ && order <= last_order_)) {
            throw Error("cycle " + std::to_string(c) + ": retirement out of order (#" +
                        std::to_string(order) + " after #" + std::to_string(last_order_) + ")");
        }
        retired_any_ = true;
        last_order_ = order;
        auto it = inflight_.find(static_cast<std::uint32_t>(order));
        if (it->second.pc != top.rvfi_pc_rdata) throw Error("retired pc differs from fetched pc");
        it->second.rec.end(c + 1);
        inflight_.erase(it);
        counters_.retired++;
    }

    jets::trace &t_;
    const std::vector<tiny5::Insn> &program_;
    Names k_;  // before the records, which its names begin
    jets::record core_, hart_;
    std::vector<jets::record> units_;
    // Per program word: the disassembly (the record's name, which Konata shows) and a color.
    std::vector<jets::str> insn_names_, kind_colors_;
    std::unordered_map<std::uint32_t, Inflight> inflight_;
    Counters counters_;
    bool stall_before_ = false, retired_any_ = false;
    std::uint64_t last_order_ = 0;
};

void tick(Vtiny5 &top) {
    top.clk = 0;
    top.eval();
    top.clk = 1;
    top.eval();
}

std::uint32_t read_word(Vtiny5 &top, std::uint32_t word) {
    top.dbg_addr = word;
    top.eval();
    return top.dbg_data;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        std::fprintf(stderr, "usage: %s OUT.jets [N] [SEED]\n", argv[0]);
        return 2;
    }
    const int n = argc > 2 ? std::atoi(argv[2]) : 64;
    const unsigned seed = argc > 3 ? static_cast<unsigned>(std::strtoul(argv[3], nullptr, 10)) : 1;
    if (n < 1 || n > 1000) {
        std::fprintf(stderr, "tiny5_sim: N must be in [1, 1000]\n");
        return 2;
    }
    const std::vector<tiny5::Insn> program = tiny5::sum_and_max(n);
    // The array, and what the program must compute from it.
    std::vector<std::uint32_t> data(static_cast<std::size_t>(n));
    std::uint32_t x = seed, want_sum = 0;
    std::int32_t want_max = INT32_MIN;
    for (std::uint32_t &d : data) {
        x = x * 1103515245u + 12345u;
        d = static_cast<std::uint32_t>(static_cast<std::int32_t>(x >> 8 & 0xfffff) - 0x80000);
        want_sum += d;
        want_max = std::max(want_max, static_cast<std::int32_t>(d));
    }

    const auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    const auto top = std::make_unique<Vtiny5>(ctx.get(), "tiny5");
    // Reset, loading both memories through the load port.
    top->rst = 1;
    top->load_we = 1;
    for (std::size_t i = 0; i < program.size(); i++) {
        top->load_imem = 1;
        top->load_addr = static_cast<std::uint32_t>(i);
        top->load_data = program[i].word;
        tick(*top);
    }
    for (std::size_t i = 0; i < data.size(); i++) {
        top->load_imem = 0;
        top->load_addr = static_cast<std::uint32_t>(i);
        top->load_data = data[i];
        tick(*top);
    }
    top->load_we = 0;
    tick(*top);
    top->rst = 0;

    char meta[512];
    std::snprintf(meta, sizeof meta,
                  R"({"hardware_model":"Tiny5 RTL: in-order 5-stage RV32I subset",)"
                  R"("architecture":"RV32I subset","clock_frequency_mhz":100,)"
                  R"("simulator":"Verilator %s","program":"sum_and_max","n":%d,"seed":%u})",
                  Verilated::productVersion(), n, seed);
    Counters k;
    try {
        jets::trace trace(argv[1], meta);
        Tracer tracer(trace, program, n, seed);
        const std::uint64_t limit = 20u * static_cast<std::uint64_t>(n) + 100;
        std::uint64_t c = 0;
        for (; !top->halted; c++) {
            if (c == limit) throw Error("no halt within " + std::to_string(limit) + " cycles");
            top->clk = 0;
            top->eval();
            tracer.cycle(c, *top);
            top->clk = 1;
            top->eval();
        }
        k = tracer.finish(c);
        trace.close_at(c);
    } catch (const jets::error &e) {
        std::fprintf(stderr, "tiny5_sim: tracing failed (%d): %s\n", e.code(), e.what());
        return 1;
    } catch (const Error &e) {
        std::fprintf(stderr, "tiny5_sim: the core's ports disagree: %s\n", e.what());
        return 1;
    }
    top->final();

    const std::uint32_t sum = read_word(*top, static_cast<std::uint32_t>(n));
    const auto max = static_cast<std::int32_t>(read_word(*top, static_cast<std::uint32_t>(n) + 1));
    using ull = unsigned long long;
    std::printf("cycles=%llu fetched=%llu retired=%llu squashed=%llu load_use_stalls=%llu "
                "taken_branches=%llu\n",
                ull{k.cycles}, ull{k.fetched}, ull{k.retired}, ull{k.squashed},
                ull{k.load_use_stalls}, ull{k.taken_branches});
    const bool ok = !top->trap && sum == want_sum && max == want_max;
    std::printf("result %s n=%d sum=%d max=%d (expected sum=%d max=%d)\n", ok ? "ok" : "WRONG", n,
                static_cast<std::int32_t>(sum), max, static_cast<std::int32_t>(want_sum), want_max);
    return ok ? 0 : 1;
}
