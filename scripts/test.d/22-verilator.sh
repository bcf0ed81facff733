#!/usr/bin/env bash
# The Verilator example (bindings-c/examples/verilator): Tiny5, a 5-stage RV32I-subset core in
# SystemVerilog, simulated by Debian's Verilator and traced through jets.hpp from its C++
# testbench. Installs verilator, installs libjets under a temporary prefix, builds the example
# with CMake and find_package(jets) exactly as the README says, runs it (the testbench checks the
# program's sum and maximum), and checks the trace with the tools its users open it in:
#   jets validate --strict;
#   jets stats: Instruction records = instructions fetched, WB events = instructions retired,
#     Squash events = instructions squashed, as the testbench counted them;
#   jets convert --to kanata: one I per fetch, R type 0 per retirement, R type 1 per squash;
#   jets view: the viewer's pipeline mode picks Instruction and draws IF ID EX MEM WB;
# and the counters against the program's timing model (one load-use stall per word, two squashed
# fetches per taken branch). Then once more with JETS_CAPTURE="clk=100..200" (read by the SDK at
# open): a valid trace holding only that window; and under eight settings, each trace against an
# oracle of the capture rules and against `jets cut` of the whole run's trace.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"

if ! apt_install verilator g++ make cmake pkg-config python3 binutils || ! command -v verilator >/dev/null; then
    echo "Verilator could NOT be installed (Debian package 'verilator'): the Verilator example was NOT built or run."
    if [ "${CI:-}" = true ]; then
        echo "FAIL: CI installs Debian packages, so this is an error there"
        exit 1
    fi
    echo "SKIPPED: 22-verilator (install verilator to run it)"
    exit 0
fi
echo "$(verilator --version)"

