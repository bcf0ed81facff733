#!/usr/bin/env bash
# Miri on the writer's unsafe core (sdk/src/write): the byte rings (spsc), the line entries that
# move owned values through them (line), and the writer's unit tests (pushes racing a close, a full
# ring under both policies, flush racing close, a panicking sink, rings retired at close, nested
# pushes refused). Miri checks every access for undefined behaviour and data races, with its own
# weak-memory model; the handshake uses SeqCst fences under Miri (membarrier is a syscall).
# Needs nightly with the miri and rust-src components, installed here with rustup.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v rustup >/dev/null; then
    echo "SKIPPED: Miri: rustup is not installed, so nightly + miri cannot be installed here"
    exit 0
fi
if ! rustup toolchain install nightly --component miri,rust-src --profile minimal >/dev/null 2>&1 \
    || ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "SKIPPED: Miri: the nightly toolchain with the miri component could not be installed"
    echo "         (rustup toolchain install nightly --component miri,rust-src --profile minimal)"
    exit 0
fi
cargo +nightly miri setup >/dev/null 2>&1
# Miri runs a thousand times slower than native: the tests shrink their loops under cfg(miri).
# Bounded so that a hang (or a machine far slower than expected) fails instead of stalling.
# Two lanes, one a core: Miri runs a test binary on one thread of the host, and the suite took
# 5 minutes one after the other on a slow host (2026-12-01). The binaries are built first, so
# the lanes only run them; each lane's runs print their time.
sdk_flags="${MIRIFLAGS:-} -Zmiri-strict-provenance"
echo "Miri ($(cargo +nightly miri --version)): building jets-sdk's and jets-format's unit tests"
MIRIFLAGS="$sdk_flags" cargo +nightly miri test -p jets-sdk -p jets-format --lib --locked --no-run \
    >/dev/null 2>&1 || true # a build error shows again, in full, in the lane that runs it
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# miri_run LOG PACKAGE FILTER [ENV...]: one bounded run (a hang, or a machine far slower than
# expected, fails rather than stalls), its output and time in LOG; fails as the run does.
miri_run() {
    local log="$1" package="$2" filter="$3" started=$SECONDS
    shift 3
    echo "--- Miri: $package $filter" >>"$log"
    env MIRIFLAGS="$sdk_flags" "$@" timeout 900 cargo +nightly miri test -p "$package" --lib \
        --locked -- "$filter" >>"$log" 2>&1 || { echo "--- FAILED: $package $filter" >>"$log"; return 1; }
    echo "--- $package $filter: $((SECONDS - started)) s" >>"$log"
}
# Lane 1: the writer's unit tests (pushes racing a close, full rings, a panicking sink...), the
# longest, and the keeper's parents outlived by deferred records.
lane1() {
    miri_run "$work/1.log" jets-sdk write::tests &&
        miri_run "$work/1.log" jets-sdk capture::keep::tests::parents_outlived
}
# Lane 2: the byte rings, the line entries that move owned values through them, the lease; then
# jets-format's typed data, which keeps its fields in storage of its own (unsafe code), and the
# line writers' direct path through a raw pointer into reserved room (json::room): its property
# test, a few cases (proptest reads the working directory: isolation off). The encoder's other
# property tests are not quick under Miri: they stay native.
lane2() {
    miri_run "$work/2.log" jets-sdk write::spsc &&
        miri_run "$work/2.log" jets-sdk write::line &&
        miri_run "$work/2.log" jets-sdk write::lease &&
        miri_run "$work/2.log" jets-format value::tests &&
        miri_run "$work/2.log" jets-format lines::tests PROPTEST_CASES=4 \
            MIRIFLAGS="$sdk_flags -Zmiri-disable-isolation"
}
lane1 &
one=$!
lane2 &
two=$!
status=0
wait "$one" || status=$?
wait "$two" || status=$?
cat "$work/1.log" "$work/2.log"
log="$work/all.log"
cat "$work/1.log" "$work/2.log" >"$log"
echo "Miri ran:"
grep -E '^test .* \.\.\. ' "$log" | sed 's/^/  /'
[ "$status" -eq 0 ] || { echo "Miri suite FAILED (status $status)"; exit "$status"; }
echo "Miri suite done"
