//! `jets view` and `jets gantt` end to end: the binary serves a trace written by the SDK, and the
//! JSON API is asked what the page asks (summary, window, children, record, search), while the
//! trace is complete, growing, damaged or compressed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jets::format::{MarkerStyle, Severity, Status};
use jets::{Metadata, Trace};
use serde_json::Value;

mod common;
use common::captured_pipeline;

const NASTY: &str = r#"ld "x" <script>window.__pwned=1</script> & 'y'"#;

/// A `jets view` process, killed when dropped.
struct Viewer {
    child: Child,
    port: u16,
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn jets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jets"))
}

fn start(path: &Path) -> Viewer {
    let mut child = jets()
        .args(["view", "--port", "0", "--no-open"])
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting jets view");
    let mut first = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).read_line(&mut first).expect("reading the address");
    let port = first
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    Viewer { child, port }
}

/// GET `path`; returns (status, headers, body).
fn http(port: u16, path: &str, host: Option<&str>) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let host = host.map_or(format!("127.0.0.1:{port}"), str::to_owned);
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap_or_else(|e| panic!("receiving {path}: {e}"));
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, head, raw[split + 4..].to_vec())
}

fn api(v: &Viewer, path: &str) -> Value {
    let (status, _, body) = http(v.port, path, None);
    let json: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", String::from_utf8_lossy(&body)));
    assert_eq!(status, 200, "{path}: {json}");
    json
}