target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
viewer_pid=""
cleanup() {
    [ -n "$viewer_pid" ] && kill "$viewer_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
step() { printf -- '--- %s\n' "$*"; }

step "install libjets and build the jets CLI"
scripts/install-c "$work/prefix"
cargo build -p jets-cli --locked --quiet
jets="$target/debug/jets"

step "build the example with CMake against the installed package"
start=$(date +%s)
cmake -S bindings-c/examples/verilator -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/cmake.log" 2>&1 \
    || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" -j 2 >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
echo "verilated and built in $(($(date +%s) - start)) s"
sim="$work/build/tiny5_sim"

# run NAME N SEED: runs the simulator into $work/NAME.jets; its output goes to $work/NAME.out.
run() {
    local t0 t1
    t0=$(date +%s%N)
    timeout 120 "$sim" "$work/$1.jets" "$2" "$3" | tee "$work/$1.out"
    t1=$(date +%s%N)
    grep -q '^result ok ' "$work/$1.out" || { echo "FAIL: the program's result is wrong"; exit 1; }
    echo "$1: $(((t1 - t0) / 1000000)) ms, trace $(stat -c %s "$work/$1.jets") bytes"
}
# counter NAME KEY: a counter the testbench printed.
counter() { sed -n "s/.* $2=\([0-9]*\).*/\1/p; s/^$2=\([0-9]*\).*/\1/p" "$work/$1.out" | head -n1; }

step "run: sum and maximum of 64 words"
run tiny5 64 1
"$jets" validate --strict "$work/tiny5.jets"
fetched=$(counter tiny5 fetched)
retired=$(counter tiny5 retired)
squashed=$(counter tiny5 squashed)

step "the counters against the program's timing model"
python3 - "$work/tiny5.out" 64 1 <<'PY'
import re, sys
out, n, seed = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
k = {m[0]: int(m[1]) for m in re.findall(r"(\w+)=(\d+)", out.splitlines()[0])}
# The data the testbench generates (its LCG), and how often the maximum changes.
x, best, new_max = seed, None, 0
for _ in range(n):
    x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    d = ((x >> 8) & 0xFFFFF) - 0x80000
    if best is None or d >= best:   # `blt x4, x6` falls through when d >= max
        new_max += 1
    best = d if best is None else max(best, d)
# 4 set-up instructions, 6 per word plus the maximum's addi, 2 stores and the ecall.
want = {"retired": 4 + 6 * n + new_max + 3,
        # taken blt (no new maximum) and taken bne (all but the last word)
        "taken_branches": (n - new_max) + (n - 1),
        "load_use_stalls": n}
# two squashed fetches per taken branch, and two behind the ecall
want["squashed"] = 2 * want["taken_branches"] + 2
want["fetched"] = want["retired"] + want["squashed"]
# one fetch per cycle unless interlocked, then MEM and WB of the ecall
want["cycles"] = want["fetched"] + n + 2
bad = {key: (k[key], v) for key, v in want.items() if k[key] != v}
assert not bad, f"counters differ from the timing model (got, want): {bad}"
print(f"timing model holds: {k}")
PY

step "jets stats"
"$jets" stats "$work/tiny5.jets" | head -n 20
"$jets" stats --format json "$work/tiny5.jets" >"$work/stats.json"
python3 - "$work/stats.json" "$fetched" "$retired" "$squashed" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
fetched, retired, squashed = map(int, sys.argv[2:5])
insn = s["record_types"]["Instruction"]
assert insn["count"] == fetched and insn["unended"] == 0, f"Instruction records {insn} != {fetched} fetched"
assert s["events"]["WB"] == retired, f"WB events {s['events']['WB']} != {retired} retired"
assert s["events"]["Squash"] == squashed, f"Squash events {s['events'].get('Squash')} != {squashed}"
assert all(c["agrees"] for c in s["footer"]), f"footer disagrees: {s['footer']}"
print(f"jets stats: {fetched} Instruction records, {retired} reached WB, {squashed} squashed")
PY

step "jets convert --to kanata"
"$jets" convert "$work/tiny5.jets" --to kanata -o "$work/tiny5.kanata"
python3 - "$work/tiny5.kanata" "$fetched" "$retired" "$squashed" <<'PY'
import sys
fetched, retired, squashed = map(int, sys.argv[2:5])
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
assert rows[0] == ["Kanata", "0004"], rows[0]
inserts = sum(1 for r in rows if r[0] == "I")
ret = sum(1 for r in rows if r[0] == "R" and r[3] == "0")
flush = sum(1 for r in rows if r[0] == "R" and r[3] == "1")
stages = {r[3] for r in rows if r[0] == "S" and r[2] == "0"}
assert (inserts, ret, flush) == (fetched, retired, squashed), \
    f"kanata I/R0/R1 = {inserts}/{ret}/{flush}, testbench {fetched}/{retired}/{squashed}"
assert {"IF", "ID", "EX", "MEM", "WB"} <= stages, f"stages drawn: {sorted(stages)}"
print(f"kanata: {inserts} instructions, {ret} retired, {flush} flushed, stages {sorted(stages)}")
PY

step "jets view: pipeline mode"
"$jets" view "$work/tiny5.jets" --no-open --port 0 >"$work/view.out" 2>&1 &
viewer_pid=$!
python3 - "$work/view.out" "$fetched" <<'PY'
import json, re, sys, time, urllib.request
fetched = int(sys.argv[2])
url = None
for _ in range(600):
    m = re.search(r"at (http://\S+/)", open(sys.argv[1]).read())
    if m:
        url = m.group(1)
        break
    time.sleep(0.1)
assert url, "jets view printed no address"
local = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never via a proxy
get = lambda path: json.load(local.open(url + path, timeout=30))
def instructions(s):
    return [g for g in s["groups"] if s["types"][g["rtype"]]["name"] == "Instruction"]
for _ in range(600):   # the viewer indexes (and follows) the file in the background
    s = get("api/summary")
    if s["build_error"] or sum(g["count"] for g in instructions(s)) >= fetched:
        break
    time.sleep(0.1)
assert not s["build_error"], s["build_error"]
assert s["pipeline_type"] is not None, "the viewer found no pipeline record_type"
ptype = s["types"][s["pipeline_type"]]["name"]
assert ptype == "Instruction", f"pipeline mode shows {ptype}"
groups = instructions(s)
assert len(groups) == 1 and groups[0]["count"] == fetched, f"pipeline groups {groups}, {fetched} fetched"
group = groups[0]
t1 = s["extent"][1] + 1
p = get(f"api/pipeline?t0=0&t1={t1}&px=800&groups={group['seq']}:0:8")
rows = p["groups"][0]["rows"]
names, at = s["event_names"], s["layouts"]["stage"].index("name")   # stages are compact rows
first = [names[st[at]] for st in rows[0]["stages"]]
assert first == ["IF", "ID", "EX", "MEM", "WB"], f"first instruction's stages: {first}"
print(f"jets view: pipeline mode on {ptype} under {group['label']!r}, {group['count']} rows; "
      f"{rows[0]['name']!r}: {' '.join(first)}")
PY
kill "$viewer_pid"
wait "$viewer_pid" 2>/dev/null || true
viewer_pid=""

step "JETS_CAPTURE=clk=100..200 (read by the SDK at open)"
JETS_CAPTURE="clk=100..200" run tiny5-window 64 1
"$jets" validate --strict "$work/tiny5-window.jets"
"$jets" stats "$work/tiny5-window.jets" >/dev/null
"$jets" convert "$work/tiny5-window.jets" --to kanata -o "$work/tiny5-window.kanata"
python3 - "$work/tiny5-window.jets" "$fetched" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
footer = lines[-1]
assert footer.get("capture") == "clk=100..200", f"footer capture: {footer.get('capture')}"
events = [l for l in lines if l["type"] == "event"]
assert events and all(100 <= e["clk"] < 200 for e in events), "an event outside [100, 200)"
insns = [l for l in lines if l["type"] == "record" and l["record_type"] == "Instruction"]
assert 0 < len(insns) < int(sys.argv[2]), f"{len(insns)} instructions kept"
print(f"capture window: {len(events)} events and {len(insns)} instructions in [100, 200)")
PY
step "capture control through the C++ API: each setting against an oracle and jets cut"
# scripts/lib/capture_oracle.py computes from the whole run's trace which lines each setting
# selects (the CAP-* rules written again in Python); `jets cut` of that trace under the setting
# must be the run's own trace, byte for byte (CAP-CUT-1).
source scripts/lib/capture-oracle.bash
verilator_run() { timeout 120 "$sim" "$1" 64 1; }
printf '%s\n' "clk=100..200" "types=Instruction;events=WB,Squash" "sample=Instruction:5" \
    "units=2" "clk=50..80;every=200" "recorder=50" "recorder=300" "limit=20KiB" \
    | capture_check verilator "$work/tiny5.jets" verilator_run
echo "Verilator example: all checks passed"
