//! `jets stats TRACE... --format parquet -o summary.parquet`: the figures `jets stats` prints per
//! record_type, for many runs, as one Parquet table: a row per run and record_type, with the run's
//! own figures (extent, clock, line counts) repeated on each of its rows (spec/parquet.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::trace::TraceStats;
use crate::formats::parquet::{run_from_path, schema, table::Table};
use crate::formats::timeline::read_trace;

/// A number of `jets stats`' JSON report (an internal error if missing: that report is ours).
fn num(v: &Value, path: &[&str]) -> Result<u64> {
    let mut at = v;
    for p in path {
        at = &at[p];
    }
    at.as_u64().ok_or_else(|| anyhow!("internal error: stats report has no {}", path.join(".")))
}

/// `v` as a Parquet INT64, or an error naming the trace `file` and what `v` is (PQ-INT-1).
fn int(file: &Path, what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        anyhow!(
            "{}: {what} {v} is beyond Parquet's signed 64-bit integers (PQ-INT-1)",
            file.display()
        )
    })
}

/// Writes the summary of `files` to `out`; returns the number of rows. Each run is named after its
/// file (PQ-RUN-2); two files with the same name are refused, as their rows could not be told apart.
pub fn write(files: &[PathBuf], out: &Path) -> Result<u64> {
    let mut runs: HashMap<String, &Path> = HashMap::new();
    let mut named = Vec::with_capacity(files.len());
    for f in files {
        if super::detect(f)? != super::InputKind::Jets {
            bail!("{}: not a JETS trace; --format parquet summarizes JETS traces", f.display());
        }
        let run = run_from_path(f)?;
        if let Some(other) = runs.insert(run.clone(), f) {
            bail!(
                "{} and {} would both be run {run:?}: give the traces distinct file names",
                other.display(),
                f.display()
            );
        }
        named.push((run, f));
    }
    let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("summary.parquet");
    let tmp = out.with_file_name(format!(".{name}.jets-tmp-{}", std::process::id()));
    let result = write_rows(&named, &tmp).and_then(|rows| {
        std::fs::rename(&tmp, out)
            .with_context(|| format!("moving {} to {}", tmp.display(), out.display()))?;
        Ok(rows)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_rows(runs: &[(String, &PathBuf)], path: &Path) -> Result<u64> {
    let mut table = Table::create(path, schema::SUMMARY.to_vec())?;
    for (run, file) in runs {
        let mut stats = TraceStats::default();
        read_trace(file, |_, line| {
            stats.line(line);
            Ok(())
        })?;
        stats.finish();
        let report = stats.to_json();
        let opt = |k: &str| report["time"][k].as_u64().map(|v| int(file, k, v)).transpose();
        let first_clk = opt("first_clk")?;
        let last_clk = opt("last_clk")?;
        let extent = int(file, "the extent", num(&report, &["time", "extent_cycles"])?)?;
        let mhz = report["time"]["clock_frequency_mhz"].as_f64();
        let lines = |t: &str| {
            num(&report, &["lines", t]).and_then(|n| int(file, &format!("the {t} lines' count"), n))
        };
        let (records, events, annotations) =
            (lines("record")?, lines("event")?, lines("annotation")?);
        let file_text = file.display().to_string();
        let types = report["record_types"].as_object().cloned().unwrap_or_default();
        // A run without records still gets a row (record_type null), so every run is listed.
        let rows: Vec<(Option<&str>, Option<&Value>)> = if types.is_empty() {
            vec![(None, None)]
        } else {
            types.iter().map(|(k, v)| (Some(k.as_str()), Some(v))).collect()
        };
        for (record_type, t) in rows {
            let (count, ended, unended) = match t {
                Some(t) => (num(t, &["count"])?, num(t, &["ended"])?, num(t, &["unended"])?),
                None => (0, 0, 0),
            };
            let typed = |what: &str, v: u64| {
                int(file, &format!("the {what} of record_type {:?}", record_type.unwrap_or("")), v)
            };
            // Durations exist only for records that ended.
            let d = t.filter(|_| ended > 0).map(|t| &t["duration_cycles"]);
            // A total past the 64-bit range is `null` in the report (CV-UNIT-2): no INT64 holds
            // it either (PQ-INT-1).
            let dur = |k: &str| {
                d.map(|d| match d[k].is_null() {
                    true => bail!(
                        "{}: the {k} of the {} durations is beyond 64-bit integers (PQ-INT-1)",
                        file.display(),
                        record_type.unwrap_or("")
                    ),
                    false => num(d, &[k]).and_then(|v| typed(&format!("{k} duration"), v)),
                })
                .transpose()
            };
            table
                .row()
                .text(Some(run))
                .text(Some(&file_text))
                .text(record_type)
                .int(Some(typed("count", count)?))
                .int(Some(typed("ended count", ended)?))
                .int(Some(typed("unended count", unended)?))
                .int(dur("total")?)
                .int(dur("min")?)
                .float(d.and_then(|d| d["mean"].as_f64()))
                .int(dur("p50")?)
                .int(dur("p95")?)
                .int(dur("p99")?)
                .int(dur("max")?)
                .int(first_clk)
                .int(last_clk)
                .int(Some(extent))
                .float(mhz)
                .int(Some(records))
                .int(Some(events))
                .int(Some(annotations))
                .end()?;
        }
    }
    table.close()
}
