/*
 * avr_trace.c: simavr (the AVR simulator, used as a library) traced through libjets' C API.
 *
 *   avr_trace [--untraced] [--abort-on-fault] [--mcu NAME] [--mhz F] FIRMWARE.elf TRACE.jets
 *
 * --untraced runs without a trace and without the decoder (the memory counters stay 0); --mcu
 * (default atmega328p) and --mhz (default 16) choose the part simavr models.
 *
 * The harness steps simavr one instruction at a time (avr_run) and writes, per executed AVR
 * instruction, an `Instruction` record under the core's `Core` record, named by the mnemonic a
 * small decoder of the opcode gives, with data pc and opcode, from the cycle simavr was at
 * before the instruction to the cycle after it. On it: a `MemRead` or `MemWrite` event for each
 * data-space access its decoded operands make (LD/LDD/LDS, ST/STD/STS, PUSH, POP; the address
 * from the pointer registers before the instruction, the value from the register moved), and an
 * `IoWrite` event for each write to the marker and result registers GPIOR0/GPIOR1, which simavr
 * reports through avr_register_io_write. Interrupts simavr services are `Interrupt` events on the
 * core (vector and return address), from its AVR_INT_ANY "running" IRQ.
 *
 * The firmware writes 1 to GPIOR0 before its kernel and 2 after it: the harness opens a region
 * of interest (jets_roi_begin) after the first marker's instruction and closes it
 * (jets_roi_end) after the second's, so JETS_CAPTURE=roi keeps the kernel. Results leave
 * through GPIOR1, one byte at a time, and are printed as `result ...`.
 *
 * A fault (the firmware jumps outside the flash, simavr reports a crash, or the core stops some
 * other way than simavr's graceful "sleeping with interrupts off") is a `Fault` event on the core
 * with severity `error` (what JETS_CAPTURE="recorder=...;trigger=error" dumps on); the harness
 * then exits with status 3, or with --abort-on-fault calls abort() (SIGABRT, which the flight
 * recorder dumps on too). Counters are printed on one line `counts ...` for the test suite.
 *
 * Build with -DJETS_DISABLE and every libjets call is compiled out (no library needed).
 * Every libjets status is checked: a failing call prints jets_last_error() and exits 2.
 */
#include <jets.h>

#include <sim_avr.h>
#include <sim_core_config.h>
#include <sim_elf.h>
#include <sim_interrupts.h>
#include <sim_io.h>
#include <sim_irq.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Data-space addresses of the registers the firmware talks through (atmega328p and the other
 * megaAVRs of its family). */
#define ADDR_GPIOR0 0x3e
#define ADDR_GPIOR1 0x4a

/* --------------------------------------------------------------------------------------------
 * The decoder: enough of the AVR instruction set to name every opcode avr-gcc emits for an
 * ATmega, and to say which data-space accesses a load, store, push or pop makes.
 * ------------------------------------------------------------------------------------------ */

enum access { ACC_NONE, ACC_READ, ACC_WRITE };
enum pointer { PTR_NONE, PTR_X, PTR_Y, PTR_Z, PTR_SP, PTR_ABS };
enum mode { MODE_PLAIN, MODE_POSTINC, MODE_PREDEC, MODE_DISP };

struct decoded {
    const char *mnemonic;
    unsigned size;        /* bytes: 2, or 4 for LDS/STS/JMP/CALL */
    enum access access;   /* the data-space access it makes, if any */
    enum pointer pointer; /* how its address is formed */
    enum mode mode;
    unsigned reg;  /* the register loaded or stored */
    unsigned disp; /* LDD/STD displacement; LDS/STS address */
};

static const char *const branch_set[8] = {"brcs", "breq", "brmi", "brvs",
                                          "brlt", "brhs", "brts", "brie"};
static const char *const branch_clear[8] = {"brcc", "brne", "brpl", "brvc",
                                            "brge", "brhc", "brtc", "brid"};
static const char *const flag_set[8] = {"sec", "sez", "sen", "sev", "ses", "seh", "set", "sei"};
static const char *const flag_clear[8] = {"clc", "clz", "cln", "clv", "cls", "clh", "clt", "cli"};

static void memop(struct decoded *d, const char *m, enum access a, enum pointer p, enum mode md,
                  unsigned reg) {
    d->mnemonic = m;
    d->access = a;
    d->pointer = p;
    d->mode = md;
    d->reg = reg;
}