/// Waits (up to 20 s, a liveness bound, not a timing assertion) until `f` holds for the summary.
fn wait_for(v: &Viewer, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let s = api(v, "/api/summary");
        if f(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "timed out waiting for {what}: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two cores (units 0 and 1) with 200 instructions each; names with markup and quotes.
fn write_trace(path: &Path) -> Result<(), jets::Error> {
    let trace =
        Trace::create(path, Metadata::new().hardware_model("Tiny5").clock_frequency_mhz(500.0))?;
    let core0 = trace.root("core0", "Core").unit_id(0).begin_at(0)?;
    let core1 = trace
        .root(NASTY, "Core")
        .unit_id(1)
        .color("#123456".parse().expect("color"))
        .begin_at(0)?;
    for i in 0..200u64 {
        for core in [&core0, &core1] {
            let mut b = core.child("add", "Instruction").field("pc", 0x1000 + 4 * i);
            if i == 7 {
                b = b.display_label("LBL7").status(Status::Stalled).criticality(0.5);
            }
            let h = b.begin_at(i * 4)?;
            if i % 10 == 0 {
                h.event("Miss")
                    .severity(Severity::Error)
                    .marker_style(MarkerStyle::Diamond)
                    .icon("cache_miss")
                    .emit_at(i * 4 + 1)?;
            }
            if i == 3 {
                h.annotation("Operands").data_json(r#"{"rs1":2}"#).emit()?;
            }
            h.end_at(i * 4 + 3)?;
        }
    }
    core0.end_at(1000)?;
    core1.end_at(1000)?;
    trace.close_at(1000)?;
    Ok(())
}

fn all_rows(summary: &Value) -> String {
    let mut rows = Vec::new();
    for lane in summary["lanes"].as_array().expect("lanes") {
        for r in lane["rows"].as_array().expect("rows") {
            rows.push(r[0].to_string());
        }
    }
    rows.join(",")
}

#[test]
fn api_serves_a_complete_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    write_trace(&path).expect("write");
    let v = start(&path);
    let s = wait_for(&v, "the index", |s| s["done"] == true);
    assert_eq!(s["counts"]["records"], 402);
    assert_eq!(s["counts"]["events"], 40);
    assert_eq!(s["counts"]["errors"], 0);
    assert_eq!(s["extent"], serde_json::json!([0, 1000]));
    assert_eq!(s["metadata"]["clock_frequency_mhz"], 500.0);
    assert_eq!(s["following"], false, "a trace with a footer is complete");
    let labels: Vec<&str> =
        s["lanes"].as_array().expect("lanes").iter().filter_map(|l| l["label"].as_str()).collect();
    assert_eq!(
        labels,
        ["core0 · unit 0".to_owned(), format!("{NASTY} · unit 1")],
        "what runs there"
    );
    // The vocabularies and layouts come from one definition each.
    let vocab = |k: &str| {
        s["vocab"][k]
            .as_array()
            .expect("list")
            .iter()
            .map(|v| v.as_str().expect("s").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(vocab("status"), Status::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_eq!(vocab("severity"), Severity::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_eq!(
        vocab("marker_style"),
        MarkerStyle::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>()
    );
    assert_eq!(s["layouts"]["bar"][7], "count");
    assert_eq!(s["layouts"]["marker"][4], "severity");

    // Whole run at 100 px: clusters, never more than a few items per pixel.
    let rows = all_rows(&s);
    let w = api(&v, &format!("/api/window?t0=0&t1=1001&px=100&rows={rows}"));
    let mut counted = 0;
    for row in w["rows"].as_array().expect("rows") {
        let bars = row["bars"].as_array().expect("bars");
        assert!(bars.len() <= 101, "{} items for 100 px", bars.len());
        counted += bars.iter().map(|b| b[7].as_u64().expect("count")).sum::<u64>();
    }
    assert_eq!(counted, 402, "clusters count every record");

    // Zoomed to 40 cycles: single bars with labels, the stalled one with its hints.
    let w = api(&v, &format!("/api/window?t0=20&t1=60&px=800&rows={rows}"));
    let bars: Vec<&Value> = w["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .flat_map(|r| r["bars"].as_array().expect("bars"))
        .collect();
    assert!(bars.iter().filter(|b| b[1].as_u64() < Some(1000)).all(|b| b[7] == 1));
    let stalled = bars.iter().find(|b| b[9] == "LBL7").expect("the labelled bar");
    assert_eq!((stalled[0].as_u64(), stalled[1].as_u64()), (Some(28), Some(31)));
    assert_eq!(stalled[5], Status::Stalled.code(), "status stalled");
    assert!((stalled[6].as_f64().expect("crit") - 0.5).abs() < 0.01);
    let nasty = bars.iter().find(|b| b[4] == 0x123456).expect("the colored root bar");
    assert_eq!(nasty[9], NASTY, "names come back exactly, escaped as JSON");
    let markers: Vec<&Value> = w["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .flat_map(|r| r["markers"].as_array().expect("markers"))
        .collect();
    assert_eq!(markers.len(), 2, "the events at cycles 41 (two cores)");
    assert_eq!(
        (markers[0][0].as_u64(), markers[0][3].as_u64(), markers[0][4].as_u64()),
        (
            Some(41),
            Some(u64::from(MarkerStyle::Diamond.code())),
            Some(u64::from(Severity::Error.code()))
        )
    );
    assert_eq!(s["icons"][markers[0][6].as_u64().expect("icon") as usize], "cache_miss");

    // Tree, details and search.
    let roots = api(&v, "/api/children");
    assert_eq!(roots["children"].as_array().expect("roots").len(), 2);
    assert_eq!(roots["children"][1]["name"], NASTY);
    let root0 = roots["children"][0]["id"].as_str().expect("id").to_owned();
    let page = api(&v, &format!("/api/children?parent={root0}&limit=150"));
    assert_eq!(page["children"].as_array().expect("kids").len(), 150);
    assert_eq!(page["more"], true);
    let last = page["children"][149]["id"].as_str().expect("id").to_owned();
    let rest = api(&v, &format!("/api/children?parent={root0}&after={last}&limit=150"));
    assert_eq!(rest["children"].as_array().expect("kids").len(), 50);
    assert_eq!(rest["more"], false);
    let with_ann = page["children"][3]["id"].as_str().expect("id");
    let d = api(&v, &format!("/api/record?id={with_ann}"));
    assert_eq!(d["line"]["name"], "add");
    assert_eq!(
        (d["start"].as_u64(), d["end"].as_u64(), d["duration"].as_u64()),
        (Some(12), Some(15), Some(3))
    );
    assert_eq!(d["annotations"][0]["data"]["rs1"], 2);
    assert_eq!(d["status"], Value::Null);
    let stalled_id = stalled[2].as_str().expect("id");
    assert_eq!(api(&v, &format!("/api/record?id={stalled_id}"))["status"], "stalled");
    assert_eq!(d["parent"], root0.as_str());
    // Tree mode: each record's own bar and markers.
    let first_kid = page["children"][0]["id"].as_str().expect("id");
    let b = api(&v, &format!("/api/bars?ids={root0},{first_kid},424242&t0=0&t1=100&px=1000"));
    let rows = b["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "unknown ids are left out");
    assert_eq!(rows[0]["bars"][0][0], 0);
    assert_eq!(rows[0]["bars"][0][1], 1000);
    assert_eq!(rows[0]["bars"][0][9], "core0");
    assert_eq!(
        (rows[1]["bars"][0][0].as_u64(), rows[1]["bars"][0][1].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(rows[1]["markers"][0][0], 1, "instruction 0's miss at cycle 1");
    let b = api(&v, &format!("/api/bars?ids={first_kid}&t0=500&t1=600"));
    assert_eq!(b["rows"][0]["bars"].as_array().map(Vec::len), Some(0), "outside the window");
    let found = api(&v, "/api/search?q=%3Cscript%3E");
    assert_eq!(found["results"].as_array().expect("results").len(), 1);
    assert_eq!(found["results"][0]["name"], NASTY);
    assert_eq!(found["results"][0]["clk"], 0, "results carry their cycle");
    let events = api(&v, "/api/search?q=miss&limit=3");
    let hits = events["results"].as_array().expect("results");
    assert_eq!(hits.len(), 3, "event names are searched");
    assert_eq!((hits[0]["event"].as_str(), hits[0]["clk"].as_u64()), (Some("Miss"), Some(1)));
    let none = api(&v, "/api/search?q=zzz-nothing");
    assert_eq!(
        (none["results"].as_array().map(Vec::len), none["complete"].as_bool()),
        (Some(0), Some(true))
    );
    let by_type = api(&v, "/api/search?q=instruction&limit=5");
    assert_eq!(by_type["results"].as_array().expect("results").len(), 5);
    assert_eq!(by_type["complete"], false);

    // The page, its assets and the errors.
    let (status, head, page) = http(v.port, "/", None);
    assert_eq!(status, 200);
    assert!(head.contains("Content-Security-Policy: default-src 'self'"), "{head}");
    let page = String::from_utf8(page).expect("utf-8");
    assert!(page.contains(r#"<script src="viewer.js"></script>"#));
    assert_eq!(http(v.port, "/viewer.js", None).0, 200);
    assert_eq!(http(v.port, "/api/summary", Some("attacker.example")).0, 403);
    let (status, _, body) = http(v.port, "/api/window?t0=5&t1=5", None);
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("t1 (5) must be greater than t0 (5)"));
    assert_eq!(http(v.port, "/api/record?id=999999", None).0, 404);
    assert_eq!(http(v.port, "/api/record?id=abc", None).0, 400);
    assert_eq!(http(v.port, "/api/nothing", None).0, 404);
}

#[test]
fn follows_a_growing_file_and_waits_for_a_torn_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("grow.jets");
    let mut f = std::fs::File::create(&path).expect("create");
    writeln!(f, r#"{{"type":"header","version":"2.0","metadata":{{}}}}"#).expect("write");
    writeln!(f, r#"{{"clk":0,"type":"record","name":"root","record_type":"Core","id":1,"parent_id":null,"description":""}}"#).expect("write");
    f.flush().expect("flush");
    let v = start(&path);
    let s = wait_for(&v, "the first record", |s| s["counts"]["records"] == 1);
    assert_eq!(s["following"], true);
    assert_eq!(s["counts"]["open"], 1);

    // Half a line: nothing new, and no error.
    let line = r#"{"clk":5,"type":"record","name":"child","record_type":"Op","id":2,"parent_id":1,"description":""}"#;
    write!(f, "{}", &line[..40]).expect("write");
    f.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(300));
    let s = api(&v, "/api/summary");
    assert_eq!(
        (s["counts"]["records"].as_u64(), s["counts"]["errors"].as_u64()),
        (Some(1), Some(0))
    );

    // The rest of it, then more lines.
    writeln!(f, "{}", &line[40..]).expect("write");
    writeln!(f, r#"{{"clk":9,"type":"record_end","record_id":2}}"#).expect("write");
    f.flush().expect("flush");
    let s = wait_for(&v, "the completed line", |s| {
        s["counts"]["records"] == 2 && s["counts"]["open"] == 1
    });
    assert_eq!(s["extent"], serde_json::json!([0, 9]));
    let w = api(&v, &format!("/api/window?t0=0&t1=10&px=100&rows={}", all_rows(&s)));
    assert_eq!(w["now"], 9);
    let open: Vec<&Value> = w["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .flat_map(|r| r["bars"].as_array().expect("bars"))
        .filter(|b| b[8] == true)
        .collect();
    assert_eq!(open.len(), 1, "the root is still open");
    assert_eq!(open[0][1], 9, "and reaches the last cycle seen");

    // The footer ends following.
    writeln!(f, r#"{{"clk":12,"type":"record_end","record_id":1}}"#).expect("write");
    writeln!(f, r#"{{"type":"footer","capture_end_clk":12}}"#).expect("write");
    f.flush().expect("flush");
    let s = wait_for(&v, "the footer", |s| s["following"] == false && s["done"] == true);
    assert_eq!(s["counts"]["open"], 0);
    assert_eq!(s["extent"][1], 12);
}

#[test]
fn damaged_and_compressed_traces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.jets");
    std::fs::write(
        &path,
        concat!(
            r#"{"type":"header","version":"2.0","metadata":{}}"#,
            "\n",
            r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            "\n",
            "{\"clk\":1,\"type\":\"record\"\n",
            r#"{"clk":2,"type":"event","name":"e","record_id":77,"description":""}"#,
            "\n",
            r#"{"type":"footer"}"#,
            "\n",
        ),
    )
    .expect("write");
    let v = start(&path);
    let s = wait_for(&v, "the index", |s| s["done"] == true);
    assert_eq!(s["counts"]["errors"], 2);
    let errors: Vec<&str> =
        s["errors"].as_array().expect("errors").iter().filter_map(Value::as_str).collect();
    assert!(errors[0].starts_with("line 3: "), "{errors:?}");
    assert_eq!(errors[1], "line 4: event on unknown record 77");
    drop(v);

    // A gzip trace is read through a spool file; details still come back by offset.
    let gz = dir.path().join("t.jets.gz");
    let plain = dir.path().join("t.jets");
    write_trace(&plain).expect("write");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(&plain).expect("read")).expect("gzip");
    std::fs::write(&gz, enc.finish().expect("gzip")).expect("write");
    let v = start(&gz);
    let s = wait_for(&v, "the index", |s| s["done"] == true);
    assert_eq!(s["counts"]["records"], 402);
    assert!(s["note"].as_str().is_some_and(|n| n.contains("not followed")), "{s}");
    let roots = api(&v, "/api/children");
    let id = roots["children"][1]["id"].as_str().expect("id");
    assert_eq!(api(&v, &format!("/api/record?id={id}"))["line"]["name"], NASTY);
}

#[test]
fn gantt_reads_standard_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    write_trace(&path).expect("write");
    let html = dir.path().join("t.html");
    let out = jets()
        .args(["gantt", "-", "-o"])
        .arg(&html)
        .stdin(std::fs::File::open(&path).expect("open"))
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).expect("read");
    assert!(page.contains(r#""records":402"#), "every record, none lost to a probe");
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = jets().args(["view", "--no-open", "/nonexistent/x.jets"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/x.jets"), "{err}");
}

#[test]
fn gantt_writes_a_self_contained_escaped_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    write_trace(&path).expect("write");
    let html = dir.path().join("t.html");
    let out = jets().arg("gantt").arg(&path).arg("-o").arg(&html).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).expect("read");
    assert!(!page.contains("src=\"viewer.js\""), "scripts are inlined");
    assert!(!page.contains("http://") && !page.contains("https://"), "no external resources");
    assert!(!page.contains("<script>window.__pwned"), "trace text never appears as markup");
    let start =
        page.find(r#"<script type="application/json" id="jets-data">"#).expect("data element");
    let data = &page[start..];
    let data = &data[data.find('>').expect(">") + 1..data.find("</script>").expect("end")];
    let bundle: Value = serde_json::from_str(data).expect("the inlined data is JSON");
    assert_eq!(bundle["summary"]["counts"]["records"], 402);
    assert_eq!(bundle["nodes"].as_array().expect("nodes").len(), 402);
    let bars: usize = bundle["window"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["bars"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(bars, 402, "every bar, none merged");
    // Every record is a row of the pipeline view of its group, in program order.
    let groups = bundle["pipeline"].as_array().expect("pipeline groups");
    let rows: Vec<&Value> =
        groups.iter().flat_map(|g| g["rows"].as_array().expect("rows")).collect();
    assert_eq!(rows.len(), 402);
    for g in groups {
        let seq = g["seq"].as_u64().expect("seq") as usize;
        let ks: Vec<u64> = g["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["k"].as_u64().expect("k"))
            .collect();
        assert_eq!(ks, (0..ks.len() as u64).collect::<Vec<_>>(), "group {seq} in order");
        assert_eq!(bundle["summary"]["groups"][seq]["count"], ks.len() as u64);
    }
    assert!(bundle["records"]
        .as_array()
        .expect("records")
        .iter()
        .any(|r| r["line"]["name"] == NASTY));

    let out = jets()
        .arg("gantt")
        .arg(&path)
        .arg("-o")
        .arg(&html)
        .args(["--max-records", "10"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("402 records is more than a static page should hold"));
}

#[test]
fn host_tracks_come_from_hostsync_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("host.jets");
    let mut text = String::from(r#"{"type":"header","version":"2.0","metadata":{}}"#);
    text.push('\n');
    text.push_str(r#"{"clk":0,"type":"record","name":"sim","record_type":"HostProcess","id":1,"parent_id":null,"description":""}"#);
    text.push('\n');
    text.push_str(r#"{"clk":0,"type":"record","name":"core","record_type":"Core","id":2,"parent_id":null,"description":""}"#);
    text.push('\n');
    for (i, (clk, cpu, rss)) in
        [(0u64, 50.0, 1000u64), (1000, 100.0, 2048), (3000, 75.0, 4096)].iter().enumerate()
    {
        let mono = 1_000_000_000 + i as u64 * 1_000_000;
        text.push_str(&format!(
            r#"{{"clk":{clk},"type":"event","name":"HostSync","record_id":1,"description":"","data":{{"mono_ns":{mono},"real_ns":{mono},"cpu_ns":{},"cpu_usage":{cpu},"mem_rss_kb":{rss}}}}}"#,
            i as u64 * 500_000
        ));
        text.push('\n');
    }
    // Not a host record: a marker like any other event.
    text.push_str(r#"{"clk":5,"type":"event","name":"HostSync","record_id":2,"description":"","data":{"mono_ns":1,"real_ns":1,"cpu_ns":1}}"#);
    text.push('\n');
    std::fs::write(&path, text).expect("write");
    let v = start(&path);
    let s = wait_for(&v, "the index", |s| s["counts"]["events"] == 4);
    assert_eq!(s["counts"]["host_samples"], 3);
    let labels: Vec<&str> =
        s["lanes"].as_array().expect("lanes").iter().filter_map(|l| l["label"].as_str()).collect();
    assert_eq!(labels, ["core", "host process"], "the host lane comes last");
    let h = api(&v, "/api/host");
    assert_eq!(h["samples"][1], serde_json::json!([1000, 1_001_000_000u64, 100.0, 2048]));
    let speed = h["speed"].as_array().expect("speed");
    assert_eq!(speed.len(), 2);
    // 1000 cycles in 1 ms, then 2000 cycles in 1 ms; half a core busy.
    assert_eq!(speed[0], serde_json::json!([0, 1000, 1_000_000.0, 0.5]));
    assert_eq!(speed[1][2], 2_000_000.0);
    let w = api(&v, &format!("/api/window?t0=0&t1=3001&px=3001&rows={}", all_rows(&s)));
    let markers: usize = w["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["markers"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(markers, 1, "only the HostSync on the non-host record is a marker");
}

/// A pipeline: one core, instructions with stage events (IF ID EX WB, no severity), a warning
/// on some, and a flushed one.
fn write_pipeline(path: &Path, n: u64) -> Result<(), jets::Error> {
    let trace =
        Trace::create(path, Metadata::new().hardware_model("P").clock_frequency_mhz(2000.0))?;
    let core = trace.root("core0", "Core").unit_id(0).begin_at(0)?;
    for i in 0..n {
        let h = core.child(format!("insn {}", i % 7), "Instruction").begin_at(i)?;
        for (s, stage) in ["IF", "ID", "EX", "WB"].iter().enumerate() {
            h.event(*stage).emit_at(i + s as u64)?;
        }
        if i % 50 == 0 {
            h.event("DCacheMiss").severity(Severity::Warning).emit_at(i + 2)?;
        }
        if i == 3 {
            h.end_with_status_at(i + 4, Status::Flushed)?;
        } else {
            h.end_at(i + 4)?;
        }
    }
    core.end_at(n + 4)?;
    trace.close_at(n + 4)?;
    Ok(())
}

#[test]
fn pipeline_rows_come_from_the_index_by_position_and_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.jets");
    write_pipeline(&path, 5000).expect("write");
    let v = start(&path);
    let s = wait_for(&v, "the index", |s| s["done"] == true);
    let types: Vec<&str> =
        s["types"].as_array().expect("types").iter().filter_map(|t| t["name"].as_str()).collect();
    let insn = types.iter().position(|&t| t == "Instruction").expect("type");
    assert_eq!(s["pipeline_type"], insn, "the type whose events look like stages");
    let group =
        s["groups"].as_array().expect("groups").iter().find(|g| g["rtype"] == insn).expect("group");
    assert_eq!(group["count"], 5000);
    assert_eq!(group["label"], "core0 · unit 0");
    let seq = group["seq"].as_u64().expect("seq");
    // Jump to cycle 2500: the row there, found by a binary search.
    let j = api(&v, &format!("/api/jump?type={insn}&clk=2500"));
    assert_eq!(j["rows"][0], serde_json::json!([seq, 2500]));
    let p = api(&v, &format!("/api/pipeline?t0=2490&t1=2520&px=600&groups={seq}:2500:3"));
    let rows = p["groups"][0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0]["k"].as_u64(), rows[0]["start"].as_u64(), rows[0]["end"].as_u64()),
        (Some(2500), Some(2500), Some(2504))
    );
    assert_eq!(rows[0]["name"], "insn 1");
    let names = s["event_names"].as_array().expect("names");
    let stage_names: Vec<&str> = rows[0]["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|st| names[st[1].as_u64().expect("name") as usize].as_str().expect("name"))
        .collect();
    assert_eq!(stage_names, ["IF", "ID", "EX", "WB"]);
    let marker = &rows[0]["markers"][0];
    assert_eq!(
        (marker[0].as_u64(), marker[4].as_u64()),
        (Some(2502), Some(u64::from(Severity::Warning.code())))
    );
    let p = api(&v, &format!("/api/pipeline?t0=0&t1=10&px=600&groups={seq}:3:1"));
    assert_eq!(p["groups"][0]["rows"][0]["status"], Status::Flushed.code());
    assert_eq!(http(v.port, "/api/pipeline?t0=0&t1=10&groups=1:2", None).0, 400);
}

#[test]
fn the_page_takes_its_vocabularies_from_the_server() {
    // The front-end must not spell a closed set of the format: it reads `vocab` from the summary.
    let js = include_str!("../src/web/viewer.js");
    for set in [
        Status::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        Severity::ALL.iter().map(|s| s.as_str()).collect(),
        MarkerStyle::ALL.iter().map(|s| s.as_str()).collect(),
    ] {
        let quoted: Vec<String> = set.iter().map(|s| format!("'{s}'")).collect();
        for pair in quoted.windows(2) {
            assert!(!js.contains(&pair.join(", ")), "viewer.js retypes the list {set:?}");
        }
    }
    // Severity colors are keyed by the vocabulary's names (plus "none"): every one, no other.
    let line = js.lines().find(|l| l.contains("const SEV_COLOR = {")).expect("SEV_COLOR");
    let keys: Vec<&str> = line
        .split(['{', ','])
        .skip(1)
        .filter_map(|kv| kv.split(':').next())
        .map(str::trim)
        .collect();
    let mut want = vec!["none"];
    want.extend(Severity::ALL.iter().map(|s| s.as_str()));
    assert_eq!(keys, want, "SEV_COLOR drifted from Severity::ALL");
    assert!(!js.contains("b[7]") && !js.contains("m[4]"), "bars and markers are read by name");
}

#[test]
fn idle_and_slow_clients_do_not_stall_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    write_trace(&path).expect("write");
    let v = start(&path);
    wait_for(&v, "the index", |s| s["done"] == true);
    // 200 idle sockets, and 4 that send their request a byte every 300 ms (slowloris).
    let idle: Vec<TcpStream> =
        (0..200).map(|_| TcpStream::connect(("127.0.0.1", v.port)).expect("connect")).collect();
    let slow: Vec<TcpStream> =
        (0..4).map(|_| TcpStream::connect(("127.0.0.1", v.port)).expect("connect")).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dribble = {
        let mut slow: Vec<TcpStream> = slow.iter().map(|s| s.try_clone().expect("clone")).collect();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for s in &mut slow {
                    let _ = s.write_all(b"G");
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    // Others are served meanwhile (HEAD_DEADLINE is 5 s: an answer before it was not held up).
    let t = Instant::now();
    for _ in 0..5 {
        assert_eq!(http(v.port, "/api/summary", None).0, 200);
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "served in {:?} despite idle and slow clients",
        t.elapsed()
    );
    // The slow ones are cut off at the deadline, with an answer, not left open.
    let mut answer = Vec::new();
    let mut s = slow.into_iter().next().expect("slow");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let _ = s.read_to_end(&mut answer);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = dribble.join();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 400"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    drop(idle);
}

/// Cycles past 2^53 are more than a browser's numbers hold: the page says so rather than show
/// rounded cycles as if they were exact (VW-NUM-1); a trace below it gets no such note.
#[test]
fn cycles_past_2_53_are_said_to_be_rounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (clk, step) in [(1u64 << 60, Some(256)), ((1u64 << 53) - 10, None)] {
        let path = dir.path().join(format!("at-{clk}.jets"));
        let trace = jets::Trace::create(&path, jets::Metadata::new()).expect("create");
        let r = trace.root("r", "Core").begin_at(clk).expect("begin");
        r.emit_event_at(clk + 3, "tick").expect("event");
        r.end_at(clk + 9).expect("end");
        trace.close().expect("close");
        let v = start(&path);
        let s = wait_for(&v, "the index", |s| s["done"] == true);
        assert_eq!(s["extent"][1], clk + 9, "{s}");
        let note = s["note"].as_str().unwrap_or("");
        match step {
            Some(step) => assert!(
                note.contains("past 2^53") && note.contains(&format!("nearest {step} cycles")),
                "{s}"
            ),
            None => assert!(!note.contains("2^53"), "{s}"),
        }
    }
}

/// A trace that is a part of its run says so in the summary, with the window the page shades
/// (VW-CAP-1); the whole run has no `capture`.
#[test]
fn a_windowed_trace_is_said_to_be_a_part_of_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (setting, window, every, badge, what the line says)
    type Case = (Option<&'static str>, Option<(u64, u64)>, Option<u64>, &'static str, &'static str);
    let cases: [Case; 4] = [
        (
            Some("clk=100..200;every=1000"),
            Some((100, 200)),
            Some(1000),
            "part of the run",
            "a PART",
        ),
        (Some("types=Core"), None, None, "part of the run", "a PART"),
        (Some("clk=100..200;count"), Some((100, 200)), None, "counted, not written", "COUNTED"),
        (None, None, None, "", ""),
    ];
    for (i, (setting, window, every, badge, says)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("part-{i}.jets"));
        captured_pipeline(&path, setting, Metadata::new(), 3000);
        let v = start(&path);
        let s = wait_for(&v, "the index", |s| s["done"] == true);
        let Some(setting) = setting else {
            assert_eq!(s["capture"], Value::Null, "{s}");
            continue;
        };
        let c = &s["capture"];
        assert_eq!(c["setting"], setting, "{s}");
        let text = c["text"].as_str().expect("text");
        assert!(text.contains(says) && text.contains("records"), "{text}");
        assert_eq!(c["window"], window.map_or(Value::Null, |(a, b)| serde_json::json!([a, b])));
        assert_eq!(c["every"], every.map_or(Value::Null, Value::from));
        assert_eq!(c["badge"], badge);
        assert_eq!(c["stopped_at"], Value::Null, "no size limit stopped it");
    }
}

/// VW-CAP-1 with a size limit (CAP-LIM-1): the summary gives the last cycle of the file's lines
/// as `stopped_at`, the page shades what follows up to the run's end (the footer's
/// `capture_end_clk`, past it), and the line says the limit stopped capture.
#[test]
fn a_trace_stopped_by_a_size_limit_says_where() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("limited.jets");
    captured_pipeline(&path, Some("limit=64KiB"), Metadata::new(), 10_000);
    let last = common::last_line_clk(&path);
    assert!(last < 9_000, "the limit stopped capture early: the last line at {last}");
    let v = start(&path);
    let s = wait_for(&v, "the index", |s| s["done"] == true);
    let c = &s["capture"];
    assert_eq!(c["stopped_at"], last, "{s}");
    assert_eq!(c["badge"], "part of the run");
    assert!(c["text"].as_str().expect("text").contains("stopped at its size limit"), "{c}");
    assert_eq!(s["extent"][1], 10_001, "the run's end, from the footer: {s}");
}
