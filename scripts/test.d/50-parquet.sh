#!/usr/bin/env bash
# `jets convert --to parquet` and `jets stats --format parquet` checked by the engines their users
# query them with: DuckDB and PySpark from PyPI (Spark in local mode on a Debian Java runtime).
# Two demo runs (one of them gzip-compressed) go into one Hive-partitioned dataset; the per-run
# record and event counts and the sum of instruction cycles are computed from the JSON lines of
# the traces themselves, then asked of DuckDB and of Spark, and the three answers must agree.
set -euo pipefail
cd "$(dirname "$0")/../.."
apt_install python3-venv openjdk-17-jre-headless
target="${CARGO_TARGET_DIR:-target}"
venv="$target/pyenv-parquet"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import duckdb, pyspark' 2>/dev/null ||
    "$venv/bin/pip" install -q 'duckdb==1.5.6' 'pyspark==4.1.4'
# The feature is not a default one (build time), so `cargo test --workspace` skips its tests and
# lints: they run here.
cargo clippy -q --locked -p jets-cli --features parquet --all-targets -- -D warnings
cargo test -q --locked -p jets-cli --features parquet --test parquet
cargo build -q --locked -p jets-cli --features parquet
jets="$target/debug/jets"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

for w in 8 24; do
    "$jets" demo --out "$out/demo$w" --words "$w" >/dev/null
    cp "$out/demo$w/pipeline.jets" "$out/w$w.jets"
done
gzip -k "$out/w24.jets"
"$jets" convert "$out/w8.jets" --to parquet -o "$out/dataset"                # run from the stem
"$jets" convert "$out/w24.jets.gz" --to parquet --run w24 -o "$out/dataset"  # .gz input
"$jets" stats "$out/w8.jets" "$out/w24.jets" --format parquet -o "$out/summary.parquet"

# What the traces say, from their JSON lines, without our reader.
"$venv/bin/python" - "$out" > "$out/truth.json" <<'PY'
import json, sys
out = sys.argv[1]
truth = {}
for run in ("w8", "w24"):
    records = events = 0
    start, kind, cycles = {}, {}, 0
    for line in open(f"{out}/{run}.jets"):
        l = json.loads(line)
        if l["type"] == "record":
            records += 1
            start[l["id"]], kind[l["id"]] = l["clk"], l["record_type"]
        elif l["type"] == "event":
            events += 1
        elif l["type"] == "record_end" and kind[l["record_id"]] == "Instruction":
            cycles += l["clk"] - start[l["record_id"]]
    truth[run] = [records, events, cycles]
print(json.dumps(truth, sort_keys=True))
PY
echo "parquet: the traces say (records, events, instruction cycles) $(cat "$out/truth.json")"

# The one query, in SQL both engines speak; {R} and {E} are the records and events tables.
query='SELECT r.run, r.records, e.events, r.instruction_cycles FROM
  (SELECT run, COUNT(*) AS records,
          SUM(CASE WHEN record_type = '"'Instruction'"' THEN end_clk - start_clk ELSE 0 END)
            AS instruction_cycles
     FROM {R} GROUP BY run) r
  JOIN (SELECT run, COUNT(*) AS events FROM {E} GROUP BY run) e ON r.run = e.run
  ORDER BY r.run'

"$venv/bin/python" - "$out" "$query" <<'PY'
import json, sys
import duckdb
out, query = sys.argv[1], sys.argv[2]
truth = json.load(open(f"{out}/truth.json"))
ds = f"{out}/dataset"
con = duckdb.connect()
for t in ("records", "events", "annotations", "host_samples"):
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM "
                f"read_parquet('{ds}/*/{t}.parquet', hive_partitioning = true)")
rows = con.execute(query.replace("{R}", "records").replace("{E}", "events")).fetchall()
got = {run: [int(a), int(b), int(c)] for run, a, b, c in rows}
assert got == truth, f"duckdb {got} != traces {truth}"
# The schema spec/parquet.md documents.
cols = [r[0] for r in con.execute("DESCRIBE records").fetchall()]
assert cols == ["run", "id", "parent_id", "name", "record_type", "description", "start_clk",
                "end_clk", "status", "unit_id", "thread_id", "subunit_id", "display_label",
                "color", "criticality", "data"], cols
# data is JSON text DuckDB's json functions read; hints have their own columns.
pcs = con.execute("""SELECT COUNT(*) FROM records WHERE record_type = 'Instruction'
                     AND CAST(json_extract(data, '$.pc') AS BIGINT) IS NULL""").fetchone()[0]
assert pcs == 0, f"{pcs} instructions without data.pc"
flushed = con.execute("""SELECT COUNT(*) FROM records
                         WHERE record_type = 'Instruction' AND status = 'flushed'""").fetchone()[0]
assert flushed > 0, "no flushed instructions: record_end status lost"
# Host samples: one row per HostSync event of the run, metrics in columns.
for run, n, rss in con.execute("""SELECT h.run, COUNT(*), MAX(mem_rss_kb) FROM host_samples h
                                  GROUP BY h.run""").fetchall():
    syncs = con.execute("SELECT COUNT(*) FROM events WHERE run = ? AND name = 'HostSync'",
                        [run]).fetchone()[0]
    assert n == syncs and rss and rss > 0, (run, n, syncs, rss)
# jets stats --format parquet: one row per run and record_type, the same figures.
summary = {r[0]: r[1:] for r in con.execute(
    f"""SELECT run, count, total_cycles, run_records, run_events
        FROM read_parquet('{out}/summary.parquet') WHERE record_type = 'Instruction'""").fetchall()}
for run, (records, events, cycles) in truth.items():
    assert summary[run][1:] == (cycles, records, events), (run, summary[run], truth[run])
print(f"parquet: duckdb {duckdb.__version__} agrees: {got}; summary.parquet agrees")
json.dump(got, open(f"{out}/duckdb.json", "w"))
PY

# Spark in local mode on the same dataset, same query. Bounded: the JVM's start is the slow part.
export PYSPARK_PYTHON="$venv/bin/python"
timeout 600 "$venv/bin/python" - "$out" "$query" <<'PY'
import json, sys
from pyspark.sql import SparkSession
out, query = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").appName("jets-parquet-test")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for t in ("records", "events"):
    spark.read.option("basePath", f"{out}/dataset").parquet(f"{out}/dataset/run=*/{t}.parquet") \
        .createOrReplaceTempView(t)
rows = spark.sql(query.replace("{R}", "records").replace("{E}", "events")).collect()
got = {r[0]: [int(r[1]), int(r[2]), int(r[3])] for r in rows}
duck = json.load(open(f"{out}/duckdb.json"))
assert got == duck, f"spark {got} != duckdb {duck}"
print(f"parquet: spark {spark.version} (local mode) agrees: {got}")
spark.stop()
PY
echo "parquet: ok"
