#!/usr/bin/env python3
"""Checks a JETS trace written through libjets: every line parses as JSON and the spec's ordering
rules hold (header first, footer last, no forward references, parent before child, record_end
after its record and once); every clk lies in its record's span (children in their parent's,
events in their record's: the API refuses a clk before a start, and the tests never emit past an
end); the footer's totals match the lines.

File order after a record_end is not checked: the spec allows a line about a record after its
end, and the writer orders lines from different threads only by their record lines. With --expect "records=N events=M ..." (what the
test program says it wrote) the counts must match too.

Usage: check_trace.py TRACE [--expect "KEY=N ..."]
Exits 1 with "TRACE:LINE: what is wrong" on the first problem.
"""
import json
import sys


def fail(path, line, msg):
    print(f"{path}:{line}: {msg}", file=sys.stderr)
    sys.exit(1)


def check(path, expect):
    starts = {}      # record id -> start clk
    ended = {}       # record id -> end clk
    parents = {}     # record id -> parent id
    latest = {}      # record id -> (latest clk of an event on it, its line)
    counts = {"records": 0, "record_ends": 0, "events": 0, "annotations": 0}
    footer = None
    n = 0
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if not text.endswith("\n"):
                fail(path, n, "last line is not terminated by a newline")
            try:
                line = json.loads(text)
            except json.JSONDecodeError as e:
                fail(path, n, f"not JSON: {e}")
            if not isinstance(line, dict):
                fail(path, n, "not a JSON object")
            kind = line.get("type")
            if footer is not None:
                fail(path, n, "line after the footer")
            if n == 1:
                if kind != "header" or line.get("version") != "2.0":
                    fail(path, n, "first line is not a version 2.0 header")
                continue
            if kind == "header":
                fail(path, n, "second header")
            if kind == "footer":
                footer = line
                continue
            if kind == "record":
                rid, parent, clk = line["id"], line["parent_id"], line["clk"]
                for key in ("name", "record_type", "description"):
                    if not isinstance(line.get(key), str):
                        fail(path, n, f"record {rid} has no string {key}")
                if rid in starts:
                    fail(path, n, f"record id {rid} used twice")
                if parent is not None:
                    if parent not in starts:
                        fail(path, n, f"record {rid}: parent {parent} not seen before")
                    if clk < starts[parent]:
                        fail(path, n, f"record {rid} starts before its parent {parent}")
                    parents[rid] = parent
                starts[rid] = clk
                counts["records"] += 1
                continue
            if kind not in ("record_end", "event", "annotation"):
                fail(path, n, f"unknown line type {kind!r}")
            rid = line["record_id"]
            if rid not in starts:
                fail(path, n, f"{kind} refers to record {rid}, not seen before")
            if kind != "annotation" and line["clk"] < starts[rid]:
                fail(path, n, f"{kind} at clk {line['clk']} before record {rid} starts")
            if kind == "record_end":
                if rid in ended:
                    fail(path, n, f"record {rid} ended twice")
                ended[rid] = line["clk"]
                counts["record_ends"] += 1
            elif kind == "event":
                if line["clk"] > latest.get(rid, (-1, 0))[0]:
                    latest[rid] = (line["clk"], n)
                counts["events"] += 1
            else:
                if "data" not in line:
                    fail(path, n, "annotation without data")
                counts["annotations"] += 1
    if footer is None:
        fail(path, n, "no footer (trace not closed)")
    for rid, (clk, line_no) in latest.items():
        if rid in ended and clk > ended[rid]:
            fail(path, line_no, f"event at clk {clk} after record {rid} ended at {ended[rid]}")
    for rid, parent in parents.items():
        if parent in ended and starts[rid] > ended[parent]:
            fail(path, n, f"record {rid} starts at {starts[rid]}, after parent {parent} ended")
    for key, total in (("records", "total_records"), ("events", "total_events"),
                       ("annotations", "total_annotations")):
        if footer.get(total) != counts[key]:
            fail(path, n, f"footer {total}={footer.get(total)} but the file has {counts[key]}")
    actual = dict(counts, open=len(starts) - len(ended), end_clk=footer.get("capture_end_clk"))
    if footer.get("open_records") != actual["open"]:
        fail(path, n, f"footer open_records={footer.get('open_records')}, file {actual['open']}")
    for item in expect.split():
        key, _, value = item.partition("=")
        if key not in actual or str(actual[key]) != value:
            fail(path, n, f"expected {key}={value}, the file has {actual.get(key)}")
    print(f"{path}: ok ({n} lines, {counts['records']} records, {counts['events']} events)")


def main():
    args = sys.argv[1:]
    expect = ""
    if len(args) == 3 and args[1] == "--expect":
        expect = args[2]
    elif len(args) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    check(args[0], expect)


if __name__ == "__main__":
    main()
