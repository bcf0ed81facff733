#!/usr/bin/env bash
# Every export opened by the tool its users already have, installed from its registry:
#   * DFTracer: `dftracer-utils` (PyPI) reads `jets convert --to dftracer` of the `jets demo`
#     trace; its record count, event count, and every record's ts/dur (integer ns) equal the JETS
#     trace's; `jets import` of the same file restores every record's cycles.
#   * denet: denet's own reader and summary (PyPI `denet`) on `jets run` output: the summary equals
#     `jets stats`, the `child` lines name every descendant with its command line, and
#     `jets import --from denet` keeps each child's samples.
#   * Chrome JSON: DevTools' trace engine (npm `@paulirish/trace_engine`) loads the demo's Chrome
#     trace: one slice per record, one instant per event, every thread named by our metadata; and
#     the same for a capture window's demo, whose export also marks the window (CV-CAP-1).
# Perfetto (its own protos) is scripts/test.d/40-perfetto.sh; Konata, which no registry has, is
# viewer-cli/tests/kanata_konata.rs. Installs are cached under target/real-clients
# (scripts/lib/real-clients.bash).
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/lib/real-clients.bash
real_clients_python
real_clients_npm
engine="$REAL_CLIENTS_NPM/@paulirish/trace_engine"
venv_py="$REAL_CLIENTS_PY"

cargo build -q --locked -p jets-cli
jets="$target/debug/jets"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$jets" demo --out "$work/demo" --words 32 >/dev/null
trace="$work/demo/pipeline.jets"

echo "--- DFTracer: dftracer-utils 0.0.14 reads jets convert --to dftracer"
"$jets" convert "$trace" --to dftracer -o "$work/demo.pfw.gz"
"$jets" import --from dftracer "$work/demo.pfw.gz" -o "$work/back.jets" 2>/dev/null
"$venv_py" - "$trace" "$work/demo.pfw.gz" "$work/back.jets" <<'PY'
import json, sys
from dftracer.utils import TraceViewer, set_log_level

set_log_level("error")
jets, pfw, back = sys.argv[1:]

def records(path):
    start, end, names, events, mhz, last = {}, {}, {}, 0, 1.0, 0
    for line in open(path):
        l = json.loads(line)
        t = l["type"]
        if t == "header":
            mhz = l["metadata"].get("clock_frequency_mhz", 1.0)
        elif t == "record":
            start[l["id"]], names[l["id"]] = l["clk"], (l["name"], l["record_type"])
        elif t == "record_end":
            end[l["record_id"]] = l["clk"]
        elif t == "event":
            events += 1
        elif t == "footer":
            last = max(last, l.get("capture_end_clk") or 0)
        last = max(last, l.get("clk", 0))
    return start, {i: end.get(i, last) for i in start}, names, events, mhz

start, end, names, events, mhz = records(jets)
assert mhz <= 1000, "this check expects real nanoseconds (CV-DFT-2)"
ns = lambda c: round(c * 1000 / mhz)
tv = TraceViewer(pfw)
assert tv.time_metric() == "ns", tv.time_metric()
d = tv.select("name", "cat", "ts", "dur", "args.jets_id").collect().to_dict()
rows = list(zip(d["name"], d["cat"], d["ts"], d["dur"], d["args.jets_id"]))
slices = [r for r in rows if r[1] != "jets_event"]
instants = [r for r in rows if r[1] == "jets_event"]
assert len(slices) == len(start), (len(slices), len(start))
assert len(instants) == events, (len(instants), events)
for name, cat, ts, dur, rid in slices:
    want = (ns(start[rid]), ns(end[rid]) - ns(start[rid]))
    assert (name, cat) == names[rid] and (ts, dur) == want, (name, ts, dur, want)
zero = [r for r in slices if r[3] == 0 and end[r[4]] > start[r[4]]]
assert not zero, f"durations of a cycle or more read as 0: {zero[:3]}"
total = sum(r[3] for r in slices)
assert total == sum(ns(end[i]) - ns(start[i]) for i in start) and total > 0
# jets import of the same file: every record's cycles come back.
b_start, b_end, b_names, b_events, _ = records(back)
key = lambda s, e, n: sorted((n[i], s[i], e[i]) for i in s)
assert key(b_start, b_end, b_names) == key(start, end, names), "round trip changed cycles"
assert b_events == events
print(f"dftracer-utils: {len(slices)} records, {len(instants)} events, {total} ns of durations, "
      f"round trip exact: ok")
PY

echo "--- denet: denet 0.10.3 reads jets run output"
"$jets" run --quiet --write-env -i 50 -o "$work/run.jsonl" -- \
    sh -c 'sleep 0.4 & (sleep 0.3; true) & wait'
"$jets" stats --format json "$work/run.jsonl" >"$work/run.stats.json"
"$jets" import --from denet "$work/run.jsonl" -o "$work/run.jets" 2>/dev/null
"$venv_py" - "$work/run.jsonl" "$work/run.stats.json" "$work/run.jets" <<'PY'
import json, sys
import denet
from denet.analysis import load_metrics, process_tree_analysis
from denet.report import _load_records

