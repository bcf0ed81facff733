#!/usr/bin/env bash
# The validator's fuzz target (fuzz/fuzz_targets/validate.rs, cargo-fuzz) for a bounded time:
# any bytes must neither crash the validator nor repair, and repair's output must validate.
#   JETS_FUZZ_SECONDS   how long libFuzzer runs (default 60)
# Installs what it needs: a nightly toolchain (rustup) and cargo-fuzz (crates.io). When it cannot,
# it says why and fails: a fuzz run that silently did not happen would read as a clean one.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${JETS_FUZZ_SECONDS:-60}"
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
cannot() {
    echo "16-fuzz: CANNOT RUN the fuzz target: $*" >&2
    exit 1
}

command -v rustup >/dev/null || cannot "rustup is not installed (cargo-fuzz needs a nightly toolchain)"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "16-fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal >/dev/null ||
        cannot "rustup could not install the nightly toolchain"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "16-fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet || cannot "cargo install cargo-fuzz failed"
fi

# Seeds: the conformance traces (valid and invalid); the corpus grows under the target dir.
corpus="$target_dir/fuzz-corpus/validate"
mkdir -p "$corpus"
cp spec/conformance/valid/* spec/conformance/invalid/* "$corpus/" 2>/dev/null || true

echo "16-fuzz: $(cargo fuzz --version), $(rustup run nightly rustc --version)"
echo "16-fuzz: fuzzing the validator and repair for ${seconds}s"
# -detect_leaks=0: LeakSanitizer reports the thread-local channel context std allocates in each
# of the validator's scoped worker threads: a scope returns when the threads' closures end, before
# their TLS destructors free it, so a check at that moment sees it live. Crashes, panics, hangs
# and memory limits are still findings. libFuzzer's flag covers its per-input checks only; the
# same report at process exit, after the run is done, is ASan's own, hence ASAN_OPTIONS too.
log="$target_dir/fuzz-validate.log"
if ! ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$target_dir/fuzz" validate "$corpus" \
    -- -max_total_time="$seconds" -rss_limit_mb=2048 -detect_leaks=0 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "16-fuzz: FAILED: the fuzz target found a crash (log: $log; the input is under fuzz/artifacts/)" >&2
    exit 1
fi
grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$log" | tail -n 2
echo "16-fuzz: no crash in ${seconds}s"
