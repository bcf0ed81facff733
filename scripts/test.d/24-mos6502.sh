#!/usr/bin/env bash
# A simulator we did not write: the mos6502 crate (crates.io) runs Klaus Dormann's 6502
# functional test (30.6 M instructions, the image the crate ships), traced through the Rust SDK by
# examples/mos6502 with one record per instruction and decode, execute and bus events. Traced in
# full that is about 17 GB; this runs the whole test (release build) untraced, with capture off,
# with a JETS_CAPTURE window, with a flight recorder and in full up to 1 GiB (past the part a trace
# file keeps in the page cache, so written in direct blocks where the file system takes them), and
# checks that the test passes every time, that each trace is valid (`jets validate --strict`)
# and says it is a part of the run (`jets stats`), and that a bad JETS_CAPTURE clause is an error
# that names it.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step() { printf -- '--- %s\n' "$*"; }

step "build (release) the example and the jets CLI"
cargo build --release --locked --quiet -p jets-example-mos6502 -p jets-cli
sim="$target/release/mos6502-trace"
jets="$target/release/jets"
source scripts/lib/mos6502-image.bash
image="$(mos6502_image)"
echo "test image: $image"

# run NAME [ENV...]: the whole functional test, traced into $work/NAME.jets unless NAME=untraced.
run() {
    local name=$1
    shift
    local args=(--program "$image" --trace "$work/$name.jets")
    [ "$name" = untraced ] && args=(--program "$image" --untraced)
    env "$@" timeout 600 "$sim" "${args[@]}" | tee "$work/$name.out"
    grep -q '^functional test PASSED after 30607780 instructions' "$work/$name.out" \
        || { echo "FAIL: the functional test did not pass ($name)"; exit 1; }
}

step "untraced"
run untraced
step "capture off"
run off JETS_CAPTURE=off
grep -q 'left out 30607781 records' "$work/off.out" || { echo "FAIL: capture off did not count every record"; exit 1; }
step "a window of 1 M cycles in the middle of the run"
run window JETS_CAPTURE=clk=50000000..51000000
"$jets" validate --strict "$work/window.jets"
"$jets" stats "$work/window.jets" | tee "$work/window.stats" | head -n 3
grep -q 'PART of the run' "$work/window.stats" || { echo "FAIL: jets stats does not say the window is a part"; exit 1; }
step "a flight recorder of the last 100 k cycles"
run recorder JETS_CAPTURE=recorder=100000
"$jets" validate --strict "$work/recorder.jets"
grep -q '1 dumps' "$work/recorder.out" || { echo "FAIL: the recorder was not written once at close"; exit 1; }

step "everything, cut at 1 GiB: past the 512 MiB the page cache keeps, direct blocks (WR-STREAM-2)"
run limit JETS_CAPTURE=limit=1GiB
"$jets" validate --strict "$work/limit.jets"
bytes=$(stat -c %s "$work/limit.jets")
[ "$bytes" -ge $((1 << 30)) ] || { echo "FAIL: the cut trace has $bytes bytes, under 1 GiB"; exit 1; }
rm -f "$work/limit.jets"

step "a bad JETS_CAPTURE clause is an error naming it"
if JETS_CAPTURE="clk=9..3" "$sim" --program "$image" --trace "$work/bad.jets" --limit 10 >"$work/bad.out" 2>&1; then
    echo "FAIL: JETS_CAPTURE=clk=9..3 was accepted"; exit 1
fi
cat "$work/bad.out"
grep -q 'clk=9..3' "$work/bad.out" || { echo "FAIL: the error does not name the clause"; exit 1; }
echo "mos6502: all checks passed"
