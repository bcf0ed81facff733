#!/usr/bin/env bash
# The simavr example (bindings-c/examples/simavr): simavr, the AVR simulator (Debian's
# libsimavr), runs an avr-gcc firmware (sort and Fletcher-16 checksum, a timer interrupt
# counting ticks) and a C99 harness traces it through the installed libjets' C API: one
# Instruction record per executed AVR instruction (named by the harness's decoder), MemRead and
# MemWrite events for loads, stores, pushes and pops, IoWrite events from simavr's IO write
# hooks, Interrupt events from its interrupt IRQ, and a Fault event (severity error) when the
# firmware jumps outside the flash. Installs the packages, installs libjets under a temporary
# prefix, builds with CMake and find_package(jets) as the README says, then checks:
#   the untraced run's result against Python's computation of the same workload, and the ticks
#     the firmware counted against the interrupts the harness saw;
#   the JETS_DISABLE build links no libjets and gives the same result;
#   the full trace: jets validate --strict; jets stats counts = the harness's counts; every
#     record's name = avr-objdump's mnemonic at its pc; Interrupt events = the firmware's ticks;
#     every SRAM load or pop reads what the last traced store or push there wrote, and the last
#     writes to the firmware's array (found with avr-nm) are the sorted data;
#   eleven capture settings (two of them size limits), each against scripts/lib/capture_oracle.py
#     and `jets cut` of the full trace (byte for byte); three flight recorders triggered by
#     events against `jets cut`; roi, off and count (which cut refuses) against what the full
#     trace says they must hold;
#   the faulting firmware with recorder=N;trigger=error (against the full trace and jets cut) and
#     with --abort-on-fault (SIGABRT, with a recorder and without): each trace holds the last
#     instructions before the fault;
#   a bad JETS_CAPTURE clause fails the open, naming the clause.
# About 30 s once libjets and the jets CLI are built.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"

# apt_install comes from scripts/test; run alone, the suite uses what is installed.
if declare -F apt_install >/dev/null; then
    apt_install libsimavr-dev libelf-dev gcc-avr avr-libc binutils-avr gcc make cmake pkg-config \
        python3 binutils || true
fi
# simavr.pc requires libelf.pc, so this also needs libelf-dev.
if ! pkg-config --exists simavr || ! command -v avr-gcc >/dev/null || ! command -v cmake >/dev/null \
    || [ ! -e /usr/lib/avr/include/avr/io.h ]; then
    echo "NOTE: simavr or the AVR toolchain could NOT be installed (Debian packages libsimavr-dev," \
        "libelf-dev, gcc-avr, avr-libc, cmake): the simavr example was NOT built or run."
    if [ "${CI:-}" = true ]; then
        echo "FAIL: CI installs Debian packages, so this is an error there"
        exit 1
    fi
    echo "SKIP: 23-simavr (install libsimavr-dev libelf-dev gcc-avr avr-libc cmake to run it)"
    exit 0
fi
echo "simavr $(pkg-config --modversion simavr), $(avr-gcc --version | head -n1)"

target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
suite_start=$SECONDS
step() { printf -- '--- %s   [%ds]\n' "$*" $((SECONDS - suite_start)); }

step "install libjets and build the jets CLI (release, as 24-mos6502 does: it cuts an 8 MB trace a dozen times)"
scripts/install-c "$work/prefix"
cargo build --release -p jets-cli --locked --quiet
jets="$target/release/jets"
checks_start=$SECONDS

step "build the harness and the firmware with CMake against the installed package"
cmake -S bindings-c/examples/simavr -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/cmake.log" 2>&1 \
    || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" -j 2 >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
sim="$work/build/avr_trace"
fw="$work/build/firmware.elf"
fw_fault="$work/build/firmware-fault.elf"
for f in "$sim" "$work/build/avr_trace_disabled" "$fw" "$fw_fault"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "FAIL: the build made no $f"; exit 1; }
done

# The firmware's result, computed again here: N bytes of the LCG x = 25173 x + 13849 (mod 2^16),
# high bytes, sorted, Fletcher-16; one round, seed 12345 (firmware.c's defaults).
expected=$(python3 - <<'PY'
x, data = 12345, []
for _ in range(64):
    x = (x * 25173 + 13849) & 0xFFFF
    data.append(x >> 8)
a = b = 0
for v in sorted(data):
    a = (a + v) % 255
    b = (b + a) % 255
print(f"checksum={(b << 8) | a} sorted=1")
PY
)

