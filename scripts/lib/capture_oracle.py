#!/usr/bin/env python3
"""An independent check of capture control on a real simulator.

    capture_oracle.py FULL.jets SETTING=FILE.jets [SETTING=FILE.jets ...]

FULL is an unfiltered trace of a deterministic run whose lines all come through one ring (one
simulator thread, no host sampler); each FILE is a trace of the same run under the JETS_CAPTURE
SETTING. From FULL alone this computes the lines the setting selects, by the rules of
spec/write-decisions.md written again here in Python (not the SDK's code, nor the Rust
property tests' model), and compares them with FILE's as multisets of id-free keys: a record is
its path of (name, record_type, clk) from the root. Exits 1 naming the first differences.

Settings: clk=A..B, every=P, types=, events=, units=, sample=TYPE:N (CAP-WIN-1/2, CAP-SUB-1,
CAP-ANC-1), or recorder=CYCLES alone, dumped once at close (CAP-REC-1, CAP-REC-9), or limit=SIZE
alone (CAP-LIM-1: FULL's lines up to the one that brings the file, header included, to SIZE)."""
import collections
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def sizes(path):
    """The size of each line of the file, its newline included."""
    with open(path, "rb") as f:
        return [len(line) for line in f]


UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def size(v):
    digits = v.rstrip("BbKkMmGgIi")
    return int(digits) * UNITS[v[len(digits):].lower()]


def body(lines):
    return [l for l in lines if l["type"] in ("record", "record_end", "event", "annotation")]


def keyed(lines):
    """Lines as a multiset of keys that do not depend on ids."""
    path = {}
    out = collections.Counter()
    for l in lines:
        t = l["type"]
        if t == "record":
            parent = l.get("parent_id")
            key = (path[parent] if parent is not None else None, l["name"], l["record_type"], l["clk"])
            path[l["id"]] = key
            out[("record", key)] += 1
        elif t == "event":
            data = json.dumps(l.get("data"), sort_keys=True)
            out[("event", path[l["record_id"]], l["name"], l["clk"], data)] += 1
        elif t == "record_end":
            out[("record_end", path[l["record_id"]], l["clk"])] += 1
        elif t == "annotation":
            out[("annotation", path[l["record_id"]], l["name"])] += 1
    return out


def parse(setting):
    c = {"window": None, "every": None, "types": None, "events": None, "units": None,
         "samples": {}, "recorder": None, "limit": None}
    for clause in setting.split(";"):
        k, _, v = clause.partition("=")
        if k == "clk":
            a, b = v.split("..")
            c["window"] = (int(a), int(b))
        elif k == "every":
            c["every"] = int(v)
        elif k in ("types", "events"):
            c[k] = v.split(",")
        elif k == "units":
            c["units"] = [int(u) for u in v.split(",")]
        elif k == "sample":
            t, n = v.rsplit(":", 1)
            c["samples"][t] = int(n)
        elif k == "recorder":
            c["recorder"] = int(v)
        elif k == "limit" and setting == clause:
            c["limit"] = size(v)
        else:
            sys.exit(f"capture_oracle: clause {clause!r} is not one this oracle models")
    return c


def with_ancestors(rid, parent, into):
    while rid is not None and rid not in into:
        into.add(rid)
        rid = parent[rid]


