#!/usr/bin/env bash
# The C and C++ bindings (libjets): installs the package under a temporary prefix, then builds
# and runs the C99 and C++17 test programs (warnings as errors) against it, shared and static;
# again under valgrind (no errors, no leaks) and ASan/UBSan; the safety tests (fork, a signal
# handler under an interval timer, the drop policy under pressure, bad JSON, calls after close,
# threads cancelled inside libjets calls, a full disk under .gz/.zst/plain traces, opening over
# an existing file on a full disk, exit() and SIGTERM without jets_close) under
# valgrind, ASan/UBSan and TSan (libjets itself built with -Zsanitizer=thread when a nightly
# toolchain with rust-src is installable; JETS_TSAN=0 skips it); the JETS_DISABLE build (links without libjets); an
# outside pkg-config project (shared and static) and the example simulators in examples/c, built
# by CMake with find_package(jets), exactly as docs say. Every trace produced is checked line by line (check_trace.py, and
# `jets validate` when the CLI has it) against the counts its program reports.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
apt_install gcc g++ make cmake pkg-config valgrind python3 binutils gzip zstd gdb
# The sanitizer run prefers clang 19 (the newest runtime), then the distribution's clang, then gcc.
apt_install clang-19 libclang-rt-19-dev || apt_install clang libclang-rt-dev \
    || echo "NOTE: clang with its sanitizer runtime is not installable here"

target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
# A failure stops the TSan build (`timeout` passes the signal on to cargo) before the files go.
trap 'if [ -n "${tsan_pid:-}" ]; then kill "$tsan_pid" 2>/dev/null || true; wait "$tsan_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
prefix="$work/prefix"
tests="$root/bindings-c/tests/c"
check="$tests/check_trace.py"

scripts/install-c "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
version="$(pkg-config --modversion jets)"
echo "pkg-config: jets $version, cflags $(pkg-config --cflags jets)"

# A trace checker from the CLI, if this tree's `jets` has `validate`.
validate=()
if cargo build -p jets-cli --locked --quiet 2>/dev/null \
    && "$target/debug/jets" validate --help >/dev/null 2>&1; then
    validate=("$target/debug/jets" validate --strict)
else
    echo "NOTE: this tree's jets CLI has no 'validate' command; traces are checked by check_trace.py only"
fi