# run NAME FIRMWARE [ARGS...]: runs the harness into $work/NAME.jets, its output in $work/NAME.out;
# fails unless the run ends with the expected result. Prints the time it took.
run() {
    local name=$1 firmware=$2 t0 t1
    shift 2
    t0=$(date +%s%N)
    timeout 60 "$sim" "$@" "$firmware" "$work/$name.jets" >"$work/$name.out"
    t1=$(date +%s%N)
    grep -q "^result $expected " "$work/$name.out" \
        || { cat "$work/$name.out"; echo "FAIL: $name: the firmware's result is not '$expected'"; exit 1; }
    echo "$name: $(((t1 - t0) / 1000000)) ms, $(sed -n 's/^counts //p' "$work/$name.out" | cut -d' ' -f1)"
}
# counter NAME KEY: a counter the harness printed.
counter() { sed -n "s/^counts .*\b$2=\([0-9]*\).*/\1/p" "$work/$1.out"; }

step "untraced, and the JETS_DISABLE build"
run untraced "$fw" --untraced
# (Read whole before grep: with pipefail, grep -q leaving early could hide a match.)
needed=$(readelf -d "$work/build/avr_trace_disabled")
undefined=$(nm -u "$work/build/avr_trace_disabled")
if grep -q libjets <<<"$needed" || grep -q ' jets_' <<<"$undefined"; then
    echo "FAIL: the JETS_DISABLE build links libjets or refers to a jets_ symbol"; exit 1
fi
timeout 60 "$work/build/avr_trace_disabled" "$fw" "$work/disabled.jets" >"$work/disabled.out"
grep -q "^result $expected " "$work/disabled.out" || { echo "FAIL: the JETS_DISABLE build's result"; exit 1; }
[ ! -e "$work/disabled.jets" ] || { echo "FAIL: the JETS_DISABLE build wrote a trace"; exit 1; }
ticks=$(sed -n 's/^result .* ticks=\([0-9]*\)/\1/p' "$work/untraced.out")
[ "$(counter untraced interrupts)" = "$ticks" ] \
    || { echo "FAIL: the harness saw $(counter untraced interrupts) interrupts, the firmware counted $ticks"; exit 1; }
echo "result $expected, $ticks timer interrupts (the firmware's count and the harness's agree)"

step "traced in full"
run full "$fw"
"$jets" validate --strict "$work/full.jets"
[ "$(counter full instructions)" = "$(counter untraced instructions)" ] \
    || { echo "FAIL: tracing changed the number of instructions executed"; exit 1; }
"$jets" stats "$work/full.jets" | head -n 12
"$jets" stats --format json "$work/full.jets" >"$work/full.stats.json"
avr-objdump -d "$fw" >"$work/firmware.dis"
array=$(avr-nm "$fw" | sed -n 's/^0*800\([0-9a-f]*\) b data$/\1/p')
[ -n "$array" ] || { echo "FAIL: avr-nm finds no 'data' array in the firmware"; exit 1; }
python3 - "$work/full.jets" "$work/full.stats.json" "$work/full.out" "$work/firmware.dis" "$ticks" "$array" <<'PY'
import json, re, sys
path, stats_path, out_path, dis_path, ticks, array = sys.argv[1:7]
k = {m[0]: int(m[1]) for m in re.findall(r"(\w+)=(\d+)", open(out_path).read().split("counts ")[1].splitlines()[0])}
s = json.load(open(stats_path))
insn = s["record_types"]["Instruction"]
assert insn["count"] == k["instructions"] and insn["unended"] == 0, f"Instruction records {insn}, harness {k['instructions']}"
for event, key in (("MemRead", "mem_reads"), ("MemWrite", "mem_writes"), ("IoWrite", "io_writes"), ("Interrupt", "interrupts")):
    assert s["events"].get(event, 0) == k[key], f"{event} events {s['events'].get(event)} != harness {key}={k[key]}"
assert k["interrupts"] == int(ticks), f"{k['interrupts']} Interrupt events, the firmware counted {ticks} ticks"
assert all(c["agrees"] for c in s["footer"]), f"footer disagrees: {s['footer']}"

# Each record's name against avr-objdump's mnemonic at its pc (aliases of one encoding are one).
same = [{"add", "lsl"}, {"adc", "rol"}, {"and", "tst"}, {"eor", "clr"}, {"ldi", "ser"}, {"ori", "sbr"},
        {"andi", "cbr"}, {"brcs", "brlo"}, {"brcc", "brsh"}]
