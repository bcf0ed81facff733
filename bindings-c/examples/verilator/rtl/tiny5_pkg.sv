// Tiny5's instruction decoder: the RV32I subset the core executes, as control signals.
//
// Subset: LUI, JAL, BEQ/BNE/BLT/BGE, LW, SW, ADDI/SLTI/XORI/ORI/ANDI/SLLI/SRLI,
// ADD/SUB/SLL/SLT/XOR/SRL/OR/AND, and ECALL (halts the core). Any other word is illegal: it
// halts the core with a trap when it reaches write-back.
package tiny5_pkg;

  typedef enum logic [2:0] {
    ALU_ADD, ALU_SUB, ALU_SLL, ALU_SLT, ALU_XOR, ALU_SRL, ALU_OR, ALU_AND
  } alu_op_t;

  typedef struct packed {
    logic        legal;      // in the subset
    logic [4:0]  rd;
    logic [4:0]  rs1;
    logic [4:0]  rs2;
    logic        uses_rs1;   // reads rs1 (for the load-use interlock and forwarding)
    logic        uses_rs2;
    logic        writes_rd;  // writes rd (never x0)
    logic        use_imm;    // the ALU's second operand is `imm`, not rs2
    logic        lui;        // the result is `imm`
    logic [31:0] imm;
    alu_op_t     alu;
    logic        load;
    logic        store;
    logic        branch;
    logic        jal;
    logic        ecall;
    logic [2:0]  cond;       // funct3 of a branch: 000 BEQ, 001 BNE, 100 BLT, 101 BGE
  } ctrl_t;

  localparam logic [6:0] OP_LUI = 7'b0110111, OP_JAL = 7'b1101111, OP_BRANCH = 7'b1100011,
                         OP_LOAD = 7'b0000011, OP_STORE = 7'b0100011, OP_IMM = 7'b0010011,
                         OP_REG = 7'b0110011, OP_SYSTEM = 7'b1110011;

  function automatic ctrl_t decode(logic [31:0] insn);
    ctrl_t c;
    logic [2:0] f3;
    logic [6:0] f7;
    f3 = insn[14:12];
    f7 = insn[31:25];
    c = '0;
    c.rd = insn[11:7];
    c.rs1 = insn[19:15];
    c.rs2 = insn[24:20];
    c.cond = f3;
    case (insn[6:0])
      OP_LUI: begin
        c.legal = 1'b1;
        c.lui = 1'b1;
        c.imm = {insn[31:12], 12'b0};
        c.writes_rd = 1'b1;
      end
      OP_JAL: begin
        c.legal = 1'b1;
        c.jal = 1'b1;
        c.imm = {{12{insn[31]}}, insn[19:12], insn[20], insn[30:21], 1'b0};
        c.writes_rd = 1'b1;
      end
      OP_BRANCH: begin
        c.legal = f3 == 3'b000 || f3 == 3'b001 || f3 == 3'b100 || f3 == 3'b101;
        c.branch = 1'b1;
        c.imm = {{20{insn[31]}}, insn[7], insn[30:25], insn[11:8], 1'b0};
        c.uses_rs1 = 1'b1;
        c.uses_rs2 = 1'b1;
      end
      OP_LOAD: begin
        c.legal = f3 == 3'b010;
        c.load = 1'b1;
        c.imm = {{20{insn[31]}}, insn[31:20]};
        c.use_imm = 1'b1;
        c.uses_rs1 = 1'b1;
        c.writes_rd = 1'b1;
      end
      OP_STORE: begin
        c.legal = f3 == 3'b010;
        c.store = 1'b1;
        c.imm = {{20{insn[31]}}, insn[31:25], insn[11:7]};
        c.use_imm = 1'b1;
        c.uses_rs1 = 1'b1;
        c.uses_rs2 = 1'b1;
      end
      OP_IMM: begin
        c.imm = {{20{insn[31]}}, insn[31:20]};
        c.use_imm = 1'b1;
        c.uses_rs1 = 1'b1;
        c.writes_rd = 1'b1;
        c.alu = alu_op_t'(f3);
        // SLLI/SRLI need funct7 0; SLTIU (011) and SRAI are not in the subset.
        c.legal = f3 != 3'b011 && ((f3 != 3'b001 && f3 != 3'b101) || f7 == 7'b0);
      end
      OP_REG: begin
        c.uses_rs1 = 1'b1;
        c.uses_rs2 = 1'b1;
        c.writes_rd = 1'b1;
        c.alu = (f3 == 3'b000 && f7 == 7'b0100000) ? ALU_SUB : alu_op_t'(f3);
        c.legal = f3 != 3'b011 && (f7 == 7'b0 || (f7 == 7'b0100000 && f3 == 3'b000));
      end
      OP_SYSTEM: begin
        c.legal = insn == 32'h0000_0073;
        c.ecall = 1'b1;
      end
      default: c.legal = 1'b0;
    endcase
    // x0 is never written; an illegal word does nothing but trap.
    if (c.rd == 5'd0 || !c.legal) c.writes_rd = 1'b0;
    if (!c.legal) begin
      c.uses_rs1 = 1'b0;
      c.uses_rs2 = 1'b0;
      c.load = 1'b0;
      c.store = 1'b0;
      c.branch = 1'b0;
      c.jal = 1'b0;
      c.ecall = 1'b0;
    end
    return c;
  endfunction

  function automatic logic [31:0] alu(alu_op_t op, logic [31:0] a, logic [31:0] b);
    case (op)
      ALU_ADD: return a + b;
      ALU_SUB: return a - b;
      ALU_SLL: return a << b[4:0];
      ALU_SLT: return {31'b0, $signed(a) < $signed(b)};
      ALU_XOR: return a ^ b;
      ALU_SRL: return a >> b[4:0];
      ALU_OR:  return a | b;
      default: return a & b;
    endcase
  endfunction

  function automatic logic branch_taken(logic [2:0] cond, logic [31:0] a, logic [31:0] b);
    case (cond)
      3'b000:  return a == b;
      3'b001:  return a != b;
      3'b100:  return $signed(a) < $signed(b);
      default: return $signed(a) >= $signed(b);
    endcase
  endfunction

endpackage
