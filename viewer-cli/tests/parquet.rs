//! `jets convert --to parquet` and `jets stats --format parquet`, read back with the arrow-rs
//! Parquet reader: every column of every table, the decisions of spec/parquet.md (PQ-*), and bad
//! input. DuckDB and Spark read the same files in scripts/test.d/50-parquet.sh.
#![cfg(feature = "parquet")]

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};

fn jets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jets")).args(args).output().expect("run jets")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "jets failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected an error: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A table read back whole (tests only: small files).
fn read(path: &Path) -> RecordBatch {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet").build().expect("reader");
    let mut batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    // The files of these tests are far smaller than one batch of the reader (1024 rows).
    assert_eq!(batches.len(), 1, "{}", path.display());
    batches.remove(0)
}

fn text(b: &RecordBatch, col: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(col).unwrap_or_else(|| panic!("no column {col}")).as_string::<i32>();
    (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_owned())).collect()
}

fn int(b: &RecordBatch, col: &str) -> Vec<Option<i64>> {
    let a = b
        .column_by_name(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .as_primitive::<Int64Type>();
    (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))).collect()
}

fn float(b: &RecordBatch, col: &str) -> Vec<Option<f64>> {
    let a = b
        .column_by_name(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .as_primitive::<Float64Type>();
    (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))).collect()
}

fn names(b: &RecordBatch) -> Vec<String> {
    b.schema().fields().iter().map(|f| f.name().clone()).collect()
}

const TRACE: &str = r##"{"type":"header","version":"2.0","metadata":{"clock_frequency_mhz":1000.0}}
{"clk":0,"type":"record","name":"host","record_type":"HostProcess","id":1,"parent_id":null,"description":"","data":{"pid":7}}
{"clk":0,"type":"record","name":"core0","record_type":"Core","id":2,"parent_id":null,"description":"the core","data":{"unit_id":0,"color":"#79706E"}}
{"clk":1,"type":"record","name":"add","record_type":"Instruction","id":3,"parent_id":2,"description":"","data":{"pc":4096,"display_label":"ADD","thread_id":1,"subunit_id":2,"criticality":0.5,"status":"running"}}
{"type":"annotation","name":"regs","record_id":3,"description":"operands","data":{"rd":1}}
{"clk":1,"type":"event","name":"F","record_id":3,"description":"fetch"}
{"clk":2,"type":"event","name":"miss","record_id":3,"description":"","data":{"severity":"warning","icon":"stall"}}
{"clk":2,"type":"record","name":"br","record_type":"Instruction","id":4,"parent_id":2,"description":"","data":{"status":"bogus","color":"red"}}
{"clk":3,"type":"event","name":"HostSync","record_id":1,"description":"","data":{"mono_ns":100,"real_ns":200,"cpu_ns":50,"cpu_usage":12.5,"mem_rss_kb":1000,"psi_some_avg10":0.25,"vendor_x":"y"}}
{"clk":4,"type":"record_end","record_id":4,"status":"flushed"}
{"clk":5,"type":"record_end","record_id":3}
{"clk":6,"type":"event","name":"HostSync","record_id":2,"description":"not on a HostProcess record"}
{"clk":7,"type":"event","name":"HostSync","record_id":1,"description":"","data":{"mono_ns":300,"real_ns":400}}
{"clk":8,"type":"record","name":"mul","record_type":"Instruction","id":5,"parent_id":2,"description":""}
{"clk":9,"type":"record_end","record_id":1}
"##;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write trace");
    p
}