canon = {m: min(group) for group in same for m in group}
objdump = {}
for line in open(dis_path):
    m = re.match(r"\s+([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*\t(\S+)", line)
    if m:
        objdump[int(m[1], 16)] = m[2]
lines = [json.loads(l) for l in open(path)]
core = [l for l in lines if l["type"] == "record" and l["record_type"] == "Core"]
assert len(core) == 1, f"{len(core)} Core records"
checked, seen = 0, set()
ends = {l["record_id"]: l["clk"] for l in lines if l["type"] == "record_end"}
last_clk = -1
for l in lines:
    if l["type"] != "record" or l["record_type"] != "Instruction":
        continue
    pc, name = l["data"]["pc"], l["name"]
    assert pc in objdump, f"pc {pc:#x} is not an instruction avr-objdump lists"
    assert canon.get(name, name) == canon.get(objdump[pc], objdump[pc]), \
        f"pc {pc:#x}: the decoder says {name}, avr-objdump {objdump[pc]}"
    assert l["parent_id"] == core[0]["id"], "an instruction outside the core"
    assert l["clk"] >= last_clk and ends[l["id"]] > l["clk"], f"instruction at {l['clk']}: bad cycles"
    last_clk = l["clk"]
    seen.add(pc)
    checked += 1
# The memory events against each other: a load or pop of SRAM (0x100 and up; below are registers
# and IO) reads the value the last traced store or push there wrote (SRAM starts zeroed; the
# return addresses calls and interrupts push are not traced, and a pop never reads one).
shadow, reads, checked_reads = {}, 0, 0
for l in lines:
    if l["type"] != "event" or l["name"] not in ("MemRead", "MemWrite"):
        continue
    a, v = l["data"]["addr"], l["data"]["value"]
    if l["name"] == "MemWrite":
        shadow[a] = v
    elif a >= 0x100:
        reads += 1
        if a in shadow:
            checked_reads += 1
            assert shadow[a] == v, f"MemRead at {l['clk']}: {a:#x} holds {shadow[a]} (last MemWrite), read {v}"
assert checked_reads > 0.9 * reads, f"only {checked_reads} of {reads} SRAM reads follow a traced write"
# The array at the end, from the last MemWrite to each of its bytes: the sorted LCG bytes.
x, want = 12345, []
for _ in range(64):
    x = (x * 25173 + 13849) & 0xFFFF
    want.append(x >> 8)
base = int(array, 16)
got = [shadow.get(base + i) for i in range(64)]
assert got == sorted(want), f"the array's last writes {got} are not the sorted data"
# An interrupt returns to where the program was: a pc objdump lists.
irq = [l for l in lines if l["type"] == "event" and l["name"] == "Interrupt"]
assert all(e["data"]["return_pc"] in objdump and e["data"]["vector"] == 16 for e in irq), \
    "an Interrupt event with a return address or vector that is not the program's"
print(f"jets stats agrees with the harness ({k['instructions']} instructions, {k['mem_reads']} reads, "
      f"{k['mem_writes']} writes, {k['io_writes']} IO writes, {k['interrupts']} interrupts = the firmware's "
      f"ticks); {checked} records named as avr-objdump names {len(seen)} distinct pcs; {checked_reads} SRAM "
      f"reads read the last write; the array's last writes are the sorted data")
PY

step "capture settings against the oracle and jets cut"
# scripts/lib/capture_oracle.py computes from the full trace what each setting selects (the CAP-*
# rules written again in Python); `jets cut` of the full trace under the setting must be the
# run's own trace, byte for byte (CAP-CUT-1).
source scripts/lib/capture-oracle.bash
avr_traced() { timeout 60 "$sim" "$fw" "$1"; }
printf '%s\n' "clk=20000..30000" "clk=1000..1500;every=10000" "types=Instruction" "events=Interrupt,IoWrite" \
    "types=Instruction;events=MemWrite" "sample=Instruction:7" "units=0" "recorder=3000" "recorder=40000" \
    "limit=256KiB" "limit=1000B" \
    | capture_check simavr "$work/full.jets" avr_traced

step "flight recorders triggered by events: against jets cut (the oracle models recorder= alone)"
i=0
for s in "recorder=500;trigger=IoWrite" "recorder=300;trigger=Interrupt;dumps=1" \
    "recorder=1000;trigger=Interrupt;post=200;dumps=2"; do
    i=$((i + 1))
    JETS_CAPTURE="$s" run trig-$i "$fw" >/dev/null
    "$jets" validate --strict "$work/trig-$i.jets" >/dev/null
    "$jets" cut --capture "$s" "$work/full.jets" -o "$work/trig-$i.cut.jets" >/dev/null
    cmp -s "$work/trig-$i.jets" "$work/trig-$i.cut.jets" \
        || { echo "FAIL: jets cut --capture '$s' differs from the run's own trace"; exit 1; }
    python3 - "$work/full.jets" "$work/trig-$i.jets" "$s" <<'PY'
