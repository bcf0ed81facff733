// Tiny5: an in-order, 5-stage (IF ID EX MEM WB) RV32I-subset core (tiny5_pkg.sv lists the subset).
//
// * Forwarding into EX from EX/MEM and MEM/WB; the register file is read in ID with a
//   write-back bypass, so WB and ID may use one register in the same cycle.
// * Load-use interlock: when the instruction in ID reads the register a load in EX loads, IF and
//   ID hold for one cycle and EX gets a bubble (`stall`).
// * Branches and JAL resolve in EX: a taken one squashes the two younger instructions, in IF and
//   ID (`flush`), and fetch restarts at the target. ECALL (or an illegal word) in EX squashes them
//   too and stops fetch; the core halts when it retires.
// * Harvard memories, word-addressed, read combinationally; loaded through the load port while
//   `rst` is high.
//
// Every instruction carries its fetch sequence number through the pipeline latches, so the
// testbench can tell, cycle by cycle, which instruction is in which stage (the observation
// ports); retirement is reported with the names of the RISC-V Formal Interface (rvfi_*).
module tiny5
  import tiny5_pkg::*;
#(
    parameter int IMEM_WORDS = 256,
    parameter int DMEM_WORDS = 1024
) (
    input  logic        clk,
    input  logic        rst,
    // Loading port (only while rst is high): word load_addr of the instruction memory
    // (load_imem) or of the data memory. Addresses wrap around a memory's size.
    input  logic        load_we,
    input  logic        load_imem,
    /* verilator lint_off UNUSEDSIGNAL */
    input  logic [31:0] load_addr,
    input  logic [31:0] load_data,
    // Reads a data memory word (word address) for the testbench's result check.
    input  logic [31:0] dbg_addr,
    /* verilator lint_on UNUSEDSIGNAL */
    output logic [31:0] dbg_data,
    output logic        halted,        // an ECALL or illegal word retired: nothing changes any more
    output logic        trap,          // it was an illegal word
    // Observation: the instruction in each stage this cycle, by fetch sequence number.
    output logic        if_valid,
    output logic [31:0] if_pc,
    output logic [31:0] if_seq,
    output logic        id_valid,
    output logic [31:0] id_seq,
    output logic        ex_valid,
    output logic [31:0] ex_seq,
    output logic        mem_valid,
    output logic [31:0] mem_seq,
    output logic        mem_access,    // MEM holds a load or a store, at mem_addr (bytes)
    output logic [31:0] mem_addr,
    output logic        wb_valid,
    output logic [31:0] wb_seq,
    output logic        stall,         // load-use interlock this cycle
    output logic        flush,         // IF and ID are squashed at the end of this cycle
    output logic        flush_halt,    // ... by an ECALL or illegal word (fetch stops)
    output logic [31:0] flush_target,  // ... else fetch restarts here
    // Retirement (RVFI names): the instruction in WB completes this cycle.
    output logic        rvfi_valid,
    output logic [63:0] rvfi_order,
    output logic [31:0] rvfi_insn,
    output logic [31:0] rvfi_pc_rdata,
    output logic [ 4:0] rvfi_rd_addr,
    output logic [31:0] rvfi_rd_wdata,
    output logic        rvfi_trap
);
  localparam int IA = $clog2(IMEM_WORDS);
  localparam int DA = $clog2(DMEM_WORDS);

  logic [31:0] imem[IMEM_WORDS];
  logic [31:0] dmem[DMEM_WORDS];
  logic [31:0] regs[32];

  // IF
  logic [31:0] pc, seq;
  logic        fetch_stop;
  // IF/ID
  logic d_valid;
  logic [31:0] d_pc, d_insn, d_seq;
  // ID/EX
  logic e_valid;
  logic [31:0] e_pc, e_insn, e_seq, e_a, e_b;
  ctrl_t e_c;
  // EX/MEM
  logic m_valid;
  logic [31:0] m_pc, m_insn, m_seq, m_result, m_store;
  ctrl_t m_c;
  // MEM/WB
  logic w_valid;
  logic [31:0] w_pc, w_insn, w_seq, w_result;
  /* verilator lint_off UNUSEDSIGNAL */
  ctrl_t w_c;  // WB needs only what writes the register file and halts
  /* verilator lint_on UNUSEDSIGNAL */

  // ---- ID: decode, register read with the write-back bypass, load-use interlock
  ctrl_t d_c;
  logic [31:0] d_a, d_b;
  always_comb begin
    d_c = decode(d_insn);
    d_a = d_c.rs1 == 5'd0 ? 32'd0 : regs[d_c.rs1];
    d_b = d_c.rs2 == 5'd0 ? 32'd0 : regs[d_c.rs2];
    if (w_valid && w_c.writes_rd && w_c.rd == d_c.rs1) d_a = w_result;
    if (w_valid && w_c.writes_rd && w_c.rd == d_c.rs2) d_b = w_result;
  end
  assign stall = !halted && d_valid && e_valid && e_c.load && e_c.writes_rd &&
                 ((d_c.uses_rs1 && d_c.rs1 == e_c.rd) || (d_c.uses_rs2 && d_c.rs2 == e_c.rd));

  // ---- EX: forwarding (the younger producer wins), ALU, branch resolution
  logic [31:0] x_a, x_b, x_result, x_target;
  logic x_taken, x_halt;
  always_comb begin
    x_a = e_a;
    x_b = e_b;
    if (w_valid && w_c.writes_rd && w_c.rd == e_c.rs1) x_a = w_result;
    if (w_valid && w_c.writes_rd && w_c.rd == e_c.rs2) x_b = w_result;
    // A load in MEM has no data yet; the interlock guarantees EX never needs it.
    if (m_valid && m_c.writes_rd && !m_c.load && m_c.rd == e_c.rs1) x_a = m_result;
    if (m_valid && m_c.writes_rd && !m_c.load && m_c.rd == e_c.rs2) x_b = m_result;
    if (e_c.lui) x_result = e_c.imm;
    else if (e_c.jal) x_result = e_pc + 32'd4;
    else x_result = alu(e_c.alu, x_a, e_c.use_imm ? e_c.imm : x_b);
    x_taken  = e_c.jal || (e_c.branch && branch_taken(e_c.cond, x_a, x_b));
    x_target = e_pc + e_c.imm;
    x_halt   = e_c.ecall || !e_c.legal;
  end
  assign flush = !halted && e_valid && (x_taken || x_halt);
  assign flush_halt = flush && x_halt;
  assign flush_target = x_target;

  // ---- the clock edge
  always_ff @(posedge clk) begin
    if (rst) begin
      pc <= 32'd0;
      seq <= 32'd0;
      fetch_stop <= 1'b0;
      halted <= 1'b0;
      trap <= 1'b0;
      d_valid <= 1'b0;
      e_valid <= 1'b0;
      m_valid <= 1'b0;
      w_valid <= 1'b0;
      if (load_we && load_imem) imem[load_addr[IA-1:0]] <= load_data;
      if (load_we && !load_imem) dmem[load_addr[DA-1:0]] <= load_data;
    end else if (!halted) begin
      // WB
      if (w_valid && w_c.writes_rd) regs[w_c.rd] <= w_result;
      if (w_valid && (w_c.ecall || !w_c.legal)) begin
        halted <= 1'b1;
        trap <= !w_c.legal;
      end
      // MEM -> WB
      if (m_valid && m_c.store) dmem[m_result[DA+1:2]] <= m_store;
      w_valid <= m_valid;
      w_pc <= m_pc;
      w_insn <= m_insn;
      w_seq <= m_seq;
      w_c <= m_c;
      w_result <= m_c.load ? dmem[m_result[DA+1:2]] : m_result;
      // EX -> MEM
      m_valid <= e_valid;
      m_pc <= e_pc;
      m_insn <= e_insn;
      m_seq <= e_seq;
      m_c <= e_c;
      m_result <= x_result;
      m_store <= x_b;
      // ID -> EX: a bubble when ID is squashed or held
      e_valid <= d_valid && !flush && !stall;
      e_pc <= d_pc;
      e_insn <= d_insn;
      e_seq <= d_seq;
      e_c <= d_c;
      e_a <= d_a;
      e_b <= d_b;
      // IF -> ID, and the next fetch
      if (flush) begin
        d_valid <= 1'b0;
        pc <= x_target;
        fetch_stop <= x_halt;
        if (if_valid) seq <= seq + 32'd1;  // the squashed fetch keeps its number
      end else if (!stall) begin
        d_valid <= if_valid;
        d_pc <= pc;
        d_insn <= imem[pc[IA+1:2]];
        d_seq <= seq;
        if (if_valid) begin
          pc <= pc + 32'd4;
          seq <= seq + 32'd1;
        end
      end
    end
  end

  // ---- observation and retirement
  assign dbg_data = dmem[dbg_addr[DA-1:0]];
  assign if_valid = !halted && !fetch_stop;
  assign if_pc = pc;
  assign if_seq = seq;
  assign id_valid = !halted && d_valid;
  assign id_seq = d_seq;
  assign ex_valid = !halted && e_valid;
  assign ex_seq = e_seq;
  assign mem_valid = !halted && m_valid;
  assign mem_seq = m_seq;
  assign mem_access = m_c.load || m_c.store;
  assign mem_addr = m_result;
  assign wb_valid = !halted && w_valid;
  assign wb_seq = w_seq;
  assign rvfi_valid = !halted && w_valid;
  assign rvfi_order = {32'd0, w_seq};
  assign rvfi_insn = w_insn;
  assign rvfi_pc_rdata = w_pc;
  assign rvfi_rd_addr = w_c.writes_rd ? w_c.rd : 5'd0;
  assign rvfi_rd_wdata = w_c.writes_rd ? w_result : 32'd0;
  assign rvfi_trap = !w_c.legal;

endmodule