/* Decodes the instruction whose first word is `op` and second word (if any) is `next`. */
static struct decoded decode(uint16_t op, uint16_t next) {
    struct decoded d = {"unknown", 2, ACC_NONE, PTR_NONE, MODE_PLAIN, 0, 0};
    const unsigned rd = (op >> 4) & 0x1f;
    const unsigned rr = (op & 0x0f) | ((op >> 5) & 0x10);
    switch (op >> 12) {
    case 0x0:
        if (op == 0x0000)
            d.mnemonic = "nop";
        else if ((op & 0xff00) == 0x0100)
            d.mnemonic = "movw";
        else if ((op & 0xff00) == 0x0200)
            d.mnemonic = "muls";
        else if ((op & 0xff88) == 0x0300)
            d.mnemonic = "mulsu";
        else if ((op & 0xff88) == 0x0308)
            d.mnemonic = "fmul";
        else if ((op & 0xff88) == 0x0380)
            d.mnemonic = "fmuls";
        else if ((op & 0xff88) == 0x0388)
            d.mnemonic = "fmulsu";
        else if ((op & 0x0c00) == 0x0400)
            d.mnemonic = "cpc";
        else if ((op & 0x0c00) == 0x0800)
            d.mnemonic = "sbc";
        else
            d.mnemonic = rd == rr ? "lsl" : "add";
        break;
    case 0x1: {
        static const char *const m[4] = {"cpse", "cp", "sub", "adc"};
        d.mnemonic = m[(op >> 10) & 3];
        if (((op >> 10) & 3) == 3 && rd == rr)
            d.mnemonic = "rol";
        break;
    }
    case 0x2: {
        static const char *const m[4] = {"and", "eor", "or", "mov"};
        d.mnemonic = m[(op >> 10) & 3];
        if (rd == rr && ((op >> 10) & 3) == 0)
            d.mnemonic = "tst";
        if (rd == rr && ((op >> 10) & 3) == 1)
            d.mnemonic = "clr";
        break;
    }
    case 0x3:
        d.mnemonic = "cpi";
        break;
    case 0x4:
        d.mnemonic = "sbci";
        break;
    case 0x5:
        d.mnemonic = "subi";
        break;
    case 0x6:
        d.mnemonic = "ori";
        break;
    case 0x7:
        d.mnemonic = "andi";
        break;
    case 0x8:
    case 0xa: {
        /* LDD/STD Rd, Y+q / Z+q (q = 0: LD/ST Rd, Y / Z) */
        const unsigned q = (op & 7) | ((op >> 7) & 0x18) | ((op >> 8) & 0x20);
        const int store = (op >> 9) & 1;
        const enum pointer p = (op & 8) ? PTR_Y : PTR_Z;
        memop(&d, store ? (q ? "std" : "st") : (q ? "ldd" : "ld"), store ? ACC_WRITE : ACC_READ,
              p, MODE_DISP, rd);
        d.disp = q;
        break;
    }
    case 0x9:
        if ((op & 0x0e00) == 0x0000 || (op & 0x0e00) == 0x0200) {
            const int store = (op >> 9) & 1;
            const enum access a = store ? ACC_WRITE : ACC_READ;
            switch (op & 0xf) {
            case 0x0:
                memop(&d, store ? "sts" : "lds", a, PTR_ABS, MODE_PLAIN, rd);
                d.size = 4;
                d.disp = next;
                break;
            case 0x1:
                memop(&d, store ? "st" : "ld", a, PTR_Z, MODE_POSTINC, rd);
                break;
            case 0x2:
                memop(&d, store ? "st" : "ld", a, PTR_Z, MODE_PREDEC, rd);
                break;
            case 0x4:
                d.mnemonic = store ? "xch" : "lpm";
                break;
            case 0x5:
                d.mnemonic = store ? "las" : "lpm";
                break;
            case 0x6:
                d.mnemonic = store ? "lac" : "elpm";
                break;
            case 0x7:
                d.mnemonic = store ? "lat" : "elpm";
                break;
            case 0x9:
                memop(&d, store ? "st" : "ld", a, PTR_Y, MODE_POSTINC, rd);
                break;
            case 0xa:
                memop(&d, store ? "st" : "ld", a, PTR_Y, MODE_PREDEC, rd);
                break;
            case 0xc:
                memop(&d, store ? "st" : "ld", a, PTR_X, MODE_PLAIN, rd);
                break;
            case 0xd:
                memop(&d, store ? "st" : "ld", a, PTR_X, MODE_POSTINC, rd);
                break;
            case 0xe:
                memop(&d, store ? "st" : "ld", a, PTR_X, MODE_PREDEC, rd);
                break;
            case 0xf:
                memop(&d, store ? "push" : "pop", a, PTR_SP, MODE_PLAIN, rd);
                break;
            default:
                break;
            }
        } else if ((op & 0x0e00) == 0x0400) {
            /* 1001 010x: one-operand ALU ops, flags, jumps, returns */
            if (op == 0x9508)
                d.mnemonic = "ret";
            else if (op == 0x9518)
                d.mnemonic = "reti";
            else if (op == 0x9588)
                d.mnemonic = "sleep";
            else if (op == 0x9598)
                d.mnemonic = "break";
            else if (op == 0x95a8)
                d.mnemonic = "wdr";
            else if (op == 0x95c8 || op == 0x95d8)
                d.mnemonic = op == 0x95c8 ? "lpm" : "elpm";
            else if (op == 0x95e8 || op == 0x95f8)
                d.mnemonic = "spm";
            else if (op == 0x9409 || op == 0x9419)
                d.mnemonic = op == 0x9409 ? "ijmp" : "eijmp";
            else if (op == 0x9509 || op == 0x9519)
                d.mnemonic = op == 0x9509 ? "icall" : "eicall";
            else if ((op & 0xff8f) == 0x9408)
                d.mnemonic = flag_set[(op >> 4) & 7];
            else if ((op & 0xff8f) == 0x9488)
                d.mnemonic = flag_clear[(op >> 4) & 7];
            else if ((op & 0xff0f) == 0x940b)
                d.mnemonic = "des";
            else if ((op & 0x000e) == 0x000c || (op & 0x000e) == 0x000e) {
                d.mnemonic = (op & 0x000e) == 0x000c ? "jmp" : "call";
                d.size = 4;
            } else {
                static const char *const m[16] = {"com", "neg", "swap", "inc",     "unknown", "asr",
                                                  "lsr", "ror", "unknown", "unknown", "dec",
                                                  "unknown", "unknown", "unknown", "unknown",
                                                  "unknown"};
                d.mnemonic = m[op & 0xf];
            }
        } else if ((op & 0x0f00) == 0x0600)
            d.mnemonic = "adiw";
        else if ((op & 0x0f00) == 0x0700)
            d.mnemonic = "sbiw";
        else if ((op & 0x0f00) == 0x0800)
            d.mnemonic = "cbi";
        else if ((op & 0x0f00) == 0x0900)
            d.mnemonic = "sbic";
        else if ((op & 0x0f00) == 0x0a00)
            d.mnemonic = "sbi";
        else if ((op & 0x0f00) == 0x0b00)
            d.mnemonic = "sbis";
        else
            d.mnemonic = "mul";
        break;
    case 0xb:
        d.mnemonic = (op & 0x0800) ? "out" : "in";
        break;
    case 0xc:
        d.mnemonic = "rjmp";
        break;
    case 0xd:
        d.mnemonic = "rcall";
        break;
    case 0xe:
        d.mnemonic = ((op >> 8) & 0xf) == 0xf && (op & 0xf) == 0xf ? "ser" : "ldi";
        break;
    case 0xf:
        if ((op & 0x0c00) == 0x0000)
            d.mnemonic = branch_set[op & 7];
        else if ((op & 0x0c00) == 0x0400)
            d.mnemonic = branch_clear[op & 7];
        else if ((op & 0x0e08) == 0x0800)
            d.mnemonic = "bld";
        else if ((op & 0x0e08) == 0x0a00)
            d.mnemonic = "bst";
        else if ((op & 0x0e08) == 0x0c00)
            d.mnemonic = "sbrc";
        else if ((op & 0x0e08) == 0x0e00)
            d.mnemonic = "sbrs";
        break;
    default:
        break;
    }
    return d;
}

