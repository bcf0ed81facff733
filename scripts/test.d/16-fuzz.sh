#!/usr/bin/env bash
# The fuzz targets (fuzz/fuzz_targets, cargo-fuzz), each for a bounded time:
# - validate: any bytes must neither crash the validator nor repair, and repair's output must
#   validate;
# - capture: any JETS_CAPTURE text, setting made in code and single-threaded program must neither
#   panic nor leave a file the validator finds an error in, nor a record it wrote that the
#   program ended without its end (and a text that parses must spell back to the same setting).
# - c_api: libjets driven through its Rust rlib with any contract-respecting calls (ids, cycles,
#   texts, options, clocks, domains, capture) on two traces and NULL: no panic, only documented
#   status codes, files that validate.
#   JETS_FUZZ_SECONDS   how long libFuzzer runs each target (default 20)
# Installs what it needs: a nightly toolchain (rustup) and cargo-fuzz (crates.io). When it cannot,
# it says why and fails: a fuzz run that silently did not happen would read as a clean one.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${JETS_FUZZ_SECONDS:-20}"
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

# Seeds of the validator: the conformance traces (valid and invalid); each corpus grows under the
# target dir. The other targets' inputs are structured (arbitrary's): they start from none.
mkdir -p "$target_dir/fuzz-corpus/validate" "$target_dir/fuzz-corpus/capture" "$target_dir/fuzz-corpus/c_api"
cp spec/conformance/valid/* spec/conformance/invalid/* "$target_dir/fuzz-corpus/validate/" 2>/dev/null || true

echo "16-fuzz: $(cargo fuzz --version), $(rustup run nightly rustc --version)"
# -detect_leaks=0: LeakSanitizer reports the thread-local channel context std allocates in each
# of the validator's scoped worker threads: a scope returns when the threads' closures end, before
# their TLS destructors free it, so a check at that moment sees it live. Crashes, panics, hangs
# and memory limits are still findings. libFuzzer's flag covers its per-input checks only; the
# same report at process exit, after the run is done, is ASan's own, hence ASAN_OPTIONS too.
# -timeout=20: an input that runs longer is a hang (the first one the capture target found spun
# the writer for ever), reported within the run rather than after libFuzzer's 20 minutes.
#
# The build: every target at once, in the dev profile at opt-level 1 (debug assertions and
# overflow checks on, as in any fuzz build). The release build cargo-fuzz makes by default took
# 235 s here for the three targets (195 s with 16 codegen units), the dev profile at opt-level 1
# 139 s, and it runs the capture target as fast (10 028 inputs in 20 s); at opt-level 0 it built in
# 66 s and ran 27 inputs a second, too few to find anything. The same settings for `run`, so it
# builds nothing again.
build=(--dev --fuzz-dir fuzz --target-dir "$target_dir/fuzz")
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_INCREMENTAL=0
echo "16-fuzz: building the fuzz targets"
log="$target_dir/fuzz-build.log"
if ! cargo +nightly fuzz build "${build[@]}" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "16-fuzz: FAILED: the fuzz targets do not build (log: $log)" >&2
    exit 1
fi
fuzz() {
    local target="$1" what="$2"
    local log="$target_dir/fuzz-$target.log"
    echo "16-fuzz: fuzzing $what for ${seconds}s"
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" cargo +nightly fuzz run "${build[@]}" "$target" "$target_dir/fuzz-corpus/$target" \
        -- -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -detect_leaks=0 >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "16-fuzz: FAILED: the fuzz target $target found a crash (log: $log; the input is under fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$log" | tail -n 2
    echo "16-fuzz: $target: no crash in ${seconds}s"
}
fuzz validate "the validator and repair"
fuzz capture "capture control (JETS_CAPTURE, settings made in code, programs under them)"
fuzz c_api "the C API (libjets)"
