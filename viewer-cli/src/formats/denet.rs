//! denet JSON Lines (host process monitoring): reading, for `jets stats` and `jets import`.
//!
//! The data model is the SDK's ([`jets_host::denet`]), which `jets run` writes. Tagged lines
//! (`kind`: env, metadata, child, tree, sample, exit) and the legacy untagged shapes (no `kind`;
//! `net_*` instead of `sys_net_*`) are both read, following denet 0.10's reader: a tree line counts
//! through its `aggregated` metrics (its per-child metrics are kept beside them), a line with
//! `aggregated: null` (the process had exited) is skipped; `child` and `exit` lines are kept.
//! Unlike denet, which skips what it cannot parse, a line that is not JSON, a `sample`/`tree` line
//! without the fields of one, or a sample earlier than the one before it, is an error naming the
//! file and line.

use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets_host::denet::{AggregatedMetrics, ChildMetrics, ChildStart, Metrics, ProcessMetadata};
use serde_json::{Map, Value};

/// The samples of a denet file.
#[derive(Clone, Debug, Default)]
pub struct DenetFile {
    /// The `env` line, if any.
    pub env: Option<Map<String, Value>>,
    /// The `metadata` line (or the legacy untagged header), if any.
    pub metadata: Option<ProcessMetadata>,
    /// Single-process samples (`sample` lines, or untagged flat metrics).
    pub metrics: Vec<Metrics>,
    /// Tree samples' `aggregated` metrics.
    pub aggregated: Vec<AggregatedMetrics>,
    /// Tree samples' per-child metrics, one list per entry of `aggregated`.
    pub tree_children: Vec<Vec<ChildMetrics>>,
    /// `child` lines: descendants as they were first seen.
    pub children: Vec<ChildStart>,
    /// The `exit` line, if any.
    pub exit: Option<Map<String, Value>>,
    /// `sim_clk` of each sample in order, when a clock beacon was connected (a JETS extension).
    pub sim_clks: Vec<Option<u64>>,
    /// Where each line kept came from (1-based line numbers), for errors that name it.
    pub lines: Lines,
}

/// The line numbers of a [`DenetFile`]'s parts: one per entry of `metrics`, `aggregated` and
/// `children`, and the line of the `env`, `metadata` and `exit` lines kept (0 when absent).
#[derive(Clone, Debug, Default)]
pub struct Lines {
    /// The line of each entry of [`DenetFile::metrics`].
    pub metrics: Vec<usize>,
    /// The line of each entry of [`DenetFile::aggregated`] (and of `tree_children`).
    pub aggregated: Vec<usize>,
    /// The line of each entry of [`DenetFile::children`].
    pub children: Vec<usize>,
    /// The `env` line.
    pub env: usize,
    /// The `metadata` line (or the legacy header).
    pub metadata: usize,
    /// The `exit` line.
    pub exit: usize,
}

fn parse<T: serde::de::DeserializeOwned>(v: Value, path: &Path, n: usize, what: &str) -> Result<T> {
    serde_json::from_value(v).with_context(|| format!("{}:{n}: not a denet {what}", path.display()))
}

/// Reads a denet file.
pub fn read(path: &Path) -> Result<DenetFile> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = DenetFile::default();
    // The previous sample's ts_ms and line.
    let mut previous: Option<(u64, usize)> = None;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.with_context(|| format!("{}:{n}: reading", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{n}: not JSON", path.display()))?;
        let Some(obj) = v.as_object() else { bail!("{}:{n}: not a JSON object", path.display()) };
        let sim_clk = obj.get("sim_clk").and_then(Value::as_u64);
        let (metrics, aggregated) = (out.metrics.len(), out.aggregated.len());
        match obj.get("kind").map(|k| k.as_str()) {
            Some(Some("env")) => {
                out.env = Some(obj.clone());
                out.lines.env = n;
            }
            Some(Some("metadata")) => {
                out.metadata = Some(parse(v, path, n, "metadata line")?);
                out.lines.metadata = n;
            }
            Some(Some("child")) => {
                out.children.push(parse(v, path, n, "child line")?);
                out.lines.children.push(n);
            }
            Some(Some("exit")) => {
                out.exit = Some(obj.clone());
                out.lines.exit = n;
            }
            Some(Some("sample")) => {
                out.metrics.push(parse(v, path, n, "sample")?);
                out.sim_clks.push(sim_clk);
            }
            Some(Some("tree")) => push_tree(&mut out, obj, sim_clk, path, n)?,
            Some(other) => bail!("{}:{n}: unknown denet kind {other:?}", path.display()),
            None if obj.contains_key("aggregated") => push_tree(&mut out, obj, sim_clk, path, n)?,
            None if obj.contains_key("cpu_usage") => {
                out.metrics.push(parse(v, path, n, "sample")?);
                out.sim_clks.push(sim_clk);
            }
            // Legacy header (pid, cmd, t0_ms).
            None if obj.contains_key("t0_ms") => {
                out.metadata = Some(parse(v, path, n, "metadata line")?);
                out.lines.metadata = n;
            }
            // Legacy new-child (pid, ppid) and env lines.
            None if obj.contains_key("pid") || obj.contains_key("host") => {}
            None => {
                bail!("{}:{n}: neither a denet sample, tree, header nor child line", path.display())
            }
        }
        // A sample line, or a tree line with its aggregated metrics, added a sample: its time.
        let ts = if out.metrics.len() > metrics {
            out.lines.metrics.push(n);
            out.metrics.last().map(|m| m.ts_ms)
        } else if out.aggregated.len() > aggregated {
            out.lines.aggregated.push(n);
            out.aggregated.last().map(|a| a.ts_ms)
        } else {
            None
        };
        if let Some(ts) = ts {
            check_time(ts, previous, path, n)?;
            previous = Some((ts, n));
        }
    }
    Ok(out)
}

/// A sample's `ts_ms` must not go back from the previous sample's (denet writes them in time
/// order: samples out of order would be drawn at the wrong time), and must fit `real_ns` (ns since
/// 1970 in a `u64`, which `jets import` writes).
fn check_time(ts: u64, previous: Option<(u64, usize)>, path: &Path, n: usize) -> Result<()> {
    if ts > u64::MAX / 1_000_000 {
        bail!(
            "{}:{n}: ts_ms {ts} is past the year 2554 (ns since 1970 overflow 64 bits)",
            path.display()
        );
    }
    if let Some((p, line)) = previous.filter(|&(p, _)| ts < p) {
        bail!(
            "{}:{n}: ts_ms {ts} is earlier than the previous sample's ({p}, line {line}): denet \
             writes samples in time order",
            path.display()
        );
    }
    Ok(())
}

fn push_tree(
    out: &mut DenetFile,
    tree: &Map<String, Value>,
    sim_clk: Option<u64>,
    path: &Path,
    n: usize,
) -> Result<()> {
    match tree.get("aggregated") {
        // The monitored process had exited: denet skips the line too.
        None | Some(Value::Null) => Ok(()),
        Some(a) => {
            out.aggregated.push(parse(a.clone(), path, n, "tree line: `aggregated`")?);
            let children = match tree.get("children") {
                None | Some(Value::Null) => Vec::new(),
                Some(c) => parse(c.clone(), path, n, "tree line: `children`")?,
            };
            out.tree_children.push(children);
            out.sim_clks.push(sim_clk);
            Ok(())
        }
    }
}