#[test]
fn every_table_and_column() {
    let tmp = tempfile::tempdir().expect("tmp");
    let trace = write(tmp.path(), "small.jets", TRACE);
    let ds = tmp.path().join("ds");
    let said = ok(&jets(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        ds.to_str().unwrap(),
    ]));
    assert!(
        said.contains("5 records (2 unended), 5 events, 1 annotations, 2 host samples"),
        "{said}"
    );
    // PQ-RUN-2: the run is the file's stem; one directory per run.
    let run = ds.join("run=small");
    let mut files: Vec<String> = std::fs::read_dir(&run)
        .expect("run dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["annotations.parquet", "events.parquet", "host_samples.parquet", "records.parquet"]
    );

    let r = read(&run.join("records.parquet"));
    assert_eq!(
        names(&r),
        [
            "run",
            "id",
            "parent_id",
            "name",
            "record_type",
            "description",
            "start_clk",
            "end_clk",
            "status",
            "unit_id",
            "thread_id",
            "subunit_id",
            "display_label",
            "color",
            "criticality",
            "data"
        ]
    );
    // PQ-ORDER-1: in end order, then the unended records by id.
    assert_eq!(int(&r, "id"), [Some(4), Some(3), Some(1), Some(2), Some(5)]);
    assert_eq!(text(&r, "run"), vec![Some("small".to_owned()); 5]);
    assert_eq!(int(&r, "parent_id"), [Some(2), Some(2), None, None, Some(2)]);
    assert_eq!(int(&r, "start_clk"), [Some(2), Some(1), Some(0), Some(0), Some(8)]);
    // PQ-OPEN-1: never ended, end_clk null.
    assert_eq!(int(&r, "end_clk"), [Some(4), Some(5), Some(9), None, None]);
    // PQ-STATUS-1: the record_end's status wins; a malformed hint is null in its column.
    assert_eq!(text(&r, "status")[..2], [Some("flushed".to_owned()), Some("running".to_owned())]);
    assert_eq!(int(&r, "unit_id")[3], Some(0));
    assert_eq!(int(&r, "thread_id")[1], Some(1));
    assert_eq!(int(&r, "subunit_id")[1], Some(2));
    assert_eq!(text(&r, "display_label")[1].as_deref(), Some("ADD"));
    // PQ-HINT-1: colors as viewers read them (#rrggbb, lower case); "red" is not a color.
    assert_eq!(text(&r, "color")[3].as_deref(), Some("#79706e"));
    assert_eq!(text(&r, "color")[0], None);
    assert_eq!(float(&r, "criticality")[1], Some(0.5));
    assert_eq!(text(&r, "description")[3].as_deref(), Some("the core"));
    // PQ-JSON-1: data as compact JSON text, every key kept (hints too), null when absent.
    let data = text(&r, "data");
    assert_eq!(data[0].as_deref(), Some(r#"{"status":"bogus","color":"red"}"#));
    assert_eq!(data[4], None);

    let e = read(&run.join("events.parquet"));
    assert_eq!(names(&e), ["run", "record_id", "clk", "name", "description", "severity", "data"]);
    assert_eq!(int(&e, "clk"), [Some(1), Some(2), Some(3), Some(6), Some(7)]);
    assert_eq!(text(&e, "severity")[1].as_deref(), Some("warning"));
    assert_eq!(text(&e, "description")[0].as_deref(), Some("fetch"));
    assert_eq!(text(&e, "data")[0], None);

    let a = read(&run.join("annotations.parquet"));
    assert_eq!(names(&a), ["run", "record_id", "name", "description", "data"]);
    assert_eq!(text(&a, "data"), [Some(r#"{"rd":1}"#.to_owned())]);

    // PQ-HOST-1: HostSync on HostProcess records only; every metric a column, absent is null.
    let h = read(&run.join("host_samples.parquet"));
    let cols = names(&h);
    assert_eq!(
        cols[..7],
        ["run", "record_id", "clk", "mono_ns", "real_ns", "cpu_ns", "host_instructions"]
    );
    assert_eq!(cols.last().map(String::as_str), Some("extra"));
    assert_eq!(cols.len(), 7 + jets_host::sync::METRICS.len() + 1);
    assert_eq!(int(&h, "clk"), [Some(3), Some(7)]);
    assert_eq!(int(&h, "mono_ns"), [Some(100), Some(300)]);
    assert_eq!(int(&h, "cpu_ns"), [Some(50), None]);
    assert_eq!(float(&h, "cpu_usage"), [Some(12.5), None]);
    assert_eq!(int(&h, "mem_rss_kb"), [Some(1000), None]);
    assert_eq!(float(&h, "psi_some_avg10"), [Some(0.25), None]);
    assert_eq!(int(&h, "perf_cycles"), [None, None]);
    assert_eq!(text(&h, "extra"), [Some(r#"{"vendor_x":"y"}"#.to_owned()), None]);

    // The header rides along in each file's key-value metadata.
    let f = SerializedFileReader::new(File::open(run.join("records.parquet")).expect("open"))
        .expect("read");
    let kv = f.metadata().file_metadata().key_value_metadata().expect("kv");
    let header = kv.iter().find(|k| k.key == "jets.header").and_then(|k| k.value.clone());
    assert!(header.is_some_and(|h| h.contains("clock_frequency_mhz")));
}

#[test]
fn runs_share_a_dataset_and_a_run_is_replaced_whole() {
    let tmp = tempfile::tempdir().expect("tmp");
    let no_host: String =
        TRACE.lines().filter(|l| !l.contains("HostSync")).map(|l| format!("{l}\n")).collect();
    let a = write(tmp.path(), "a.jets", TRACE);
    let b = write(tmp.path(), "b.jets", &no_host);
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    ok(&jets(&["convert", a.to_str().unwrap(), "--to", "parquet", "--run", "x", "-o", d]));
    ok(&jets(&["convert", a.to_str().unwrap(), "--to", "parquet", "--run", "y", "-o", d]));
    assert!(ds.join("run=x/host_samples.parquet").exists());
    // PQ-RUN-3: run x again from a trace without host samples: its old host table is gone.
    ok(&jets(&["convert", b.to_str().unwrap(), "--to", "parquet", "--run", "x", "-o", d]));
    assert!(!ds.join("run=x/host_samples.parquet").exists());
    assert!(ds.join("run=y/host_samples.parquet").exists());
    assert_eq!(read(&ds.join("run=x/events.parquet")).num_rows(), 2);
    let mut entries: Vec<String> = std::fs::read_dir(&ds)
        .expect("ds")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["run=x", "run=y"], "nothing else (no temporary directory) is left");
}

#[test]
fn compressed_input() {
    let tmp = tempfile::tempdir().expect("tmp");
    let gz = tmp.path().join("z.jets.gz");
    let mut enc = flate2::write::GzEncoder::new(
        File::create(&gz).expect("gz"),
        flate2::Compression::default(),
    );
    std::io::Write::write_all(&mut enc, TRACE.as_bytes()).expect("gzip");
    enc.finish().expect("gzip");
    let ds = tmp.path().join("ds");
    ok(&jets(&["convert", gz.to_str().unwrap(), "--to", "parquet", "-o", ds.to_str().unwrap()]));
    assert_eq!(read(&ds.join("run=z/records.parquet")).num_rows(), 5);
    // Cut short: an error, and the dataset gets nothing.
    let bytes = std::fs::read(&gz).expect("read");
    let cut = tmp.path().join("cut.jets.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let msg = err(&jets(&[
        "convert",
        cut.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        ds.to_str().unwrap(),
    ]));
    assert!(msg.contains("cut.jets.gz: line 4 is torn"), "{msg}");
    assert!(!ds.join("run=cut").exists());
}

#[test]
fn bad_input_is_a_clear_error_and_leaves_the_dataset_alone() {
    let tmp = tempfile::tempdir().expect("tmp");
    let good = write(tmp.path(), "t.jets", TRACE);
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    ok(&jets(&["convert", good.to_str().unwrap(), "--to", "parquet", "-o", d]));
    let before = std::fs::read(ds.join("run=t/records.parquet")).expect("records");

    let mut lines: Vec<&str> = TRACE.lines().collect();
    lines[3] = r#"{"clk":1,"type":"record","name":"add""#;
    let bad = write(tmp.path(), "t2.jets", &(lines.join("\n") + "\n"));
    let msg =
        err(&jets(&["convert", bad.to_str().unwrap(), "--to", "parquet", "--run", "t", "-o", d]));
    assert!(msg.contains("t2.jets: line 4:"), "names file and line: {msg}");
    assert_eq!(std::fs::read(ds.join("run=t/records.parquet")).expect("records"), before);

    let dup = TRACE.replace(r#""id":4,"#, r#""id":3,"#);
    let bad = write(tmp.path(), "dup.jets", &dup);
    let msg = err(&jets(&["convert", bad.to_str().unwrap(), "--to", "parquet", "-o", d]));
    // PQ-CHECK-1.
    assert!(msg.contains("dup.jets:8") && msg.contains("record 3 begins again"), "{msg}");

    // PQ-INT-1: an id beyond INT64 is refused, not wrapped.
    let big = TRACE.replace(r#""id":5,"#, r#""id":18446744073709551615,"#);
    let bad = write(tmp.path(), "big.jets", &big);
    let msg = err(&jets(&["convert", bad.to_str().unwrap(), "--to", "parquet", "-o", d]));
    assert!(msg.contains("big.jets:14") && msg.contains("PQ-INT-1"), "{msg}");

    // A HostSync without its clocks breaks spec/host-sync.md.
    let nomono = TRACE.replace(r#""mono_ns":300,"#, "");
    let bad = write(tmp.path(), "nomono.jets", &nomono);
    let msg = err(&jets(&["convert", bad.to_str().unwrap(), "--to", "parquet", "-o", d]));
    assert!(msg.contains("nomono.jets:13") && msg.contains("mono_ns"), "{msg}");

    let msg = err(&jets(&[
        "convert",
        good.to_str().unwrap(),
        "--to",
        "parquet",
        "--run",
        "a/b",
        "-o",
        d,
    ]));
    assert!(msg.contains("PQ-RUN-1"), "{msg}");
    let msg = err(&jets(&["convert", good.to_str().unwrap(), "--to", "parquet", "-o", "-"]));
    assert!(msg.contains("directory"), "{msg}");
    let mut entries: Vec<String> = std::fs::read_dir(&ds)
        .expect("ds")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["run=t"], "failed exports leave nothing behind");
}

#[test]
fn stats_summary_of_many_runs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = write(tmp.path(), "a.jets", TRACE);
    let head = TRACE.lines().take(3).map(|l| format!("{l}\n")).collect::<String>();
    let b = write(tmp.path(), "b.jets", &head);
    let out = tmp.path().join("summary.parquet");
    let (a, b, o) = (a.to_str().unwrap(), b.to_str().unwrap(), out.to_str().unwrap());
    ok(&jets(&["stats", a, b, "--format", "parquet", "-o", o]));
    let s = read(&out);
    let runs = text(&s, "run");
    let types = text(&s, "record_type");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&jets(&["stats", a, "--format", "json"]))).expect("json");
    let stated = json["record_types"].as_object().expect("types");
    let rows: Vec<usize> = (0..s.num_rows()).filter(|&i| runs[i].as_deref() == Some("a")).collect();
    assert_eq!(rows.len(), stated.len());
    for i in rows {
        let t = &stated[types[i].as_deref().expect("type")];
        assert_eq!(int(&s, "count")[i], t["count"].as_i64());
        assert_eq!(int(&s, "unended")[i], t["unended"].as_i64());
        let ended = t["ended"].as_u64().unwrap_or(0);
        let total = t["duration_cycles"]["total"].as_i64();
        assert_eq!(int(&s, "total_cycles")[i], if ended > 0 { total } else { None });
        assert_eq!(
            int(&s, "p99_cycles")[i],
            if ended > 0 { t["duration_cycles"]["p99"].as_i64() } else { None }
        );
        assert_eq!(int(&s, "run_events")[i], Some(5));
        assert_eq!(float(&s, "clock_frequency_mhz")[i], Some(1000.0));
    }
    let b_rows: Vec<usize> =
        (0..s.num_rows()).filter(|&i| runs[i].as_deref() == Some("b")).collect();
    assert_eq!(b_rows.len(), 2, "b has a HostProcess and a Core record, both unended");
    assert!(b_rows
        .iter()
        .all(|&i| int(&s, "unended")[i] == Some(1) && int(&s, "total_cycles")[i].is_none()));

    let b2 = tmp.path().join("sub");
    std::fs::create_dir(&b2).expect("dir");
    let a2 = write(&b2, "a.jets", TRACE);
    let msg = err(&jets(&["stats", a, a2.to_str().unwrap(), "--format", "parquet", "-o", o]));
    assert!(msg.contains("would both be run \"a\""), "{msg}");
    let msg = err(&jets(&["stats", a, b]));
    assert!(msg.contains("--format parquet"), "{msg}");

    // PQ-INT-1: a cycle beyond INT64 in a summary is refused, naming the file and the figure.
    let late = [
        r#"{"type":"header","version":"2.0","metadata":{}}"#,
        r#"{"clk":9223372036854775809,"type":"record","name":"i","record_type":"Instruction","id":1,"parent_id":null,"description":""}"#,
        r#"{"clk":9223372036854775810,"type":"record_end","record_id":1}"#,
        "",
    ]
    .join("\n");
    let late = write(tmp.path(), "late.jets", &late);
    let msg = err(&jets(&["stats", late.to_str().unwrap(), "--format", "parquet", "-o", o]));
    assert!(
        msg.contains("late.jets: first_clk 9223372036854775809") && msg.contains("PQ-INT-1"),
        "{msg}"
    );
}
