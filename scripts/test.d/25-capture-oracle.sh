#!/usr/bin/env bash
# Capture control on two simulators, checked by an oracle that is not our code: Tiny5 (our
# pipeline, deeper trees: units, stalls, refills) and the mos6502 crate running Klaus Dormann's
# functional test (a simulator we did not write). Each runs once unfiltered and then under fixed
# and seeded random JETS_CAPTURE settings (windows, repeated windows, type, event and unit
# filters, samples, flight recorders, size limits); scripts/lib/capture_oracle.py computes from the unfiltered
# trace, by the spec's rules written again in Python, exactly which lines each setting selects,
# and compares them with the file. The oracle is first shown a wrong file, which it must refuse.
# `jets cut` of the unfiltered trace under each setting must then be that same file, byte for
# byte (CAP-CUT-1).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source scripts/lib/capture-oracle.bash

# `--bin` picks among every package named: each binary named, or the others are not built.
cargo build --release --locked --quiet -p jets-examples -p jets-example-mos6502 -p jets-cli \
    --bin pipeline_modes --bin mos6502-trace --bin jets
tiny5="$target/release/pipeline_modes"
sim="$target/release/mos6502-trace"
jets="$target/release/jets"
source scripts/lib/mos6502-image.bash
image="$(mos6502_image)"

# Settings for a run of about LENGTH cycles: fixed ones, then 30 drawn from seed SEED.
settings() {
    python3 - "$@" <<'PY'
import random, sys
length, seed, types, events, units = int(sys.argv[1]), int(sys.argv[2]), *[a.split(",") for a in sys.argv[3:6]]
fixed = [f"clk=0..5", f"clk={length // 2}..{length // 2 + length // 100}", f"clk={length - 50}..{length * 2}",
         f"clk=100..200;every={length // 10}", "recorder=1", f"recorder={length // 100}", f"recorder={length // 3}",
         "limit=300B", "limit=100KiB", "limit=1MiB"]
r = random.Random(seed)
def drawn():
    c = []
    if r.random() < 0.6:
        a, l = r.randrange(length), r.randrange(1, max(2, length // 10))
        c.append(f"clk={a}..{a + l}")
        if r.random() < 0.3:
            c.append(f"every={l + r.randrange(1, length // 5)}")
    if r.random() < 0.35: c.append("types=" + ",".join(r.sample(types, r.randrange(1, min(4, len(types)) + 1))))
    if r.random() < 0.35: c.append("events=" + ",".join(r.sample(events, r.randrange(1, min(3, len(events)) + 1))))
    if r.random() < 0.35 and units != [""]: c.append("units=" + ",".join(r.sample(units, r.randrange(1, min(2, len(units)) + 1))))
    if r.random() < 0.35: c.append(f"sample={r.choice(types)}:{r.randrange(1, 20)}")
    return ";".join(c) or f"recorder={r.randrange(1, length)}"
print("\n".join(fixed + [drawn() for _ in range(30)]))
PY
}

echo "--- Tiny5, 64 words"
tiny5_run() { "$tiny5" "$JETS_CAPTURE" 64 "$1"; }
"$tiny5" full 64 "$work/tiny5.jets" >/dev/null
echo "--- the oracle refuses a file that is not what the setting selects"
if python3 "$capture_oracle" "$work/tiny5.jets" "clk=0..100=$work/tiny5.jets" >/dev/null; then
    echo "FAIL: the oracle took the whole run for a window"; exit 1
fi
settings 29383 1 Instruction,Stall,Refill,Cache,Core,PipelineStage IF,ID,EX,MEM,WB,Squash,Stall,DCacheMiss 0,1,2,3,4,5,6 \
    | capture_check tiny5 "$work/tiny5.jets" tiny5_run

echo "--- mos6502, the first 20 000 instructions"
mos_run() { "$sim" --program "$image" --limit 20000 --trace "$1"; }
JETS_CAPTURE= mos_run "$work/mos.jets" >/dev/null
settings 61226 2 Instruction,Core read,write,decode,execute 0 | capture_check mos "$work/mos.jets" mos_run
echo "capture oracle: all checks passed"
