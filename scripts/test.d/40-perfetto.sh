#!/usr/bin/env bash
# `jets convert --to perfetto` checked against Perfetto's own protobuf definitions: the output is
# decoded with the `perfetto` package's perfetto_trace_pb2 (from PyPI). Our encoder is
# hand-written, so a wrong field number would still "parse" in our own tests; this catches it.
# For the rjets test trace and the `jets demo` trace (longer than the writer's hold-back buffer):
# tracks defined before use, every track named, slices balanced, packet timestamps never
# decreasing on a sequence (CV-PERFETTO-1), lanes named after the core/thread/unit records on them
# (CV-NEST-2), one slice per record and one instant per event; and for a capture window's trace,
# a `capture` track marking the window's edges, and for one a size limit stopped, the cycle where
# it stopped (CV-CAP-1, CAP-LIM-1).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/real-clients.bash
real_clients_python
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cargo build -q --locked -p jets-cli
jets="${CARGO_TARGET_DIR:-$PWD/target}/debug/jets"
"$jets" demo --out "$out/demo" --words 32 >/dev/null
JETS_CAPTURE="clk=2000..3000" "$jets" demo --out "$out/window" --words 32 >/dev/null
JETS_CAPTURE="limit=64KiB" "$jets" demo --out "$out/limit" --words 32 >/dev/null
cp viewer-cli/tests/data/trace/rjets_tests_trace.jets "$out/rjets.jets"
for t in rjets demo/pipeline window/pipeline limit/pipeline; do
    "$jets" convert "$out/$t.jets" --to perfetto -o "$out/$t.pftrace"
done
"$REAL_CLIENTS_PY" - "$out" <<'PY'
import json, sys
from collections import Counter
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

def check(base, root_name, want_names):
    records = events = 0
    for line in open(base + ".jets"):
        t = json.loads(line)["type"]
        records += t == "record"
        events += t == "event"
    t = Trace()
    t.ParseFromString(open(base + ".pftrace", "rb").read())
    tracks, names, depth, slices, instants = {}, {}, Counter(), 0, 0
    last, late = {}, 0
    for p in t.packet:
        seq = p.trusted_packet_sequence_id
        assert seq >= 1
        if p.HasField("timestamp"):
            if p.timestamp < last.get(seq, 0):
                late += 1
            last[seq] = p.timestamp
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert not d.HasField("parent_uuid") or d.parent_uuid in tracks, "parent before child"
            assert d.sibling_merge_behavior == d.SIBLING_MERGE_BEHAVIOR_NONE, d
            tracks[d.uuid] = d  # a descriptor written again renames its track
        if seq == 1:
            for n in p.interned_data.event_names:
                names[n.iid] = n.name
        if p.HasField("track_event"):
            e = p.track_event
            assert e.track_uuid in tracks, "event on an undefined track"
            if e.type == TrackEvent.TYPE_SLICE_BEGIN:
                depth[e.track_uuid] += 1
                slices += 1
                assert (names.get(e.name_iid) if e.HasField("name_iid") else e.name), "unnamed slice"
            elif e.type == TrackEvent.TYPE_SLICE_END:
                depth[e.track_uuid] -= 1
                assert depth[e.track_uuid] >= 0, "end without begin"
            else:
                assert e.type == TrackEvent.TYPE_INSTANT, e.type
                assert e.HasField("name_iid") and e.name_iid in names or e.name, "unnamed instant"
                instants += 1
    assert all(v == 0 for v in depth.values()), "unbalanced slices"
    assert late == 0, f"{late} packets earlier than the one before them on their sequence"
    unnamed = [u for u, d in tracks.items() if not d.name]
    assert not unnamed, f"tracks without a name: {unnamed}"
    root = [d for d in tracks.values() if not d.HasField("parent_uuid")]
    assert any(d.name == root_name and d.child_ordering == d.EXPLICIT for d in root), root
    have = {d.name for d in tracks.values()}
    for n in want_names:
        assert n in have, (n, sorted(have))
    assert (slices, instants) == (records, events), (slices, instants, records, events)
    print(f"perfetto: {base.rsplit('/', 1)[-1]}: {len(t.packet)} packets on {len(last)} "
          f"sequence(s) in time order, {len(tracks)} named tracks, {slices} slices, "
          f"{instants} instants: ok")

def check_capture(base, says, want):
    """A part of a run's export (CV-CAP-1): a root track named `capture` whose description says
    the trace is a part of the run (`says`), holding the instants `want`, (ns, name), and nothing
    else (1 cycle = 1 ns in the demo)."""
    t = Trace()
    t.ParseFromString(open(base + ".pftrace", "rb").read())
    tracks, names, marks = {}, {}, []
    for p in t.packet:
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        for n in p.interned_data.event_names:
            names[(p.trusted_packet_sequence_id, n.iid)] = n.name
        if p.HasField("track_event") and tracks[p.track_event.track_uuid].name == "capture":
            e = p.track_event
            name = e.name if e.HasField("name") else names[(p.trusted_packet_sequence_id, e.name_iid)]
            marks.append((p.timestamp, name, e.type))
    capture = [d for d in tracks.values() if d.name == "capture"]
    assert len(capture) == 1 and not capture[0].HasField("parent_uuid"), capture
    assert says in capture[0].description, capture[0].description
    assert sorted(marks) == [(ns, name, TrackEvent.TYPE_INSTANT) for ns, name in want], marks
    print(f"perfetto: {base.rsplit('/', 2)[-2]}: a `capture` track with {len(marks)} mark(s): ok")

d = sys.argv[1]
check_capture(d + "/window/pipeline", "clk=2000..3000: a PART of the run",
              [(2000, "capture window begins"), (3000, "capture window ends")])
# A size limit: one mark, at the last cycle of the file's lines.
last = max(json.loads(l).get("clk", 0) for l in open(d + "/limit/pipeline.jets"))
check_capture(d + "/limit/pipeline", "limit=64KiB: a PART of the run (stopped at its size limit",
              [(last, "capture stops: size limit")])
check(d + "/rjets", "cluster_0 (Cluster)", ["core_0 (Core)"])
check(d + "/demo/pipeline", "core0 (Core)",
      ["IF (PipelineStage)", "WB (PipelineStage)", "dcache (Cache)"])
PY