# check_trace TRACE OUTPUT: the trace is valid and holds what the program said it wrote.
check_trace() {
    local expect
    expect="$(sed -n 's/^expect //p' "$2")"
    [ -n "$expect" ] || { echo "FAIL: $2 has no 'expect' line"; exit 1; }
    python3 "$check" "$1" --expect "$expect"
    if [ ${#validate[@]} -gt 0 ]; then
        "${validate[@]}" "$1"
    fi
}

cflags=(-std=c99 -Wall -Wextra -Werror -pedantic -g)
cxxflags=(-std=c++17 -Wall -Wextra -Werror -pedantic -g)
rpath="-Wl,-rpath,$prefix/lib"
read -r -a inc <<<"$(pkg-config --cflags jets)"
read -r -a libs <<<"$(pkg-config --libs jets)"
# pkg-config --static lists the system libraries; -l:libjets.a picks the archive over the .so.
read -r -a static_libs <<<"$(pkg-config --libs jets-static)"

# check_host: the host monitor's trace from the last api_test run (two monitor sessions), and its
# write-failure trace.
check_host() {
    python3 "$check" "$work/host.jets"
    python3 - "$work/host.jets" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hosts = [l for l in lines if l.get("type") == "record" and l.get("record_type") == "HostProcess"]
ends = {l["record_id"] for l in lines if l.get("type") == "record_end"}
syncs = [l for l in lines if l.get("type") == "event" and l.get("name") == "HostSync"]
caps = [l for l in lines if l.get("type") == "annotation" and l.get("name") == "HostCapabilities"]
assert len(hosts) == 2, f"expected 2 HostProcess records, got {len(hosts)}"
assert all(h["id"] in ends for h in hosts), "a HostProcess record was not ended"
assert len(caps) == 2, f"expected 2 HostCapabilities annotations, got {len(caps)}"
assert len(syncs) >= 2, f"expected HostSync samples, got {len(syncs)}"
print(f"host monitor: {len(hosts)} sessions, {len(syncs)} HostSync samples")
PY
    # The write-failure trace: a prefix of whole JSON lines, within the 8 KiB file size limit.
    python3 - "$work/full.jets" <<'PY'
import json, os, sys
data = open(sys.argv[1], "rb").read()
assert 0 < len(data) <= 8192 and data.endswith(b"\n"), f"not a prefix of whole lines ({len(data)} bytes)"
lines = [json.loads(l) for l in data.decode().splitlines()]
assert lines[0]["type"] == "header" and lines[-1]["type"] != "footer", "unexpected first/last line"
print(f"write failure: {len(lines)} whole lines kept ({len(data)} bytes)")
PY
    if [ ${#validate[@]} -gt 0 ]; then
        "${validate[@]}" "$work/host.jets"
    fi
}

# Each sub-step says how long the one before took, as scripts/test's steps do.
sub_last=$SECONDS
step() {
    printf -- '--- %s   [previous %ds]\n' "$*" $((SECONDS - sub_last))
    sub_last=$SECONDS
}

# ---- the TSan build of libjets, in the background --------------------------------------------
# The standard library must be rebuilt with the sanitizer (-Zbuild-std, nightly + rust-src): the
# suite's longest build. It runs beside the steps below (valgrind runs one thread at a time, so a
# core is free most of the time) and the TSan step waits for it. It is kept small and cached:
# only the cdylib of jets-c, without the compressors (no zstd C library; the TSan runs write plain
# .jets), at opt-level 1 with line tables, in a target directory of its own that later runs reuse
# (then only changed crates build). JETS_TSAN=0 skips it.
host="$(rustc -vV | sed -n 's/^host: //p')"
tsan_target="$target/tsan"
tsan_pid=""
tsan_note=""
if [ "${JETS_TSAN:-1}" = 0 ]; then
    tsan_note="SKIPPED: the TSan pass (JETS_TSAN=0)"
elif ! command -v rustup >/dev/null; then
    tsan_note="NOTE: no rustup here, so no nightly toolchain for -Zsanitizer=thread: TSan not run"
elif ! { rustup run nightly rustc --version >/dev/null 2>&1 \
        && rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; } \
    && ! timeout 600 rustup toolchain install nightly --profile minimal --component rust-src >/dev/null 2>&1; then
    tsan_note="NOTE: the nightly toolchain with rust-src is not installable here: TSan not run"
else
    tsan_started=$(date +%s)
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
        CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 RUSTFLAGS="-Zsanitizer=thread" \
        timeout 1200 cargo +nightly rustc -Zbuild-std --target "$host" -p jets-c --no-default-features \
        --release --lib --crate-type cdylib --target-dir "$tsan_target" \
        </dev/null >"$work/tsan-build.log" 2>&1 &
    tsan_pid=$!
fi

# run NAME CMD...: runs a test program writing $work/NAME.jets; its stdout goes to $work/NAME.out.
run() {
    local name="$1"
    shift
    "$@" >"$work/$name.out"
    check_trace "$work/$name.jets" "$work/$name.out"
}

step "C99 test program (shared libjets, gcc)"
gcc "${cflags[@]}" "${inc[@]}" -o "$work/api_test" "$tests/api_test.c" "${libs[@]}" -lpthread "$rpath"
run api "$work/api_test" "$work/api.jets" "$work"
check_host

step "C99 capture control (JETS_CAPTURE read by jets_open, ROI, on/off, dump)"
gcc "${cflags[@]}" "${inc[@]}" -o "$work/capture_test" "$tests/capture_test.c" "${libs[@]}" "$rpath"
JETS_CAPTURE="roi;events=Keep" run capture "$work/capture_test" "$work/capture.jets"
grep -q '"capture":"roi;events=Keep"' "$work/capture.jets" || { echo "FAIL: no capture setting in the footer"; exit 1; }
# CAP-COUNT-1 through jets_open: the same setting with `count` writes no line and counts
# exactly what the trace above holds.
JETS_CAPTURE="roi;events=Keep;count" "$work/capture_test" "$work/capture-count.jets" >/dev/null
python3 - "$work/capture.jets" "$work/capture-count.jets" <<'PY' || { echo "FAIL: count through the C API"; exit 1; }
import json, sys
written = json.loads(open(sys.argv[1]).read().splitlines()[-1])
lines = open(sys.argv[2]).read().splitlines()
counted = json.loads(lines[-1])
assert len(lines) == 2, lines
assert counted["capture"] == "roi;events=Keep;count", counted
for kind in ("records", "events", "annotations"):
    assert counted["counted_" + kind] == written["total_" + kind], (kind, counted, written)
    assert counted["total_" + kind] == 0, counted
PY
if JETS_CAPTURE="clk=9..3" "$work/capture_test" "$work/capture-bad.jets" 2>"$work/capture-bad.err"; then
    echo "FAIL: a bad JETS_CAPTURE clause did not fail jets_open"; exit 1
fi
grep -q 'JETS_CAPTURE clause `clk=9..3`: the window is empty' "$work/capture-bad.err" || { cat "$work/capture-bad.err"; echo "FAIL: the error does not name the clause"; exit 1; }

step "C99 test program (static libjets.a)"
gcc "${cflags[@]}" "${inc[@]}" -o "$work/api_static" "$tests/api_test.c" "${static_libs[@]}" -lpthread
if ldd "$work/api_static" | grep -q libjets; then
    echo "FAIL: api_static links libjets dynamically"
    exit 1
fi
run api_static "$work/api_static" "$work/api_static.jets" "$work"
check_host

step "C++17 wrapper test program (jets.hpp)"
g++ "${cxxflags[@]}" "${inc[@]}" -o "$work/wrapper_test" "$tests/wrapper_test.cpp" "${libs[@]}" -pthread "$rpath"
run wrapper "$work/wrapper_test" "$work/wrapper.jets"
python3 "$check" "$work/wrapper.jets.host"
python3 "$check" "$work/wrapper.jets.late" --expect "records=2 record_ends=0 open=2"
python3 "$check" "$work/wrapper.jets.dropped" --expect "records=1 record_ends=0 open=1"
# Capture in code with regions of interest: the events inside, 2 4 5 (3 was made with capture off).
python3 "$check" "$work/wrapper.jets.roi" --expect "records=1 record_ends=1 events=3"
# The size limit: the file ends at the batch that reached 16 KiB, the root left open, nothing
# emitted after the limit written, and the footer says so.
python3 "$check" "$work/wrapper.jets.limit" --expect "records=1 record_ends=0 open=1" >/dev/null
grep -q '"limit_reached":true' "$work/wrapper.jets.limit" || { echo "FAIL: wrapper.jets.limit: no limit_reached in the footer"; exit 1; }
! grep -q '"after-the-limit"' "$work/wrapper.jets.limit" || { echo "FAIL: wrapper.jets.limit: a line after the limit was written"; exit 1; }
[ "$(grep -o '"name":"[a-z-]*","record_id"' "$work/wrapper.jets.roi" | cut -d'"' -f4 | tr '\n' ' ')" \
    = "inside nested inside-again " ] || { echo "FAIL: wrapper.jets.roi holds the wrong events"; exit 1; }
grep -q '"record_type":"HostProcess"' "$work/wrapper.jets.host"
grep -q '"name":"typed-status".*"status":"stalled"' "$work/wrapper.jets"
grep -q '"name":"dynamic".*"severity":"warning".*"k9":9' "$work/wrapper.jets"
grep -q '"type":"record_end".*"status":"flushed"' "$work/wrapper.jets"

step "JETS_DISABLE: C99 and C++17, linked without libjets"
gcc "${cflags[@]}" "${inc[@]}" -o "$work/disabled_c" "$tests/disabled_test.c"
g++ "${cxxflags[@]}" -x c++ "${inc[@]}" -o "$work/disabled_cpp" "$tests/disabled_test.c"
for bin in disabled_c disabled_cpp; do
    if nm -u "$work/$bin" | grep -q ' jets_'; then
        echo "FAIL: $bin references libjets symbols although JETS_DISABLE is defined"
        exit 1
    fi
    (cd "$work" && "./$bin")
done
if ls "$work"/never-created.jets >/dev/null 2>&1; then
    echo "FAIL: a disabled program created a trace"
    exit 1
fi

step "valgrind (memcheck, leaks)"
vg=(valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible)
run api_vg "${vg[@]}" "$work/api_test" "$work/api_vg.jets" "$work"
check_host
run wrapper_vg "${vg[@]}" "$work/wrapper_test" "$work/wrapper_vg.jets"

step "AddressSanitizer + UndefinedBehaviorSanitizer"
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
sanitized=0
for cc in clang-19 clang gcc; do
    command -v "$cc" >/dev/null || continue
    cxx="${cc/clang/clang++}"
    cxx="${cxx/gcc/g++}"
    if "$cc" "${cflags[@]}" "${san[@]}" "${inc[@]}" -o "$work/api_san" "$tests/api_test.c" \
        "${libs[@]}" -lpthread "$rpath" 2>"$work/san.log"; then
        "$cxx" "${cxxflags[@]}" "${san[@]}" "${inc[@]}" -o "$work/wrapper_san" \
            "$tests/wrapper_test.cpp" "${libs[@]}" -pthread "$rpath"
        echo "sanitizers built with $cc ($("$cc" -dumpversion))"
        sanitized=1
        break
    fi
    echo "NOTE: $cc cannot build with sanitizers here: $(head -n1 "$work/san.log")"
done
[ "$sanitized" = 1 ] || { echo "FAIL: no compiler could build the sanitizer tests"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
run api_san "$work/api_san" "$work/api_san.jets" "$work"
check_host
run wrapper_san "$work/wrapper_san" "$work/wrapper_san.jets"
unset ASAN_OPTIONS UBSAN_OPTIONS

step "packaging: stripped artefacts, version macros, static library exports only jets_*"
so="$(readlink -f "$prefix/lib/libjets.so")"
if readelf -S "$so" | grep -q "\.symtab"; then echo "FAIL: $so is not stripped"; exit 1; fi
# readelf, not nm: GNU nm loads the LLVM linker plugin, which aborts on Rust objects here.
globals() { readelf -sW "$prefix/lib/libjets.a" | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" { print $8 }'; }
leaked="$(globals | grep -v '^jets_' | head -n5 || true)"
[ -z "$leaked" ] || { echo "FAIL: libjets.a exports non-jets symbols: $leaked"; exit 1; }
echo "libjets.so $(du -h "$so" | cut -f1), libjets.a $(du -h "$prefix/lib/libjets.a" | cut -f1); libjets.a exports $(globals | grep -c '^jets_') jets_* functions and nothing else"
# A program with its own zstd keeps its own: ZSTD_versionNumber is not ours.
cat >"$work/own_zstd.c" <<'C'
#include <jets.h>
#include <stdio.h>
unsigned ZSTD_versionNumber(void) { return 4242u; }
int main(void) {
    printf("version %d.%d.%d %s zstd=%u\n", JETS_VERSION_MAJOR, JETS_VERSION_MINOR,
           JETS_VERSION_PATCH, jets_version(), ZSTD_versionNumber());
    return ZSTD_versionNumber() == 4242u ? 0 : 1;
}
C
gcc "${cflags[@]}" "${inc[@]}" -o "$work/own_zstd" "$work/own_zstd.c" "${static_libs[@]}" -lpthread
"$work/own_zstd" | tee "$work/own_zstd.out"
grep -qx "version ${version//./\\.} $version zstd=4242" "$work/own_zstd.out"
# C++14 gets one clear message.
printf '#include <jets.hpp>\nint main() { return 0; }\n' >"$work/cxx14.cpp"
if g++ -std=c++14 "${inc[@]}" -c -o /dev/null "$work/cxx14.cpp" 2>"$work/cxx14.log"; then
    echo "FAIL: jets.hpp compiled as C++14"; exit 1
fi
grep -m1 "needs C++17" "$work/cxx14.log"

step "outside pkg-config project (as documented): shared with rpath, and static"
mkdir -p "$work/outside"
cp examples/c/systolic.c "$work/outside/"
(
    cd "$work/outside"
    cc -std=c99 -O2 systolic.c -o systolic $(pkg-config --cflags --libs jets)
    cc -std=c99 -O2 systolic.c -o systolic-static $(pkg-config --cflags --libs jets-static)
    # No LD_LIBRARY_PATH: the .pc file's rpath finds libjets.so.0.
    env -u LD_LIBRARY_PATH ./systolic out.jets 4 4 | grep -q '^result ok'
    ./systolic-static out-static.jets 4 4 | grep -q '^result ok'
    if ldd systolic-static | grep -q libjets; then echo "FAIL: the static build links libjets.so"; exit 1; fi
)
python3 "$check" "$work/outside/out.jets"
python3 "$check" "$work/outside/out-static.jets"
echo "outside pkg-config project: shared and static builds run"

# ---- the safety tests ----------------------------------------------------------------------
# safety_checks RUNNER...: every mode of safety_test under RUNNER (valgrind, or nothing for a
# sanitizer build), each bounded in time; traces checked as the program says.
gcc "${cflags[@]}" -std=gnu99 "${inc[@]}" -o "$work/safety" "$tests/safety_test.c" "${libs[@]}" -lpthread "$rpath"
safety_checks() {
    local bin="$1" tag="$2"
    shift 2
    local d="$work/safety-$tag"
    rm -rf "$d"
    mkdir -p "$d"
    for mode in fork signal drop badjson closed parity cancel; do
        local runner=("$@") children=40
        if [ "$tag" = valgrind ] && [ "$mode" = fork ]; then
            # valgrind runs one thread at a time; with its default (unfair) lock, the four
            # threads spinning on compare-and-swap in libjets could keep the thread they wait for
            # from running: a child took ~30 s, 20 took over 300 s. --fair-sched=yes (in both
            # runners) hands the lock round in turn: 20 children in ~4 s. A forked child holds
            # the memory of threads that did not survive the fork (the writer's buffers), which
            # valgrind calls leaked in every child: memory errors only.
            children=20
            runner=(valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=no)
            echo "NOTE: safety_test fork under valgrind forks $children children (40 plain), memory errors only"
        fi
        if [ "$tag" = asan ] && [ "$mode" = fork ]; then
            # No ASan runtime here survives a fork while other threads are inside malloc or free
            # (the writer, or a producer encoding a batch while it waits for room): a child can
            # wait forever for a lock of ASan's that a vanished thread held. Clang 14's and
            # GCC 12's do not lock their allocator around fork (gdb:
            # SizeClassAllocator64::GetFromAllocator, LargeMmapAllocator::Allocate; 2 of 6 runs).
            # Clang 19's does, but not its quarantine: a child's writer thread spun forever in
            # free -> Quarantine::Drain -> StaticSpinMutex::LockSlow (once in CI on 2026-11-30;
            # twice in 115 runs here with two runs side by side, where a thread started in a child
            # also once failed ASan's own CHECK at asan_thread.cpp:452). glibc's malloc is
            # fork-safe: the fork mode runs plain (40 children) and under valgrind (memory errors).
            echo "NOTE: safety_test fork not run under ASan: $cc's ASan runtime is not fork-safe (its quarantine lock, or its allocator's, can be inherited held)"
            continue
        fi
        SAFETY_FORK_CHILDREN=$children \
            timeout 300 "${runner[@]}" "$bin" "$mode" "$d" >"$d/$mode.out" || {
            echo "FAIL: safety_test $mode ($tag)"; cat "$d/$mode.out"; exit 1; }
        grep -v '^expect' "$d/$mode.out" || true
    done
    # A fatal signal: the handler saves what was emitted, then the process dies of it.
    if "$@" "$bin" fatal "$d/fatal.jets" >"$d/fatal.out" 2>&1; then
        echo "FAIL: safety_test fatal survived abort()"; exit 1
    fi
    python3 - "$d/fatal.jets" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
events = sum(1 for l in lines if l["type"] == "event")
assert events == 1000, f"the fatal-signal flush saved {events} of 1000 events"
print("fatal signal: all 1000 unflushed events saved before SIGABRT")
PY
    # exit() without jets_close, after a forked child's own exit(): the exit handler closes the
    # trace, footer included. (Under valgrind without the leak check, as for fork: the child
    # holds the memory of threads that did not survive the fork.)
    local exit_runner=("$@")
    [ "$tag" = valgrind ] && exit_runner=(valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=no)
    timeout 300 "${exit_runner[@]}" "$bin" exit "$d/exit.jets" >"$d/exit.out" || {
        echo "FAIL: safety_test exit ($tag)"; cat "$d/exit.out"; exit 1; }
    check_trace "$d/exit.jets" "$d/exit.out"
    echo "exit: a trace left open at exit() was closed by the exit handler, footer included"
    # SIGTERM without jets_close, after a forked child's own SIGTERM: the handler closes the
    # trace, footer included, and the process still dies of the signal (128 + 15).
    local rc=0
    timeout 300 "${exit_runner[@]}" "$bin" sigterm "$d/sigterm.jets" >"$d/sigterm.out" || rc=$?
    [ "$rc" -eq 143 ] || {
        echo "FAIL: safety_test sigterm ($tag): exit status $rc, not death by SIGTERM (143)"
        cat "$d/sigterm.out"; exit 1; }
    check_trace "$d/sigterm.jets" "$d/sigterm.out"
    echo "sigterm: a trace left open at SIGTERM was closed by its handler, footer included"
    check_trace "$d/signal.jets" "$d/signal.out"
    check_trace "$d/badjson.jets" "$d/badjson.out"
    check_trace "$d/closed.jets" "$d/closed.out"
    check_trace "$d/parity.jets" "$d/parity.out"
    check_trace "$d/cancel.jets" "$d/cancel.out"
    # Each opener's last trace, closed before its thread was cancelled.
    local own=0
    for f in "$d"/cancel-own-*.jets; do
        python3 "$check" "$f" --expect "records=1 record_ends=1 events=1 open=0" >/dev/null
        own=$((own + 1))
    done
    echo "cancel: the last trace of each of the $own cancelled openers is complete"
    # The fork mode's traces, where it ran (not under ASan, above).
    if [ -f "$d/fork.out" ]; then
        python3 "$check" "$d/parent.jets"
        python3 "$check" "$d/child.jets" --expect "records=1 record_ends=1 events=1 open=0"
    fi
    # Drop policy: every line the program made is either in the file or in the footer's counts.
    python3 - "$d/drop.jets" "$(sed -n 's/^expect-dropped lines=//p' "$d/drop.out")" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
footer = lines[-1]
written = sum(1 for l in lines if l["type"] in ("record", "record_end", "event", "annotation"))
dropped = sum(footer[k] for k in ("dropped_records", "dropped_events", "dropped_annotations", "dropped_record_ends"))
assert written + dropped == int(sys.argv[2]), f"{written} written + {dropped} dropped != {sys.argv[2]}"
assert dropped > 0, "nothing was dropped: no pressure"
print(f"drop policy: {written} lines written + {dropped} counted as dropped = {sys.argv[2]} made")
PY
}

step "safety tests (fork, signals, drop policy, bad JSON, closed traces, parity, cancellation)"
safety_checks "$work/safety" plain
step "safety tests under valgrind"
# A forked child holds the memory of threads that did not survive the fork (the writer's buffers),
# which valgrind calls leaked in every child: the fork mode is checked for memory errors only.
safety_checks "$work/safety" valgrind "${vg[@]}"

# full_disk DIR: .gz, .zst and plain traces on a full disk keep a valid prefix that `jets repair`
# completes; opening over an existing trace on a full disk fails and leaves it intact.
full_disk() {
    local dir="$1" how="$2" f
    for f in full.jets.gz full.jets.zst full.jets; do
        "$work/safety" full "$dir/$f"
        case "$f" in
            *.gz) gzip -t "$dir/$f" ;;
            *.zst) zstd -q -t "$dir/$f" ;;
        esac
        if [ ${#validate[@]} -gt 0 ]; then
            "$target/debug/jets" repair "$dir/$f" -o "$work/repaired-$f.jets"
            "${validate[@]}" "$work/repaired-$f.jets"
        fi
        echo "$f: complete compressed stream / whole lines after the I/O error; jets repair completes it"
        rm -f "$dir/$f"
    done
    printf 'precious old trace\n' >"$dir/old.jets"
    if [ "$how" = tmpfs ]; then
        dd if=/dev/zero of="$dir/filler" bs=4k 2>/dev/null || true
        "$work/safety" open "$dir/old.jets"
    else
        (ulimit -f 0 && "$work/safety" open "$dir/old.jets")
    fi
    [ "$(cat "$dir/old.jets")" = "precious old trace" ] || { echo "FAIL: open destroyed the old trace"; exit 1; }
    [ -z "$(ls -A "$dir" | grep jets-tmp)" ] || { echo "FAIL: a temporary file was left"; exit 1; }
    echo "open over an existing trace on a full disk: refused, old trace intact"
    rm -f "$dir/filler" "$dir/old.jets"
}
step "full disk (ENOSPC) on .gz, .zst and plain traces"
if mkdir -p "$work/tmpfs" && mount -t tmpfs -o size=512k tmpfs "$work/tmpfs" 2>/dev/null; then
    full_disk "$work/tmpfs" tmpfs || { umount "$work/tmpfs"; exit 1; }
    umount "$work/tmpfs"
else
    echo "NOTE: cannot mount a small tmpfs here (not root); a 512 KiB file size limit stands in for a full disk (EFBIG instead of ENOSPC)"
    (ulimit -f 512 && full_disk "$work" limit)
fi

step "safety tests under ASan/UBSan"
"$cc" "${cflags[@]}" -std=gnu99 "${san[@]}" "${inc[@]}" -o "$work/safety_san" "$tests/safety_test.c" "${libs[@]}" -lpthread "$rpath"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    safety_checks "$work/safety_san" asan

step "TSan: libjets built with -Zsanitizer=thread, C tests with -fsanitize=thread"
tsan_ok=0
if [ -z "$tsan_pid" ]; then
    echo "$tsan_note"
else
    tsan_rc=0
    wait "$tsan_pid" || tsan_rc=$?
    tsan_pid=""
    if [ "$tsan_rc" = 0 ]; then
        tsan_secs=$(($(stat -c %Y "$work/tsan-build.log") - tsan_started))
        echo "TSan build of libjets: ${tsan_secs} s beside the steps above (std rebuilt with the sanitizer; cached in $tsan_target)"
        tlib="$tsan_target/$host/release"
        ln -sf "$tlib/libjets_c.so" "$tlib/libjets.so.0"
        # The programs link the TSan runtime of the toolchain that instrumented libjets: rustc's
        # LLVM calls __tsan_memcpy/memset/memmove, which GCC 12's libtsan and clang 14's runtime
        # lack. GCC instruments the C code; the runtime is rustc's, whole, in the executable.
        rt="$(rustc +nightly --print sysroot)/lib/rustlib/$host/lib/librustc-nightly_rt.tsan.a"
        tsan_link=(-Wl,--whole-archive "$rt" -Wl,--no-whole-archive -L"$tlib" -ljets_c
            -lpthread -ldl -lm -lrt -lstdc++ -Wl,-rpath,"$tlib")
        gcc -std=gnu99 -g -fsanitize=thread "${inc[@]}" -c -o "$work/safety_tsan.o" "$tests/safety_test.c"
        gcc -o "$work/safety_tsan" "$work/safety_tsan.o" "${tsan_link[@]}"
        gcc -std=c99 -g -fsanitize=thread "${inc[@]}" -c -o "$work/api_tsan.o" "$tests/api_test.c"
        gcc -o "$work/api_tsan" "$work/api_tsan.o" "${tsan_link[@]}"
        export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
        # TSan does not support fork with other threads alive; the other modes run.
        d="$work/safety-tsan"; mkdir -p "$d"
        for mode in signal drop badjson closed parity cancel; do
            timeout 300 "$work/safety_tsan" "$mode" "$d" >"$d/$mode.out" || {
                echo "FAIL: safety_test $mode (TSan)"; cat "$d/$mode.out"; exit 1; }
        done
        for mode in signal badjson closed parity cancel; do check_trace "$d/$mode.jets" "$d/$mode.out"; done
        timeout 300 "$work/api_tsan" "$work/api_tsan.jets" "$work" >"$work/api_tsan.out" || {
            echo "FAIL: api_test (TSan)"; cat "$work/api_tsan.out"; exit 1; }
        check_trace "$work/api_tsan.jets" "$work/api_tsan.out"
        unset TSAN_OPTIONS
        echo "TSan: safety modes signal, drop, badjson, closed, parity, cancel and api_test ran race-free"
        tsan_ok=1
    else
        echo "FAIL: the TSan build of libjets failed or took over 20 minutes:"; tail -n5 "$work/tsan-build.log"; exit 1
    fi
fi
[ "$tsan_ok" = 1 ] || echo "NOTE: TSan not run here; the valgrind and ASan runs stand"

step "examples/c with CMake against the installed package"
cmake -S examples/c -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/examples" -j 2 >/dev/null
"$work/examples/systolic" "$work/systolic.jets" 8 16 | tee "$work/systolic.out"
# 8x8 PEs times K=16 multiply-accumulates; the checksum is of the exact product.
grep -qx 'result ok n=8 k=16 cycles=30 checksum=336 macs=1024' "$work/systolic.out"
echo "expect records=65 record_ends=65 events=1024 annotations=65 open=0 end_clk=30" >>"$work/systolic.out"
check_trace "$work/systolic.jets" "$work/systolic.out"
"$work/examples/dma" "$work/dma.jets" 24 | tee "$work/dma.out"
grep -q '^copied 4572 bytes in 84 bursts of 24 descriptors in [0-9]* cycles ok$' "$work/dma.out"
echo "expect records=109 record_ends=109 events=252 annotations=1 open=0" >>"$work/dma.out"
check_trace "$work/dma.jets" "$work/dma.out"

echo "C and C++ bindings: all checks passed"
