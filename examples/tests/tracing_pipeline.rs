//! The tracing_pipeline example runs and writes a trace that `jets_read::validate` finds clean.

use std::process::Command;

#[test]
fn tracing_pipeline_writes_a_valid_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pipeline.jets");
    let run =
        Command::new(env!("CARGO_BIN_EXE_tracing_pipeline")).arg(&out).arg("16").output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}");
    // 16 instructions of 4 stages each, under one core record.
    assert_eq!(report.counts.records, 1 + 16 * 5);
    assert!(text.contains(r#""name":"RAW hazard""#), "a load-use stall is traced");
    assert!(text.contains(r#""type":"annotation","name":"retired""#));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("81 records"), "{stdout}");
}

#[test]
fn tracing_pipeline_reports_a_bad_argument() {
    let dir = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_tracing_pipeline"))
        .arg(dir.path().join("x.jets"))
        .arg("many")
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("instruction count \"many\""), "{stderr}");
}