/* --------------------------------------------------------------------------------------------
 * Tracing
 * ------------------------------------------------------------------------------------------ */

static void fail(const char *what) {
    fprintf(stderr, "avr_trace: %s failed: %s (%s)\n", what, jets_last_error(),
            jets_status_name(jets_last_error_code()));
    exit(2);
}
#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != JETS_OK)                                                                     \
            fail(#call);                                                                           \
    } while (0)

struct names {
    jets_str instruction, core, mem_read, mem_write, io_write, interrupt, fault;
    jets_str pc, opcode, addr, value, vector, ret, reason, severity, error;
};

struct counts {
    uint64_t instructions, mem_reads, mem_writes, io_writes, interrupts, roi_instructions, faults;
};

struct sim {
    avr_t *avr;
    int traced;
    jets_trace *t;
    struct names n;
    jets_id core;
    jets_id insn; /* the instruction being executed, or 0 */
    struct counts c;
    int roi_open, roi_request; /* request: +1 open after this instruction, -1 close after it */
    uint8_t results[16];
    unsigned nresults;
    int irq_this_step;
    uint64_t irq_cycle;
};

static jets_str intern(const char *s) {
    jets_str h = jets_intern(s);
    if (h == 0)
        fail("jets_intern");
    return h;
}

/* The interned handle of a mnemonic, cached by the address of the decoder's string literal (so
 * the hot loop takes no lock): open addressing over 128 slots, for about 80 mnemonics. */
