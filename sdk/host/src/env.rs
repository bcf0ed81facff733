//! The reproducibility snapshot (denet's `env` record): host, kernel, CPU model and topology,
//! NUMA, affinity, governor, THP, SMT and cgroup. Sources that do not exist are left out, never
//! filled with defaults.

use std::collections::BTreeSet;
use std::fs;

use serde_json::{json, Map, Value};

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Formats CPU numbers as a range list (`0-3,7-9`).
pub fn range_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        out.push(if cpus[i] == start { start.to_string() } else { format!("{start}-{}", cpus[i]) });
        i += 1;
    }
    out.join(",")
}

/// Parses a range list (`0-3,7`) into CPU numbers.
fn parse_range_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// The CPUs the calling thread may run on.
pub fn affinity() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid for writes of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET only reads the set, and i is below CPU_SETSIZE.
    Some((0..libc::CPU_SETSIZE as usize).filter(|&i| unsafe { libc::CPU_ISSET(i, &set) }).collect())
}

fn lscpu() -> Option<Value> {
    let text = fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut sockets = BTreeSet::new();
    let (mut model, mut cores, mut siblings) = (None, None, None);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "physical id" => {
                sockets.insert(v.to_string());
            }
            "model name" if model.is_none() => model = Some(v.to_string()),
            "cpu cores" if cores.is_none() => cores = v.parse::<u64>().ok(),
            "siblings" if siblings.is_none() => siblings = v.parse::<u64>().ok(),
            _ => {}
        }
    }
    let mut m = Map::new();
    m.insert("sockets".into(), json!(sockets.len().max(1)));
    if let Some(c) = cores {
        m.insert("cores_per_socket".into(), json!(c));
        if let Some(s) = siblings {
            m.insert("threads_per_core".into(), json!((s / c.max(1)).max(1)));
        }
    }
    if let Some(model) = model {
        m.insert("model".into(), json!(model));
    }
    Some(Value::Object(m))
}

fn numa() -> Option<Value> {
    let nodes = parse_range_list(&read_trim("/sys/devices/system/node/online")?);
    let mut distances = Vec::new();
    let mut sizes = Vec::new();
    for n in &nodes {
        let d: Vec<u64> = read_trim(&format!("/sys/devices/system/node/node{n}/distance"))?
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        distances.push(d);
        let meminfo =
            fs::read_to_string(format!("/sys/devices/system/node/node{n}/meminfo")).ok()?;
        let kb = meminfo
            .lines()
            .find(|l| l.contains("MemTotal:"))
            .and_then(|l| l.split_whitespace().rev().nth(1).and_then(|v| v.parse::<u64>().ok()))?;
        sizes.push(kb / 1024);
    }
    Some(json!({"nodes": nodes.len(), "distances": distances, "node_sizes_mb": sizes}))
}

fn per_cpu(file: &str) -> Option<Vec<String>> {
    let cpus = parse_range_list(&read_trim("/sys/devices/system/cpu/online")?);
    cpus.iter()
        .map(|c| read_trim(&format!("/sys/devices/system/cpu/cpu{c}/cpufreq/{file}")))
        .collect()
}

/// The snapshot for process `pid`, as the fields of an `env` line (without `kind`).
pub fn snapshot(pid: u32) -> Map<String, Value> {
    let mut m = Map::new();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    m.insert("ts_ms".into(), json!(now_ms));
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("host", read_trim("/proc/sys/kernel/hostname").map(Value::from));
    put("kernel", read_trim("/proc/sys/kernel/osrelease").map(Value::from));
    put("lscpu", lscpu());
    put("numa", numa());
    put("affinity_inherited", affinity().map(|a| Value::from(range_list(&a))));
    put("cpu_governor", per_cpu("scaling_governor").map(|v| json!(v)));
    put(
        "cpu_freq_khz",
        per_cpu("scaling_cur_freq")
            .map(|v| json!(v.iter().filter_map(|s| s.parse::<u64>().ok()).collect::<Vec<_>>())),
    );
    put("thp_enabled", read_trim("/sys/kernel/mm/transparent_hugepage/enabled").map(Value::from));
    put(
        "smt_active",
        read_trim("/sys/devices/system/cpu/smt/active").map(|s| Value::from(s == "1")),
    );
    put("cgroup", read_trim(&format!("/proc/{pid}/cgroup")).map(Value::from));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_trip() {
        assert_eq!(range_list(&[0, 1, 2, 3, 7, 8, 9, 12]), "0-3,7-9,12");
        assert_eq!(parse_range_list("0-3,7-9,12"), vec![0, 1, 2, 3, 7, 8, 9, 12]);
        assert_eq!(range_list(&[]), "");
    }

    #[test]
    fn snapshot_has_host_and_kernel() {
        let s = snapshot(std::process::id());
        assert!(s["kernel"].as_str().is_some_and(|k| !k.is_empty()));
        assert!(s.contains_key("host") && s.contains_key("ts_ms"));
    }
}
