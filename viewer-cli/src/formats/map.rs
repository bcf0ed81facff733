//! `jets convert --to map`: the host samples of a JETS trace as Linaro MAP's JSON export.
//!
//! The trace's `HostSync` events (spec/host-sync.md) are the samples. The run is cut into
//! `--windows N` equal windows of host time; each numeric metric gets, per window, the `mins`,
//! `maxs`, `means`, `vars` (population variance) and `sums` of the samples that fall in it, as the
//! real MAP export spells them (`window_start_offsets` in seconds, plural). One process is
//! monitored, so `sums` (the sum over processes) equals `means`; a window without samples holds
//! `null`. Two series come from the simulation itself: `sim_cycles_per_sec` (the speed of the
//! intervals between sync points, weighted by their overlap with the window) under `metrics`, and,
//! under `activity.simulation`, the average number of active records of each record_type over the
//! window's cycles (the window's host-time bounds mapped to cycles through the sync points).
//!
//! Two passes over the trace: the first collects the sync points, the second spreads the records
//! over the windows, keeping only open records in memory.
//!
//! A denet JSON Lines file (what `jets run` writes) converts too: its samples' `ts_ms` give the
//! windows, `sim_clk` (when a simulator published it) the simulation speed; it has no records, so
//! no simulated activity.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets::format::Line;
use jets_host::sync::{keys, ClockMap, SyncPoint, ENV_ANNOTATION, HOST_RECORD_TYPE, SYNC_EVENT};
use serde_json::{json, Map, Value};

use super::timeline::read_trace;

/// Keys of a `HostSync` event that are clocks or totals, not per-sample metrics.
const NOT_METRICS: [&str; 4] =
    [keys::MONO_NS, keys::REAL_NS, keys::CPU_NS, keys::HOST_INSTRUCTIONS];

struct FirstPass {
    points: Vec<SyncPoint>,
    data: Vec<Map<String, Value>>,
    env: Option<Value>,
    command: Option<String>,
    tool: Option<String>,
}