static jets_str mnemonic_handle(const char *m) {
    static const char *keys[128];
    static jets_str values[128];
    size_t i = ((uintptr_t)m >> 3) & 127;
    while (keys[i] != NULL && keys[i] != m)
        i = (i + 1) & 127;
    if (keys[i] == NULL) {
        keys[i] = m;
        values[i] = intern(m);
    }
    return values[i];
}

static void event2(struct sim *s, jets_id rec, uint64_t clk, jets_str name, jets_str k1,
                   uint64_t v1, jets_str k2, uint64_t v2) {
    jets_field f[2];
    jets_attrs a = JETS_ATTRS_INIT;
    f[0] = jets_field_u64(k1, v1);
    f[1] = jets_field_u64(k2, v2);
    a.name = name;
    a.fields = f;
    a.field_count = 2;
    CHECK(jets_event_ex(s->t, rec, clk, &a));
}

/* simavr calls this instead of storing to GPIOR0/GPIOR1 (so it stores the value itself). */
static void on_io_write(avr_t *avr, avr_io_addr_t addr, uint8_t v, void *param) {
    struct sim *s = param;
    avr->data[addr] = v;
    s->c.io_writes++;
    if (s->traced)
        event2(s, s->insn ? s->insn : s->core, avr->cycle, s->n.io_write, s->n.addr, addr,
               s->n.value, v);
    if (addr == ADDR_GPIOR0 && v == 1)
        s->roi_request = 1;
    else if (addr == ADDR_GPIOR0 && v == 2)
        s->roi_request = -1;
    else if (addr == ADDR_GPIOR1 && s->nresults < sizeof s->results)
        s->results[s->nresults++] = v;
}

/* simavr raises its AVR_INT_ANY "running" IRQ with the vector number when it services an
 * interrupt (and with 0 when the last one returns). */
static void on_interrupt(avr_irq_t *irq, uint32_t value, void *param) {
    struct sim *s = param;
    (void)irq;
    if (value == 0)
        return;
    s->c.interrupts++;
    s->irq_this_step = 1;
    s->irq_cycle = s->avr->cycle;
    if (s->traced) {
        /* The return address simavr pushed, at SP+1 (high byte first). */
        const uint16_t sp = (uint16_t)(s->avr->data[R_SPL] | (s->avr->data[R_SPH] << 8));
        const uint32_t ret =
            (uint32_t)((s->avr->data[sp + 1] << 8) | s->avr->data[(uint16_t)(sp + 2)]) * 2u;
        event2(s, s->core, s->avr->cycle, s->n.interrupt, s->n.vector, value, s->n.ret, ret);
    }
}

static uint16_t pointer_value(const avr_t *avr, enum pointer p) {
    const unsigned lo = p == PTR_X ? 26 : p == PTR_Y ? 28 : 30;
    return (uint16_t)(avr->data[lo] | (avr->data[lo + 1] << 8));
}

/* The data-space address a decoded load/store/push/pop accesses, from the registers before the
 * instruction runs. */
static uint16_t effective_address(const avr_t *avr, const struct decoded *d) {
    const uint16_t sp = (uint16_t)(avr->data[R_SPL] | (avr->data[R_SPH] << 8));
    switch (d->pointer) {
    case PTR_ABS:
        return (uint16_t)d->disp;
    case PTR_SP:
        return d->access == ACC_WRITE ? sp : (uint16_t)(sp + 1);
    default: {
        const uint16_t p = pointer_value(avr, d->pointer);
        if (d->mode == MODE_PREDEC)
            return (uint16_t)(p - 1);
        if (d->mode == MODE_DISP)
            return (uint16_t)(p + d->disp);
        return p;
    }
    }
}