run, ours, imported = sys.argv[1:]
theirs = json.loads(denet.generate_summary_from_file(run))
ours = json.loads(open(ours).read())
for k in ("sample_count", "max_processes", "max_threads", "peak_mem_rss_kb",
          "total_syscall_read_bytes", "total_disk_write_bytes"):
    assert theirs[k] == ours[k], (k, theirs[k], ours[k])
meta, rows = _load_records(run)
children = meta["_children"]
assert len(rows) == ours["sample_count"], (len(rows), ours["sample_count"])
sleeps = [c for c in children.values() if c[:1] == ["sleep"]]
assert sorted(sleeps) == [["sleep", "0.3"], ["sleep", "0.4"]], children
trees = [m for m in load_metrics(run) if m.get("kind") == "tree"]
tree = process_tree_analysis(trees)
seen = {c["pid"] for t in trees for c in t.get("children") or []}
assert seen <= set(children), (seen, children)
# jets import --from denet: one HostProcess record per child, one HostSample per tree it is in.
per_child = {}
for t in trees:
    if t.get("aggregated") is None:
        continue
    for c in t.get("children") or []:
        per_child[c["pid"]] = per_child.get(c["pid"], 0) + 1
recs, samples = {}, {}
for line in open(imported):
    l = json.loads(line)
    if l["type"] == "record" and l["parent_id"] is not None:
        recs[l["id"]] = l["data"]["pid"]
        assert l["data"].get("cmd") == children.get(l["data"]["pid"]), l
    elif l["type"] == "event" and l["record_id"] in recs:
        pid = recs[l["record_id"]]
        samples[pid] = samples.get(pid, 0) + 1
assert {p: n for p, n in samples.items()} == per_child, (samples, per_child)
print(f"denet: {len(rows)} samples, {len(children)} child lines, summary equal to jets stats, "
      f"{sum(samples.values())} per-child samples imported: ok")
PY

echo "--- Chrome JSON: DevTools' trace engine 0.0.65 loads jets convert --to chrome"
"$jets" convert "$trace" --to chrome -o "$work/demo.json"
# A capture window's trace, whose export also marks the window's edges with global instants
# (CV-CAP-1): the engine must load it as it loads the rest.
JETS_CAPTURE="clk=2000..3000" "$jets" demo --out "$work/window" --words 32 >/dev/null
"$jets" convert "$work/window/pipeline.jets" --to chrome -o "$work/window.json"
"$jets" convert viewer-cli/tests/data/trace/rjets_tests_trace.jets --to chrome -o "$work/rjets.json"
cat >"$work/engine.mjs" <<'JS'
import fs from 'node:fs';
import path from 'node:path';
const [engineDir, file] = process.argv.slice(2);
globalThis.DOMRect = class { constructor(x = 0, y = 0, w = 0, h = 0) { Object.assign(this, {x, y, width: w, height: h}); } };
const Trace = await import(path.join(engineDir, 'models/trace/trace.js'));
const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(doc.traceEvents);
const data = model.parsedTrace().data;
const out = {threads: [], slices: 0, instants: 0};
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, th] of proc.threads) {
    const slices = th.entries.filter(e => e.ph === 'X').length;
    const instants = th.entries.filter(e => e.ph === 'I').length;
    out.threads.push({pid, tid, name: th.name ?? null, slices, instants});
    out.slices += slices;
    out.instants += instants;
  }
}
console.log(JSON.stringify(out));
JS
for t in demo rjets window; do
    node "$work/engine.mjs" "$engine" "$work/$t.json" >"$work/$t.engine.json"
done
"$venv_py" - "$trace" "$work/demo.engine.json" viewer-cli/tests/data/trace/rjets_tests_trace.jets "$work/rjets.engine.json" "$work/window/pipeline.jets" "$work/window.engine.json" <<'PY'
import json, sys

def counts(path):
    r = e = 0
    for line in open(path):
        t = json.loads(line)["type"]
        r += t == "record"
        e += t == "event"
    return r, e

for jets, engine, names in [
    (sys.argv[1], sys.argv[2], ["IF (PipelineStage)", "WB (PipelineStage)", "dcache (Cache)"]),
    (sys.argv[3], sys.argv[4], ["core_0 (Core)"]),
    (sys.argv[5], sys.argv[6], ["MEM (PipelineStage)", "dcache (Cache)"]),
]:
    got = json.load(open(engine))
    records, events = counts(jets)
    assert (got["slices"], got["instants"]) == (records, events), (got["slices"], got["instants"], records, events)
    threads = got["threads"]
    unnamed = [t for t in threads if not t["name"] or t["name"] == str(t["tid"])]
    assert not unnamed, f"threads the engine could not name: {unnamed}"
    have = {t["name"] for t in threads}
    for n in names:
        assert n in have, (n, sorted(have))
    print(f"trace_engine: {jets.rsplit('/', 1)[-1]}: {records} slices, {events} instants, "
          f"{len(threads)} named threads: ok")
PY