fn first_pass(input: &Path) -> Result<FirstPass> {
    let mut hosts: HashMap<u64, Option<String>> = HashMap::new();
    let mut fp =
        FirstPass { points: Vec::new(), data: Vec::new(), env: None, command: None, tool: None };
    read_trace(input, |_, line| {
        match line {
            Line::Header(h) => {
                fp.tool = h.metadata.get("tool").and_then(Value::as_str).map(str::to_string);
            }
            Line::Record(r) if r.record_type == HOST_RECORD_TYPE => {
                let cmd = r.data.as_ref().and_then(|d| d.get("command")).and_then(Value::as_str);
                hosts.insert(r.id, cmd.map(str::to_string));
            }
            Line::Annotation(a) if a.name == ENV_ANNOTATION && hosts.contains_key(&a.record_id) => {
                fp.env = Some(a.data);
            }
            Line::Event(e) if e.name == SYNC_EVENT && hosts.contains_key(&e.record_id) => {
                if fp.points.is_empty() {
                    fp.command = hosts.get(&e.record_id).cloned().flatten();
                }
                let data = e.data.as_ref().and_then(Value::as_object).cloned().unwrap_or_default();
                let p = SyncPoint::from_data(e.clk, &data)?;
                fp.points.push(p);
                fp.data.push(data);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(fp)
}

/// Min, max, mean, population variance of some values.
fn moments(v: &[f64]) -> Option<(f64, f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((min, max, mean, var))
}

fn series(per_window: &[Vec<f64>]) -> Value {
    let (mut mins, mut maxs, mut means, mut vars) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for w in per_window {
        match moments(w) {
            Some((a, b, c, d)) => {
                mins.push(json!(a));
                maxs.push(json!(b));
                means.push(json!(c));
                vars.push(json!(d));
            }
            None => {
                for s in [&mut mins, &mut maxs, &mut means, &mut vars] {
                    s.push(Value::Null);
                }
            }
        }
    }
    json!({"mins": mins, "maxs": maxs, "means": means.clone(), "vars": vars, "sums": means})
}

fn once(v: f64) -> Value {
    json!({"max": v, "min": v, "mean": v, "var": 0.0, "sums": v})
}

/// ISO 8601 (UTC) of a Unix time in ns.
fn iso8601(real_ns: u64) -> String {
    let secs = (real_ns / 1_000_000_000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Converts `input` (a JETS trace with host samples, or a denet JSON Lines file) into MAP JSON over
/// `windows` windows.
pub fn convert(input: &Path, mut out: impl Write, windows: usize) -> Result<()> {
    if windows == 0 {
        bail!("--windows must be at least 1");
    }
    if crate::stats::detect(input)? == crate::stats::InputKind::Denet {
        return convert_denet(input, out, windows);
    }
    let fp = first_pass(input)?;
    if fp.points.len() < 2 {
        bail!(
            "{}: {} {SYNC_EVENT} sample(s) on a {HOST_RECORD_TYPE} record; MAP needs at least 2 \
             (record the trace with jets_host::HostMonitor)",
            input.display(),
            fp.points.len()
        );
    }
    let map = ClockMap::new(fp.points.clone())
        .with_context(|| format!("{}: sync points", input.display()))?;
    let (t0, t1) = (fp.points[0].mono_ns, fp.points[fp.points.len() - 1].mono_ns);
    let width = (t1 - t0) as f64 / windows as f64;
    let window_of = |mono: u64| (((mono - t0) as f64 / width) as usize).min(windows - 1);

    // Host metrics per window.
    let mut metrics: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for (p, data) in fp.points.iter().zip(&fp.data) {
        let w = window_of(p.mono_ns);
        for (k, v) in data {
            if NOT_METRICS.contains(&k.as_str()) {
                continue;
            }
            if let Some(x) = v.as_f64() {
                metrics.entry(k.clone()).or_insert_with(|| vec![Vec::new(); windows])[w].push(x);
            }
        }
    }
    // Simulation speed: each interval's cycles/s, weighted by its overlap with the window.
    let mut speed_weighted = vec![Vec::new(); windows];
    for s in map.speed(&[]) {
        let (a, b) = (s.start_mono_ns, s.end_mono_ns);
        for (w, slot) in speed_weighted.iter_mut().enumerate() {
            let (ws, we) = (t0 as f64 + w as f64 * width, t0 as f64 + (w + 1) as f64 * width);
            if (b as f64) > ws && (a as f64) < we {
                slot.push(s.cycles_per_sec);
            }
        }
    }
    metrics.insert("sim_cycles_per_sec".into(), speed_weighted);

    // Window bounds in cycles, for the simulated activity.
    let bounds: Vec<f64> = (0..=windows)
        .map(|w| {
            map.mono_ns_to_cycle(t0 as f64 + w as f64 * width)
                .unwrap_or(map.points()[map.points().len() - 1].clk as f64)
        })
        .collect();
    let mut activity: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut types: Vec<String> = Vec::new();
    let mut type_index: HashMap<String, usize> = HashMap::new();
    let mut open: HashMap<u64, (u64, usize)> = HashMap::new();
    let mut last_clk = 0u64;
    let overlap = |activity: &mut BTreeMap<String, Vec<f64>>, ty: &str, s: u64, e: u64| {
        let slot = activity.entry(ty.to_string()).or_insert_with(|| vec![0.0; windows]);
        let first = bounds.partition_point(|&b| b <= s as f64).saturating_sub(1);
        for (w, acc) in slot.iter_mut().enumerate().skip(first) {
            let (ws, we) = (bounds[w], bounds[w + 1]);
            if ws >= e as f64 {
                break;
            }
            let ov = (e as f64).min(we) - (s as f64).max(ws);
            if ov > 0.0 {
                *acc += ov;
            }
        }
    };
    read_trace(input, |_, line| {
        match line {
            Line::Record(r) if r.record_type != HOST_RECORD_TYPE => {
                let ty = match type_index.get(r.record_type.as_ref()) {
                    Some(&i) => i,
                    None => {
                        types.push(r.record_type.to_string());
                        type_index.insert(r.record_type.to_string(), types.len() - 1);
                        types.len() - 1
                    }
                };
                open.insert(r.id, (r.clk, ty));
                last_clk = last_clk.max(r.clk);
            }
            Line::RecordEnd(e) => {
                last_clk = last_clk.max(e.clk);
                if let Some((s, ty)) = open.remove(&e.record_id) {
                    overlap(&mut activity, &types[ty], s, e.clk);
                }
            }
            Line::Event(e) => last_clk = last_clk.max(e.clk),
            Line::Footer(f) => last_clk = last_clk.max(f.capture_end_clk.unwrap_or(0)),
            _ => {}
        }
        Ok(())
    })?;
    // Records still open at the end of the trace are active until its last cycle.
    for (s, ty) in open.into_values() {
        overlap(&mut activity, &types[ty], s, last_clk);
    }
    let activity: Map<String, Value> = activity
        .into_iter()
        .map(|(ty, totals)| {
            let avg: Vec<Value> = totals
                .iter()
                .enumerate()
                .map(|(w, t)| {
                    let len = bounds[w + 1] - bounds[w];
                    if len > 0.0 {
                        json!(t / len)
                    } else {
                        Value::Null
                    }
                })
                .collect();
            (ty, Value::Array(avg))
        })
        .collect();

    let last = fp.data.last().cloned().unwrap_or_default();
    let env = fp.env.unwrap_or(Value::Null);
    let mut info_metrics = Map::new();
    for (name, key) in
        [("wchar_total", "syscall_write_bytes"), ("rchar_total", "syscall_read_bytes")]
    {
        info_metrics
            .insert(name.into(), last.get(key).and_then(Value::as_f64).map_or(Value::Null, once));
    }
    insert_node_metrics(&mut info_metrics, &env);

    let doc = json!({
        "info": {
            "command_line": fp.command.unwrap_or_default(),
            "machine": env["host"].as_str().unwrap_or(""),
            "notes": format!("converted by jets {} from the {SYNC_EVENT} samples of {}{}", env!("CARGO_PKG_VERSION"), input.display(),
                fp.tool.map(|t| format!(" (written by {t})")).unwrap_or_default()),
            "number_of_nodes": 1,
            "number_of_processes": 1,
            "runtime": (t1 - t0) as f64 / 1e6,
            "start_time": iso8601(fp.points[0].real_ns),
            "create_version": format!("jets {}", env!("CARGO_PKG_VERSION")),
            "metrics": info_metrics,
        },
        "samples": {
            "count": windows,
            "window_start_offsets": (0..windows).map(|w| w as f64 * width / 1e9).collect::<Vec<_>>(),
            "metrics": metrics.iter().map(|(k, v)| (k.clone(), series(v))).collect::<Map<String, Value>>(),
            "activity": { "simulation": activity },
        }
    });
    serde_json::to_writer_pretty(&mut out, &doc).context("writing the MAP JSON")?;
    writeln!(out).context("writing the MAP JSON")?;
    Ok(())
}

/// A denet sample's metrics under the `HostSync` key names (spec/host-sync.md).
fn denet_fields(v: Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Value::Object(m) = v else { return out };
    for (k, v) in m {
        match (k.as_str(), v) {
            ("ts_ms" | "uptime_secs" | "cpu_core" | "sim_clk", _) => {}
            ("psi_mem", Value::Object(p)) => {
                for (pk, pv) in p {
                    out.insert(format!("psi_{pk}"), pv);
                }
            }
            ("perf", Value::Object(p)) => {
                for (pk, pv) in p {
                    out.insert(format!("perf_{pk}"), pv);
                }
            }
            ("perf_sw", Value::Object(p)) => {
                for (pk, pv) in p {
                    out.insert(format!("perf_{pk}"), pv);
                }
            }
            (_, v @ Value::Number(_)) => {
                out.insert(k, v);
            }
            _ => {}
        }
    }
    out
}

/// MAP JSON from a denet file: the windows cut its `ts_ms` span; `sim_cycles_per_sec` comes from
/// `sim_clk` when the samples carry it; there are no records, so no simulated activity.
fn convert_denet(input: &Path, mut out: impl Write, windows: usize) -> Result<()> {
    let file = crate::formats::denet::read(input)?;
    let samples: Vec<(u64, Map<String, Value>)> = if file.aggregated.is_empty() {
        file.metrics.iter().map(|m| (m.ts_ms, denet_fields(json!(m)))).collect()
    } else {
        file.aggregated.iter().map(|a| (a.ts_ms, denet_fields(json!(a)))).collect()
    };
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        bail!("{}: no denet samples (no `sample` or `tree` lines)", input.display());
    };
    let (t0, t1) = (first.0, last.0);
    if t1 <= t0 {
        bail!("{}: the samples span no time ({} ms to {} ms)", input.display(), t0, t1);
    }
    let width_ms = (t1 - t0) as f64 / windows as f64;
    let window_of = |ts: u64| (((ts - t0) as f64 / width_ms) as usize).min(windows - 1);
    let mut metrics: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for (ts, data) in &samples {
        for (k, v) in data {
            if let Some(x) = v.as_f64() {
                metrics.entry(k.clone()).or_insert_with(|| vec![Vec::new(); windows])
                    [window_of(*ts)]
                .push(x);
            }
        }
    }
    let clks: Vec<(u64, u64)> =
        samples.iter().zip(&file.sim_clks).filter_map(|((ts, _), c)| Some((*ts, (*c)?))).collect();
    if clks.len() >= 2 {
        let mut speed = vec![Vec::new(); windows];
        for w in clks.windows(2) {
            let ((ta, ca), (tb, cb)) = (w[0], w[1]);
            if tb > ta {
                speed[window_of(tb)].push(cb.saturating_sub(ca) as f64 / ((tb - ta) as f64 / 1e3));
            }
        }
        metrics.insert("sim_cycles_per_sec".into(), speed);
    }
    let last_data = &last.1;
    let mut info_metrics = Map::new();
    for (name, key) in
        [("wchar_total", "syscall_write_bytes"), ("rchar_total", "syscall_read_bytes")]
    {
        info_metrics.insert(
            name.into(),
            last_data.get(key).and_then(Value::as_f64).map_or(Value::Null, once),
        );
    }
    let env = file.env.map(Value::Object).unwrap_or(Value::Null);
    insert_node_metrics(&mut info_metrics, &env);
    let command = file.metadata.as_ref().map(|m| m.cmd.join(" ")).unwrap_or_default();
    let doc = json!({
        "info": {
            "command_line": command,
            "machine": env["host"].as_str().unwrap_or(""),
            "notes": format!("converted by jets {} from the denet samples of {}", env!("CARGO_PKG_VERSION"), input.display()),
            "number_of_nodes": 1,
            "number_of_processes": 1,
            "runtime": (t1 - t0) as f64,
            "start_time": iso8601(t0 * 1_000_000),
            "create_version": format!("jets {}", env!("CARGO_PKG_VERSION")),
            "metrics": info_metrics,
        },
        "samples": {
            "count": windows,
            "window_start_offsets": (0..windows).map(|w| w as f64 * width_ms / 1e3).collect::<Vec<_>>(),
            "metrics": metrics.iter().map(|(k, v)| (k.clone(), series(v))).collect::<Map<String, Value>>(),
            "activity": {},
        }
    });
    serde_json::to_writer_pretty(&mut out, &doc).context("writing the MAP JSON")?;
    writeln!(out).context("writing the MAP JSON")?;
    Ok(())
}

/// MAP's per-node figures from the env snapshot (denet's `env` record): cores per node from
/// `lscpu`, memory per node from `numa`; `null` where the snapshot lacks them.
fn insert_node_metrics(info_metrics: &mut Map<String, Value>, env: &Value) {
    let cpu = &env["lscpu"];
    let cores = ["sockets", "cores_per_socket", "threads_per_core"]
        .iter()
        .map(|k| cpu[k].as_f64())
        .try_fold(1.0, |acc, v| v.map(|v| acc * v));
    info_metrics.insert("num_cores_per_node".into(), cores.map_or(Value::Null, once));
    let mem_mb: Option<f64> =
        env["numa"]["node_sizes_mb"].as_array().map(|a| a.iter().filter_map(Value::as_f64).sum());
    info_metrics.insert(
        "memory_per_node".into(),
        mem_mb.map_or(Value::Null, |mb| once(mb * 1024.0 * 1024.0)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_795_232_536_584_000_000), "2026-11-21T03:42:16Z");
    }

    #[test]
    fn population_moments() {
        assert_eq!(moments(&[1.0, 3.0]), Some((1.0, 3.0, 2.0, 1.0)));
        assert_eq!(moments(&[]), None);
    }
}
