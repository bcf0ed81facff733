#!/usr/bin/env bash
# The C and C++ bindings (libjets): installs the package under a temporary prefix, then builds
# and runs the C99 and C++17 test programs (warnings as errors) against it, shared and static;
# again under valgrind (no errors, no leaks) and ASan/UBSan; the JETS_DISABLE build (links
# without libjets); and the example simulators in examples/c, built by CMake with
# find_package(jets). Every trace produced is checked line by line (check_trace.py, and
# `jets validate` when the CLI has it) against the counts its program reports.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
apt_install gcc g++ make cmake pkg-config valgrind python3
# clang is preferred for the sanitizer run; without it (or its runtime) gcc's sanitizers are used.
apt_install clang libclang-rt-dev || echo "NOTE: clang with its sanitizer runtime is not installable here"

target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
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
read -r -a static_libs <<<"$(pkg-config --static --libs jets | sed 's/-ljets/-l:libjets.a/')"

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

step() { printf -- '--- %s\n' "$*"; }

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
grep -q '"record_type":"HostProcess"' "$work/wrapper.jets.host"

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
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible)
run api_vg "${vg[@]}" "$work/api_test" "$work/api_vg.jets" "$work"
check_host
run wrapper_vg "${vg[@]}" "$work/wrapper_test" "$work/wrapper_vg.jets"

step "AddressSanitizer + UndefinedBehaviorSanitizer"
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
sanitized=0
for cc in clang gcc; do
    command -v "$cc" >/dev/null || continue
    cxx="${cc/clang/clang++}"
    cxx="${cxx/gcc/g++}"
    if "$cc" "${cflags[@]}" "${san[@]}" "${inc[@]}" -o "$work/api_san" "$tests/api_test.c" \
        "${libs[@]}" -lpthread "$rpath" 2>"$work/san.log"; then
        "$cxx" "${cxxflags[@]}" "${san[@]}" "${inc[@]}" -o "$work/wrapper_san" \
            "$tests/wrapper_test.cpp" "${libs[@]}" -pthread "$rpath"
        echo "sanitizers built with $cc"
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
