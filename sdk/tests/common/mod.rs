//! An independent checker of the JETS ordering rules, for the writer's tests.
//!
//! Deliberately written against `serde_json::Value` rather than the SDK's own format model or
//! validator, so that a bug shared by the writer and the model cannot hide itself.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// An in-memory sink the tests write traces into and read back.
#[derive(Clone, Default)]
pub struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf8")
    }
}

/// A sink that accepts `budget` bytes (possibly a partial write), then fails every call, or
/// panics instead of failing when `panic` is set.
#[derive(Clone)]
pub struct Failing {
    pub out: Arc<Mutex<Vec<u8>>>,
    pub budget: Arc<Mutex<usize>>,
    pub panic: bool,
}

impl Failing {
    /// A sink that fails (or panics) after `budget` bytes.
    pub fn new(budget: usize, panic: bool) -> Failing {
        Failing { out: Arc::default(), budget: Arc::new(Mutex::new(budget)), panic }
    }

    /// What it accepted, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.out.lock().expect("lock").clone()).expect("utf8")
    }
}

impl Write for Failing {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let mut budget = self.budget.lock().expect("lock");
        if *budget == 0 {
            if self.panic {
                panic!("sink exploded");
            }
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe closed"));
        }
        let n = b.len().min(*budget);
        *budget -= n;
        self.out.lock().expect("lock").extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the checker counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub records: u64,
    pub ends: u64,
    pub events: u64,
    pub annotations: u64,
    pub max_clk: Option<u64>,
    pub footer: Option<Value>,
}

/// Checks every ordering rule on `text`. With `allow_torn_tail`, the last line may be incomplete
/// (a crash) and the footer may be missing. Returns the counts, or the first violation.
pub fn check(text: &str, allow_torn_tail: bool) -> Result<Counts, String> {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    if let Some(last) = lines.last() {
        if !last.ends_with('\n') {
            if !allow_torn_tail {
                return Err(format!("last line has no newline: {last:?}"));
            }
            lines.pop();
        }
    }
    // record id -> (start clk, ended)
    let mut records: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut c = Counts::default();
    for (i, raw) in lines.iter().enumerate() {
        let n = i + 1;
        let v: Value = serde_json::from_str(raw).map_err(|e| format!("line {n}: not JSON: {e}"))?;
        if c.footer.is_some() {
            return Err(format!("line {n}: line after the footer"));
        }
        let ty = v["type"].as_str().ok_or(format!("line {n}: no type"))?;
        if (n == 1) != (ty == "header") {
            return Err(format!("line {n}: header must be first and only first"));
        }
        let u = |key: &str| v[key].as_u64().ok_or(format!("line {n}: {key} is not a u64"));
        let s =
            |key: &str| v[key].as_str().map(|_| ()).ok_or(format!("line {n}: {key} not a string"));
        let mut clk = None;
        match ty {
            "header" => {
                if v["version"] != "2.0" || !v["metadata"].is_object() {
                    return Err(format!("line {n}: bad header"));
                }
            }
            "record" => {
                let (id, start) = (u("id")?, u("clk")?);
                s("name")?;
                s("record_type")?;
                s("description")?;
                if v.get("data").is_some_and(|d| !d.is_object()) {
                    return Err(format!("line {n}: record data is not an object"));
                }
                match v.get("parent_id") {
                    Some(Value::Null) => {}
                    Some(p) => {
                        let p = p.as_u64().ok_or(format!("line {n}: bad parent_id"))?;
                        let (pstart, _) =
                            records.get(&p).ok_or(format!("line {n}: parent {p} not seen"))?;
                        if start < *pstart {
                            return Err(format!("line {n}: child starts before parent"));
                        }
                    }
                    None => return Err(format!("line {n}: no parent_id key")),
                }
                if records.insert(id, (start, false)).is_some() {
                    return Err(format!("line {n}: duplicate id {id}"));
                }
                c.records += 1;
                clk = Some(start);
            }
            "record_end" => {
                let (id, end) = (u("record_id")?, u("clk")?);
                let r = records.get_mut(&id).ok_or(format!("line {n}: end of unseen {id}"))?;
                if r.1 {
                    return Err(format!("line {n}: second end of {id}"));
                }
                if end < r.0 {
                    return Err(format!("line {n}: end before start"));
                }
                r.1 = true;
                c.ends += 1;
                clk = Some(end);
            }
            "event" => {
                let (id, at) = (u("record_id")?, u("clk")?);
                s("name")?;
                s("description")?;
                let r = records.get(&id).ok_or(format!("line {n}: event on unseen {id}"))?;
                if at < r.0 {
                    return Err(format!("line {n}: event before its record's start"));
                }
                c.events += 1;
                clk = Some(at);
            }
            "annotation" => {
                let id = u("record_id")?;
                s("name")?;
                s("description")?;
                if v.get("data").is_none() {
                    return Err(format!("line {n}: annotation without data"));
                }
                records.get(&id).ok_or(format!("line {n}: annotation on unseen {id}"))?;
                c.annotations += 1;
            }
            "footer" => c.footer = Some(v.clone()),
            other => return Err(format!("line {n}: unknown type {other}")),
        }
        if let Some(clk) = clk {
            c.max_clk = Some(c.max_clk.map_or(clk, |m: u64| m.max(clk)));
        }
    }
    match &c.footer {
        Some(f) => {
            let want = [
                ("total_records", c.records),
                ("total_events", c.events),
                ("total_annotations", c.annotations),
                ("open_records", c.records - c.ends),
            ];
            for (key, n) in want {
                if f[key].as_u64() != Some(n) {
                    return Err(format!("footer {key} = {} but the file has {n}", f[key]));
                }
            }
            if c.max_clk.is_some() && f["capture_end_clk"].as_u64() < c.max_clk {
                return Err("footer capture_end_clk below the last clk".into());
            }
        }
        None if !allow_torn_tail => return Err("no footer".into()),
        None => {}
    }
    Ok(c)
}

/// This test binary, set to run its test `entry` alone in a child process: how the tests of what
/// happens as a process ends (exit, signals, panics, crashes) get a process to end. `entry`
/// does nothing unless an environment variable the caller sets tells it to.
pub fn this_binary_running(entry: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("current exe"));
    c.args([entry, "--exact", "--nocapture", "--test-threads=1"]);
    c
}
