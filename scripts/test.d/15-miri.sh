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
tests=(write::spsc write::line write::lease write::tests capture::keep::tests::parents_outlived)
echo "Miri ($(cargo +nightly miri --version)) on jets-sdk --lib: ${tests[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for t in "${tests[@]}"; do
    MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-strict-provenance" \
        timeout 900 cargo +nightly miri test -p jets-sdk --lib --locked -- "$t" 2>&1 | tee -a "$log" \
        || status=$?
done
# jets-format's typed data keeps its fields in storage of its own (unsafe code); its unit tests
# are quick under Miri (the encoder's property tests are not: they stay native).
MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-strict-provenance" \
    timeout 900 cargo +nightly miri test -p jets-format --lib --locked -- value::tests 2>&1 \
    | tee -a "$log" || status=$?
# The line writers' direct path writes through a raw pointer into reserved room (json::room):
# its property test, a few cases (proptest reads the working directory: isolation off).
PROPTEST_CASES=4 MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-strict-provenance -Zmiri-disable-isolation" \
    timeout 900 cargo +nightly miri test -p jets-format --lib --locked -- lines::tests 2>&1 \
    | tee -a "$log" || status=$?
echo "Miri ran:"
grep -E '^test .* \.\.\. ' "$log" | sed 's/^/  /'
[ "$status" -eq 0 ] || { echo "Miri suite FAILED (status $status)"; exit "$status"; }
echo "Miri suite done"