def selected(full, c):
    """Windows, filters and samples: the selected lines, their ancestors, and the ends and
    matching annotations of every record written."""
    start, end = c["window"] or (0, 2**64)
    every = c["every"]

    def in_window(clk):
        if every is None:
            return start <= clk < end
        return clk >= start and (clk - start) % every < end - start

    info, parent, seen = {}, {}, collections.Counter()
    for l in full:
        if l["type"] != "record":
            continue
        p = l.get("parent_id")
        parent[l["id"]] = p
        up = info.get(p)
        # Left out with its parent, or for beginning after the last window (CAP-SUB-1, CAP-WIN-1).
        dead = (up is not None and up["dead"]) or (every is None and l["clk"] >= end)
        ty = l["record_type"]
        if not dead and ty in c["samples"]:
            # 1 in N of the records of the type that reach the sample, per thread (one here).
            dead = seen[ty] % c["samples"][ty] != 0
            seen[ty] += 1
        # The unit the line says (the last `unit_id` member, as json.loads keeps it); one that
        # is not a non-negative integer names no unit (CAP-FILT-1).
        unit = (l.get("data") or {}).get("unit_id")
        if isinstance(unit, bool) or not isinstance(unit, int) or unit < 0:
            unit = None
        if c["units"] is None:
            unit_ok = True
        elif unit is not None:
            unit_ok = unit in c["units"]
        else:
            unit_ok = up is not None and up["unit"]
        match = unit_ok and (c["types"] is None or ty in c["types"])
        info[l["id"]] = {"dead": dead, "unit": unit_ok, "match": match,
                         "selected": not dead and match and in_window(l["clk"])}
    written, events = set(), set()
    for n, l in enumerate(full):
        if l["type"] == "record" and info[l["id"]]["selected"]:
            with_ancestors(l["id"], parent, written)
        elif l["type"] == "event":
            r = info[l["record_id"]]
            if (not r["dead"] and r["match"] and in_window(l["clk"])
                    and (c["events"] is None or l["name"] in c["events"])):
                with_ancestors(l["record_id"], parent, written)
                events.add(n)
    out = []
    for n, l in enumerate(full):
        t = l["type"]
        if (t == "record" and l["id"] in written) or (t == "event" and n in events) \
                or (t == "record_end" and l["record_id"] in written) \
                or (t == "annotation" and l["record_id"] in written and info[l["record_id"]]["match"]):
            out.append(l)
    return out


def limited(full, line_sizes, limit):
    """A size limit alone: the file's lines in FULL's order, up to and with the one that
    brings it, header included, to `limit` bytes or past them (CAP-LIM-1)."""
    total, out = line_sizes[0], []
    for l, n in zip(full, line_sizes[1:]):
        if total >= limit:
            break
        out.append(l)
        total += n
    return out


def recorded(full, cycles):
    """A recorder dumped at close: the lines after the longest prefix (arrival order) at least
    `cycles` below the largest cycle, the records they need, and those records' ends. An
    annotation, which has no cycle, counts at the largest cycle seen when it came."""
    at, seen = [], 0
    for l in full:
        seen = max(seen, l.get("clk", 0))
        at.append(l.get("clk", seen))
    largest = seen
    i = 0
    while i < len(full) and at[i] + cycles <= largest:
        i += 1
    kept = full[i:]
    parent = {l["id"]: l.get("parent_id") for l in full if l["type"] == "record"}
    need = set()
    for l in kept:
        with_ancestors(l["id"] if l["type"] == "record" else l["record_id"], parent, need)
    kept_at = set(range(i, len(full)))
    return [l for n, l in enumerate(full)
            if n in kept_at or (l["type"] == "record" and l["id"] in need)
            or (l["type"] == "record_end" and l["record_id"] in need)]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    everything = load(sys.argv[1])
    full = body(everything)
    # The sizes of the header and of the body's lines, in order.
    assert everything[0]["type"] == "header" and everything[-1]["type"] == "footer"
    assert len(full) == len(everything) - 2, "FULL holds lines other than the spec's"
    full_sizes = sizes(sys.argv[1])[:-1]
    failed = 0
    for arg in sys.argv[2:]:
        setting, _, path = arg.rpartition("=")
        c = parse(setting)
        if c["limit"] is not None:
            want = keyed(limited(full, full_sizes, c["limit"]))
        elif c["recorder"] is not None:
            want = keyed(recorded(full, c["recorder"]))
        else:
            want = keyed(selected(full, c))
        have = keyed(body(load(path)))
        missing, extra = want - have, have - want
        verdict = "ok" if not (missing or extra) else "MISMATCH"
        print(f"{verdict}: {setting}: {sum(want.values())} lines selected, {path} holds "
              f"{sum(have.values())}; missing {sum(missing.values())}, extra {sum(extra.values())}")
        for k in list(missing)[:3]:
            print("    missing", k)
        for k in list(extra)[:3]:
            print("    extra", k)
        failed += bool(missing or extra)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
