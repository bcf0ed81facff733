#!/usr/bin/env bash
# The eBPF I/O collector (sdk feature `ebpf`): builds its BPF programs with clang and runs the
# collector tests. As root with BPF allowed they trace a real workload; otherwise they print
# `unavailable: <reason>`, shown below as SKIPPED so a skip is never silent.
set -euo pipefail
cd "$(dirname "$0")/../.."
apt_install clang llvm
# tracefs is not always mounted on a fresh machine; the collector mounts it itself when it can.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test -p jets-host --features ebpf --locked --test ebpf_io -- --nocapture --test-threads=1 2>&1 | tee "$log"
cargo test -p jets-host --features ebpf --locked --lib ebpf
# `jets run --io-trace` end to end, and back through `jets import --from io-tracer`.
cargo test -p jets-cli --features ebpf --locked --test iotracer_run -- --nocapture 2>&1 | tee -a "$log"
if grep -q "unavailable: " "$log"; then
    # The unprivileged test always prints one such line (expected); more means a root test skipped.
    n=$(grep -c "unavailable: " "$log")
    if [ "$n" -gt 1 ]; then
        echo "SKIPPED: eBPF collector test on this machine: $(grep -m1 -o 'unavailable: .*' "$log")"
    fi
fi
echo "eBPF suite done"