import json, sys
full, part = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
trigger = sys.argv[3].split("trigger=")[1].split(";")[0]
n = lambda t: sum(1 for l in t if l["type"] == "record")
assert any(l["type"] == "event" and l["name"] == trigger for l in part), f"{sys.argv[3]}: no {trigger} event kept"
assert 1 < n(part) < n(full), f"{sys.argv[3]}: {n(part)} records of {n(full)}"
assert part[-1].get("recorder_dumps", 0) >= 1, f"{sys.argv[3]}: the footer counts no dump"
print(f"{sys.argv[3]}: {n(part)} of {n(full)} records, {part[-1]['recorder_dumps']} dumps, = jets cut")
PY
done

step "JETS_CAPTURE=roi: the kernel between the firmware's markers"
JETS_CAPTURE=roi run roi "$fw"
"$jets" validate --strict "$work/roi.jets"
python3 - "$work/full.jets" "$work/roi.jets" "$(counter roi roi_instructions)" <<'PY'
import json, sys
full = [json.loads(l) for l in open(sys.argv[1])]
roi = [json.loads(l) for l in open(sys.argv[2])]
harness = int(sys.argv[3])
# From the full trace: the instructions after the one that wrote 1 to GPIOR0 (0x3e), through the
# one that wrote 2.
insns = [l for l in full if l["type"] == "record" and l["record_type"] == "Instruction"]
marker = {e["record_id"]: e["data"]["value"] for e in full
          if e["type"] == "event" and e["name"] == "IoWrite" and e["data"]["addr"] == 0x3e}
begin = next(i for i, l in enumerate(insns) if marker.get(l["id"]) == 1)
end = next(i for i, l in enumerate(insns) if marker.get(l["id"]) == 2)
want = [(l["name"], l["clk"], l["data"]["pc"]) for l in insns[begin + 1:end + 1]]
got = [(l["name"], l["clk"], l["data"]["pc"]) for l in roi if l["type"] == "record" and l["record_type"] == "Instruction"]
assert got == want, f"roi holds {len(got)} instructions, the kernel has {len(want)}"
assert len(got) == harness, f"roi holds {len(got)} instructions, the harness counted {harness} in the region"
assert roi[-1].get("capture") == "roi", f"footer capture: {roi[-1].get('capture')}"
print(f"roi: the {len(got)} instructions of the kernel, cycles {want[0][1]}..{want[-1][1]}")
PY

step "JETS_CAPTURE=count and off: nothing written, everything counted"
JETS_CAPTURE=count run count "$fw"
JETS_CAPTURE=off run off "$fw"
"$jets" validate --strict "$work/count.jets"
"$jets" validate --strict "$work/off.jets"
python3 - "$work/full.jets" "$work/count.jets" "$work/off.jets" <<'PY'
import json, sys
full, count, off = ([json.loads(l) for l in open(p)] for p in sys.argv[1:4])
records = sum(1 for l in full if l["type"] == "record")
events = sum(1 for l in full if l["type"] == "event")
for name, t in (("count", count), ("off", off)):
    body = [l for l in t if l["type"] not in ("header", "footer")]
    assert not body, f"{name}: {len(body)} lines written"
fc, fo = count[-1], off[-1]
assert (fc.get("counted_records"), fc.get("counted_events")) == (records, events), \
    f"count: footer counts {fc.get('counted_records')} records, {fc.get('counted_events')} events; the full trace has {records}, {events}"
assert (fo.get("left_out_records"), fo.get("left_out_events")) == (records, events), \
    f"off: footer left out {fo.get('left_out_records')} records, {fo.get('left_out_events')} events; the full trace has {records}, {events}"
print(f"count and off: {records} records and {events} events, counted / left out, none written")
PY