static void fault(struct sim *s, uint32_t pc, const char *reason, int abort_on_fault) {
    s->c.faults++;
    fprintf(stderr, "avr_trace: FAULT at pc 0x%04" PRIx32 " cycle %" PRIu64 ": %s\n", pc,
            (uint64_t)s->avr->cycle, reason);
    if (s->traced) {
        jets_field f[3];
        jets_attrs a = JETS_ATTRS_INIT;
        f[0] = jets_field_u64(s->n.pc, pc);
        f[1] = jets_field_text(s->n.reason, reason);
        f[2] = jets_field_str(s->n.severity, s->n.error);
        a.name = s->n.fault;
        a.fields = f;
        a.field_count = 3;
        CHECK(jets_event_ex(s->t, s->core, s->avr->cycle, &a));
    }
    if (abort_on_fault) {
        fflush(stdout);
        abort();
    }
}

static void usage(void) {
    fprintf(stderr, "usage: avr_trace [--untraced] [--abort-on-fault] [--mcu NAME] [--mhz F] "
                    "FIRMWARE.elf TRACE.jets\n");
    exit(64);
}

int main(int argc, char **argv) {
    const char *mcu = "atmega328p", *elf = NULL, *path = NULL;
    double mhz = 16.0;
    int abort_on_fault = 0;
    static struct sim s;
    s.traced = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--untraced"))
            s.traced = 0;
        else if (!strcmp(argv[i], "--abort-on-fault"))
            abort_on_fault = 1;
        else if (!strcmp(argv[i], "--mcu") && i + 1 < argc)
            mcu = argv[++i];
        else if (!strcmp(argv[i], "--mhz") && i + 1 < argc)
            mhz = atof(argv[++i]);
        else if (argv[i][0] == '-')
            usage();
        else if (!elf)
            elf = argv[i];
        else if (!path)
            path = argv[i];
        else
            usage();
    }
    if (!elf || (s.traced && !path) || !(mhz > 0))
        usage();

    elf_firmware_t fw;
    memset(&fw, 0, sizeof fw);
    if (elf_read_firmware(elf, &fw) != 0) {
        fprintf(stderr, "avr_trace: cannot read %s\n", elf);
        return 1;
    }
    avr_t *avr = avr_make_mcu_by_name(mcu);
    if (!avr) {
        fprintf(stderr, "avr_trace: simavr knows no MCU %s\n", mcu);
        return 1;
    }
    if (avr_init(avr) != 0) {
        fprintf(stderr, "avr_trace: simavr could not initialize the %s\n", mcu);
        return 1;
    }
    fw.frequency = (uint32_t)(mhz * 1e6);
    avr_load_firmware(avr, &fw);
    s.avr = avr;

    if (s.traced) {
        char meta[160];
        snprintf(meta, sizeof meta,
                 "{\"hardware_model\":\"simavr " CONFIG_SIMAVR_VERSION " %s\","
                 "\"clock_frequency_mhz\":%g}",
                 mcu, mhz);
        CHECK(jets_open(path, meta, &s.t));
        CHECK(jets_install_fatal_signal_flush());
        s.n.instruction = intern("Instruction");
        s.n.core = intern("Core");
        s.n.mem_read = intern("MemRead");
        s.n.mem_write = intern("MemWrite");
        s.n.io_write = intern("IoWrite");
        s.n.interrupt = intern("Interrupt");
        s.n.fault = intern("Fault");
        s.n.pc = intern("pc");
        s.n.opcode = intern("opcode");
        s.n.addr = intern("addr");
        s.n.value = intern("value");
        s.n.vector = intern("vector");
        s.n.ret = intern("return_pc");
        s.n.reason = intern("reason");
        s.n.severity = intern("severity");
        s.n.error = intern("error");
        char data[64];
        snprintf(data, sizeof data, "{\"unit_id\":0,\"flash_bytes\":%" PRIu32 "}",
                 (uint32_t)avr->flashend + 1);
        s.core = jets_record_begin(s.t, 0, avr->cycle, mcu, "Core", NULL, data);
        if (s.core == 0)
            fail("jets_record_begin(core)");
    }
    avr_register_io_write(avr, ADDR_GPIOR0, on_io_write, &s);
    avr_register_io_write(avr, ADDR_GPIOR1, on_io_write, &s);
    avr_irq_t *interrupts = avr_get_interrupt_irq(avr, AVR_INT_ANY);
    if (!interrupts) {
        fprintf(stderr, "avr_trace: simavr gives no interrupt IRQ\n");
        return 1;
    }
    avr_irq_register_notify(interrupts + AVR_INT_IRQ_RUNNING, on_interrupt, &s);

    int state = avr->state;
    uint32_t last_pc = 0;
    for (;;) {
        const uint32_t pc = avr->pc;
        const uint64_t c0 = avr->cycle;
        const int running = state == cpu_Running;
        if (running && pc + 1 > avr->flashend) {
            fault(&s, pc, "the program counter left the flash", abort_on_fault);
            break;
        }
        struct decoded d = {"", 2, ACC_NONE, PTR_NONE, MODE_PLAIN, 0, 0};
        uint16_t addr = 0;
        if (running) {
            s.c.instructions++;
            last_pc = pc;
            if (s.roi_open)
                s.c.roi_instructions++;
        }
        if (running && s.traced) {
            const uint16_t op = (uint16_t)(avr->flash[pc] | (avr->flash[pc + 1] << 8));
            const uint16_t next = pc + 3 <= avr->flashend
                                      ? (uint16_t)(avr->flash[pc + 2] | (avr->flash[pc + 3] << 8))
                                      : 0;
            d = decode(op, next);
            jets_field f[2];
            jets_attrs a = JETS_ATTRS_INIT;
            f[0] = jets_field_u64(s.n.pc, pc);
            f[1] = jets_field_u64(s.n.opcode, d.size == 4 ? ((uint32_t)op << 16) | next : op);
            a.name = mnemonic_handle(d.mnemonic);
            a.record_type = s.n.instruction;
            a.fields = f;
            a.field_count = 2;
            s.insn = jets_record_begin_ex(s.t, s.core, c0, &a);
            if (s.insn == 0)
                fail("jets_record_begin_ex(Instruction)");
            if (d.access != ACC_NONE) {
                addr = effective_address(avr, &d);
                if (d.access == ACC_WRITE) {
                    s.c.mem_writes++;
                    event2(&s, s.insn, c0, s.n.mem_write, s.n.addr, addr, s.n.value,
                           avr->data[d.reg]);
                }
            }
        }
        s.irq_this_step = 0;
        state = avr_run(avr);
        if (s.insn) {
            const uint64_t end = s.irq_this_step ? s.irq_cycle : avr->cycle;
            /* A load's value is in its register once it ran (simavr frees its memory when the
             * program ends, so only while it still runs). */
            if (d.access == ACC_READ && state != cpu_Done) {
                s.c.mem_reads++;
                event2(&s, s.insn, c0, s.n.mem_read, s.n.addr, addr, s.n.value,
                       avr->data[d.reg]);
            }
            CHECK(jets_record_end(s.t, s.insn, end));
            s.insn = 0;
        }
        if (s.roi_request > 0 && !s.roi_open) {
            if (s.traced)
                CHECK(jets_roi_begin(s.t));
            s.roi_open = 1;
        } else if (s.roi_request < 0 && s.roi_open) {
            if (s.traced)
                CHECK(jets_roi_end(s.t));
            s.roi_open = 0;
        }
        s.roi_request = 0;
        if (state == cpu_Done)
            break;
        if (state == cpu_Crashed) {
            fault(&s, last_pc, "simavr reports a crash", abort_on_fault);
            break;
        }
        if (state != cpu_Running && state != cpu_Sleeping) {
            fault(&s, last_pc, "the core stopped", abort_on_fault);
            break;
        }
    }
    const uint64_t cycles = avr->cycle;
    if (s.traced) {
        CHECK(jets_record_end(s.t, s.core, cycles));
        CHECK(jets_close_at(s.t, cycles));
    }

    printf("counts instructions=%" PRIu64 " mem_reads=%" PRIu64 " mem_writes=%" PRIu64
           " io_writes=%" PRIu64 " interrupts=%" PRIu64 " roi_instructions=%" PRIu64
           " faults=%" PRIu64 " cycles=%" PRIu64 " last_pc=%" PRIu32 "\n",
           s.c.instructions, s.c.mem_reads, s.c.mem_writes, s.c.io_writes, s.c.interrupts,
           s.c.roi_instructions, s.c.faults, cycles, last_pc);
    if (s.c.faults)
        return 3;
    if (s.nresults != 5) {
        printf("result MISSING: the firmware reported %u bytes, not 5\n", s.nresults);
        return 1;
    }
    printf("result checksum=%u sorted=%u ticks=%u\n",
           (unsigned)(s.results[0] | (s.results[1] << 8)), (unsigned)s.results[2],
           (unsigned)(s.results[3] | (s.results[4] << 8)));
    return 0;
}
