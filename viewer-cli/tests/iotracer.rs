//! `jets import --from io-tracer`: both io-tracer layouts (fixtures in tests/data/iotracer, see its
//! README) into a valid JETS trace, and a clear error on a bad row.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::jets;

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/iotracer").join(p)
}

fn import(dir: &str) -> (tempfile::TempDir, PathBuf, Vec<Value>) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("io.jets");
    let o = jets(&[
        "import",
        "--from",
        "io-tracer",
        data(dir).to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (tmp, out, lines)
}

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

#[test]
fn schema_1_headerless_gzip() {
    let (_tmp, out, lines) = import("v1/output_20240115_103045");
    let v = jets(&["validate", out.to_str().unwrap()]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let header = &lines[0];
    assert_eq!(header["metadata"]["source_format"], "io-tracer-linux");
    assert_eq!(header["metadata"]["io_tracer_schema"], 1);
    let records = of_type(&lines, "record");
    let pids: Vec<u64> = records.iter().map(|r| r["data"]["pid"].as_u64().unwrap()).collect();
    assert_eq!(records.len(), 3, "one HostIo record per pid: {pids:?}");
    assert!(records.iter().all(|r| r["record_type"] == "HostIo"));
    let events = of_type(&lines, "event");
    assert_eq!(events.len(), 16);
    let clks: Vec<u64> = events.iter().map(|e| e["clk"].as_u64().unwrap()).collect();
    assert!(clks.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(clks[0], 0);
    let find = |name: &str| *events.iter().find(|e| e["name"] == name).unwrap();
    let rename = find("RENAME");
    assert_eq!(rename["data"]["filename"], "/tmp/old.txt->/tmp/new.txt");
    assert_eq!(rename["data"]["inode"], "123456:123456");
    // µs after the first row (the process snapshot at 10:30:45.000000).
    assert_eq!(rename["clk"], 456_789);
    assert_eq!(find("MSYNC")["data"]["filename"], "/home/user/mmap,1.dat");
    let write = find("WRITE");
    assert_eq!(
        (write["data"]["size"].as_u64(), write["data"]["offset"].as_u64()),
        (Some(4096), Some(8192))
    );
    let block = find("BLOCK_WRITE");
    assert_eq!(block["data"]["latency_ms"], 1.234);
    assert_eq!(block["data"]["dev"], "8:0");
    assert!(find("BLOCK_FLUSH")["data"].get("queue_time_ms").is_none(), "empty stays absent");
    assert_eq!(find("NET_RECEIVE")["data"]["size"], 1460);
    assert_eq!(find("PAGE_FAULT")["data"]["fault_severity"], "MAJOR");
    assert_eq!(find("IOURING_IO_URING_ENTER")["data"]["length"], 32);
    assert_eq!(find("CACHE_WRITEBACK_START")["data"]["stream"], "cache");
    assert_eq!(find("PROCESS_SNAPSHOT")["data"]["cmdline"], "python3 /home/user/script.py");
}

#[test]
fn schema_2_headers_mono_ns_block_and_zstd() {
    let (_tmp, out, lines) = import("v2/output_20240115_103045");
    assert!(jets(&["validate", out.to_str().unwrap()]).status.success());
    assert_eq!(lines[0]["metadata"]["io_tracer_schema"], 2);
    assert_eq!(lines[0]["metadata"]["clock_frequency_mhz"], 1000.0);
    let events = of_type(&lines, "event");
    let got: Vec<(&str, u64)> =
        events.iter().map(|e| (e["name"].as_str().unwrap(), e["clk"].as_u64().unwrap())).collect();
    assert_eq!(got, vec![("OPEN", 0), ("READ", 4000), ("NET_SEND", 9000), ("BLOCK_READ", 14000)]);
    assert_eq!(events[3]["data"]["stream"], "block");
    let manifest = of_type(&lines, "annotation");
    assert_eq!(manifest[0]["name"], "IoTracerManifest");
    assert_eq!(manifest[0]["data"]["schema_version"], 2);
}

#[test]
fn a_bad_row_names_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad.jets");
    let o = jets(&[
        "import",
        "--from",
        "io-tracer",
        data("bad/output_20240115_103045").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fs_1.csv.gz line 2"), "{err}");
    assert!(err.contains("column `size`: `lots` is not an integer"), "{err}");
    assert!(!out.exists(), "no partial output");
}
