#!/usr/bin/env bash
# `jets run` as an unprivileged user, checked against denet (PyPI) run by the same user on the
# same workload: a Python program whose forked child writes 4 MiB and stays unreaped (a zombie)
# for 0.5 s while the parent then writes 2 MiB. Both monitors must end with the same syscall and
# disk write totals (6 MiB, the child's included), and jets's totals must never dip meanwhile.
# As root the monitors run as `nobody` (setpriv); otherwise as the current user. Anything
# missing (setpriv, python3-venv, PyPI) ends the suite with SKIPPED and the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
skip() { echo "SKIPPED: 35-host-unprivileged: $*"; exit 0; }
[ "$(uname -s)" = Linux ] || skip "jets run needs Linux"
py=/usr/bin/python3
apt_install python3-venv util-linux || skip "cannot install python3-venv and util-linux"
[ -x "$py" ] || skip "no $py"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv >/dev/null || skip "no setpriv to drop root"
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi

target="${CARGO_TARGET_DIR:-target}"
venv="$target/pydeps/denet-0.10.3"
if ! "$venv/bin/python" -c 'import denet' 2>/dev/null; then
    rm -rf "$venv"
    "$py" -m venv "$venv" || skip "python3 -m venv failed"
    timeout 300 "$venv/bin/pip" install -q 'denet==0.10.3' || skip "pip install denet==0.10.3 failed"
fi
cargo build -q --locked -p jets-cli

# A directory the unprivileged user can use, on a disk (not tmpfs: disk bytes must be counted);
# jets and denet's package are copied there, as target/ may be out of the user's reach.
work=$(mktemp -d /var/tmp/jets-unpriv-XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cp "$target/debug/jets" "$work/jets"
site=$("$venv/bin/python" -c 'import denet, os; print(os.path.dirname(os.path.dirname(denet.__file__)))')
mkdir -p "$work/py" && cp -r "$site/denet" "$work/py/"
mkdir -m 777 "$work/out"
cat > "$work/workload.py" <<'PY'
import os, sys, time
prefix = sys.argv[1]
def write(path, n):
    with open(path, "wb") as f:
        f.write(b"\0" * n)
        f.flush()
        os.fsync(f.fileno())
pid = os.fork()
if pid == 0:
    write(prefix + ".child", 4 << 20)
    os._exit(0)
time.sleep(0.5)  # the child has exited; nobody reaps it yet
write(prefix + ".parent", 2 << 20)
os.waitpid(pid, 0)
time.sleep(0.5)  # denet's last sample is taken while the command lives
PY
chmod -R a+rX "$work"
[ "$(stat -f -c %T "$work")" != tmpfs ] || skip "$work is on tmpfs: no disk bytes to compare"

timeout 120 "${as_user[@]}" "$work/jets" run --quiet -i 50 -o "$work/out/jets.jsonl" \
    -- "$py" "$work/workload.py" "$work/out/jets"
timeout 120 "${as_user[@]}" env PYTHONPATH="$work/py" "$py" - "$work" <<'PY'
import json, sys
import denet
work = sys.argv[1]
code, mon = denet.execute_with_monitoring(
    ["/usr/bin/python3", work + "/workload.py", work + "/out/denet"],
    base_interval_ms=50, max_interval_ms=50, quiet=True)
assert code == 0, code
with open(work + "/out/denet.jsonl", "w") as f:
    for s in mon.get_samples():
        f.write(s + "\n")
PY

"$py" - "$work/out" <<'PY'
import json, sys
out = sys.argv[1]
def trees(path):
    rows = [json.loads(l) for l in open(path)]
    return [r["aggregated"] for r in rows if r.get("kind") == "tree" and r.get("aggregated")]
j, d = trees(out + "/jets.jsonl"), trees(out + "/denet.jsonl")
assert len(j) >= 10 and len(d) >= 5, (len(j), len(d))
written = 6 << 20
for key in ("syscall_write_bytes", "disk_write_bytes"):
    series = [a.get(key) or 0 for a in j]
    assert all(a <= b for a, b in zip(series, series[1:])), f"jets {key} dipped: {series}"
    jv, dv = series[-1], d[-1].get(key) or 0
    print(f"{key}: jets {jv}, denet {dv}, written {written}")
    assert written <= jv <= written + (64 << 10), f"jets {key} {jv} vs {written} written"
    assert abs(jv - dv) <= (64 << 10), f"jets {key} {jv} vs denet {dv}"
# Reads: denet's baseline is taken after the interpreter started, jets counts from the fork.
print(f"syscall_read_bytes: jets {j[-1].get('syscall_read_bytes')}, "
      f"denet {d[-1].get('syscall_read_bytes')} (denet's baseline excludes interpreter start-up)")
print("jets run unprivileged: I/O totals match denet's, no dip")
PY
