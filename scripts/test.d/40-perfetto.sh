#!/usr/bin/env bash
# `jets convert --to perfetto` checked against Perfetto's own protobuf definitions: the output of a
# real trace is decoded with the `perfetto` package's perfetto_trace_pb2 (from PyPI) and its
# tracks, interned names and slices are checked. Our encoder is hand-written, so a wrong field
# number would still "parse" in our own tests; this catches it.
set -euo pipefail
cd "$(dirname "$0")/../.."
apt_install python3-venv
venv="${TMPDIR:-/tmp}/jets-perfetto-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q 'perfetto==0.59.1' 'protobuf>=4,<7'
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cargo run -q --locked -p jets-cli -- convert viewer-cli/tests/data/trace/rjets_tests_trace.jets \
    --to perfetto -o "$out/rjets.pftrace"
"$venv/bin/python" - "$out/rjets.pftrace" <<'PY'
import sys
from collections import Counter
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

t = Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
tracks, names, depth, slices = {}, {}, Counter(), Counter()
for p in t.packet:
    assert p.trusted_packet_sequence_id == 1
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        assert d.uuid not in tracks, "track defined twice"
        assert not d.HasField("parent_uuid") or d.parent_uuid in tracks, "parent before child"
        tracks[d.uuid] = d
    for n in p.interned_data.event_names:
        names[n.iid] = n.name
    if p.HasField("track_event"):
        e = p.track_event
        assert e.track_uuid in tracks, "event on an undefined track"
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            depth[e.track_uuid] += 1
            slices[names.get(e.name_iid, e.name)] += 1
        elif e.type == TrackEvent.TYPE_SLICE_END:
            depth[e.track_uuid] -= 1
            assert depth[e.track_uuid] >= 0, "end without begin"
        else:
            assert e.type == TrackEvent.TYPE_INSTANT, e.type
            assert e.name_iid in names, "instant name not interned"
assert all(v == 0 for v in depth.values()), "unbalanced slices"
root = [d for d in tracks.values() if not d.HasField("parent_uuid")]
assert len(root) == 1 and root[0].name == "cluster_0 (Cluster)", root
assert root[0].child_ordering == root[0].EXPLICIT
assert sum(slices.values()) == 103, slices
print(f"perfetto: {len(t.packet)} packets, {len(tracks)} tracks, {sum(slices.values())} slices: ok")
PY