step "the faulting firmware: full trace, a flight recorder triggered by the error, and SIGABRT"
# fault NAME [ARGS...]: runs the faulting firmware into $work/NAME.jets; it must exit with STATUS.
fault() {
    local name=$1 status=$2 rc=0
    shift 2
    timeout 60 "$sim" "$@" "$fw_fault" "$work/$name.jets" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    [ "$rc" = "$status" ] || { cat "$work/$name.out" "$work/$name.err"; echo "FAIL: $name exited $rc, not $status"; exit 1; }
    grep -q 'FAULT at pc 0x' "$work/$name.err" || { echo "FAIL: $name: the harness reported no fault"; exit 1; }
}
fault fault-full 3
"$jets" validate --strict "$work/fault-full.jets"
JETS_CAPTURE="recorder=2000;trigger=error" fault fault-rec 3
"$jets" validate --strict "$work/fault-rec.jets"
"$jets" cut --capture "recorder=2000;trigger=error" "$work/fault-full.jets" -o "$work/fault-rec.cut.jets" >/dev/null
cmp -s "$work/fault-rec.jets" "$work/fault-rec.cut.jets" \
    || { echo "FAIL: jets cut --capture 'recorder=2000;trigger=error' differs from the run's own trace"; exit 1; }
# With --abort-on-fault the harness dies of SIGABRT: the flight recorder dumps on it (a whole
# file, footer included); without a recorder, jets_install_fatal_signal_flush saves every line
# emitted before the signal (no footer: `jets repair` adds it).
JETS_CAPTURE="recorder=2000" fault fault-abort 134 --abort-on-fault
"$jets" validate --strict "$work/fault-abort.jets"
grep -q '"recorder_dumps":1' "$work/fault-abort.jets" || { echo "FAIL: the recorder did not dump once on SIGABRT"; exit 1; }
fault fault-abort-full 134 --abort-on-fault
# The same run as fault-full up to the fault: all of it but the core's end and the footer.
head -n -2 "$work/fault-full.jets" | cmp -s - "$work/fault-abort-full.jets" \
    || { echo "FAIL: the trace saved on SIGABRT is not the run's lines up to the fault"; exit 1; }
"$jets" repair "$work/fault-abort-full.jets" -o "$work/fault-abort-full.repaired.jets"
"$jets" validate --strict "$work/fault-abort-full.repaired.jets"
python3 - "$work/fault-full.jets" "$work/fault-full.out" "$work/fault-rec.jets" "$work/fault-abort.jets" <<'PY'
import json, re, sys
full = [json.loads(l) for l in open(sys.argv[1])]
k = {m[0]: int(m[1]) for m in re.findall(r"(\w+)=(\d+)", open(sys.argv[2]).read())}
faults = [l for l in full if l["type"] == "event" and l["name"] == "Fault"]
assert len(faults) == 1 and faults[0]["data"]["severity"] == "error", f"Fault events: {faults}"
fault_clk = faults[0]["clk"]
insns = [l for l in full if l["type"] == "record" and l["record_type"] == "Instruction"]
assert insns[-1]["data"]["pc"] == k["last_pc"], "the full trace's last instruction is not the harness's"
# The instructions of the last 2000 cycles before the fault, as the full trace has them.
want = [(l["name"], l["clk"], l["data"]["pc"]) for l in insns if l["clk"] + 2000 > fault_clk]
for path in sys.argv[3:5]:
    part = [json.loads(l) for l in open(path)]
    got = [(l["name"], l["clk"], l["data"]["pc"]) for l in part if l["type"] == "record" and l["record_type"] == "Instruction"]
    assert any(l["type"] == "event" and l["name"] == "Fault" for l in part), f"{path}: no Fault event"
    assert got[-len(want):] == want, f"{path}: its last instructions are not the {len(want)} before the fault"
    assert got[-1][2] == k["last_pc"], f"{path}: the last instruction is at {got[-1][2]:#x}, the fault's at {k['last_pc']:#x}"
    print(f"{path.rsplit('/', 1)[1]}: {len(got)} instructions, the last {len(want)} those of the 2000 cycles "
          f"before the fault at cycle {fault_clk} ({got[-1][0]} at {got[-1][2]:#x})")
PY

step "a bad JETS_CAPTURE clause is an error naming it"
if JETS_CAPTURE="clk=9..3" "$sim" "$fw" "$work/bad.jets" >"$work/bad.out" 2>&1; then
    echo "FAIL: JETS_CAPTURE=clk=9..3 was accepted"; exit 1
fi
grep -q 'clk=9..3' "$work/bad.out" || { cat "$work/bad.out"; echo "FAIL: the error does not name the clause"; exit 1; }
echo "simavr: all checks passed; building the example, the runs and the checks took $((SECONDS - checks_start)) s, the suite $((SECONDS - suite_start)) s"
