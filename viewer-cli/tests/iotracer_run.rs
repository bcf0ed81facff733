//! `jets run --io-trace DIR`: with feature `ebpf` (scripts/test.d/30-ebpf.sh, as root) a shell's
//! file writes come out in io-tracer's layout and back in through `jets import --from io-tracer`;
//! without the feature the option is refused with a clear message.

use std::process::Command;

fn jets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jets"))
}

#[cfg(not(feature = "ebpf"))]
#[test]
fn without_the_feature_io_trace_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let o = jets()
        .args(["run", "--quiet", "--io-trace"])
        .arg(tmp.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("built without the `ebpf` feature"), "{err}");
}

#[cfg(feature = "ebpf")]
#[test]
fn io_trace_round_trip_through_import() {
    let cap = jets_host::ebpf::capability();
    if !cap.available {
        println!("unavailable: {}", cap.reason.unwrap_or_default());
        return;
    }
    let tmp = tempfile::Builder::new().prefix("jets-io-").tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let file = dir.join("out.txt");
    let script = format!("printf 0123456789 > {f}; cat {f} > /dev/null", f = file.display());
    let io = dir.join("io");
    let o = jets()
        .args(["run", "--quiet", "--no-beacon", "--io-trace"])
        .arg(&io)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("none lost"), "{err}");
    let out_dir = std::fs::read_dir(&io).unwrap().next().unwrap().unwrap().path();
    assert!(out_dir.file_name().unwrap().to_string_lossy().starts_with("output_"));
    // The losses are recorded beside the CSV files, per stream (HIO3).
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("jets_io_stats.json")).unwrap())
            .unwrap();
    for sub in ["fs", "ds", "cache", "nw", "pagefault", "iouring", "process"] {
        assert_eq!(stats["streams"][sub]["lost"], 0, "{sub}: {stats}");
    }
    for sub in ["fs", "ds", "cache", "nw", "pagefault", "iouring", "process", "system_spec"] {
        assert!(out_dir.join(sub).is_dir(), "{sub}/");
    }
    let trace = dir.join("io.jets");
    let o = jets()
        .args(["import", "--from", "io-tracer"])
        .arg(&out_dir)
        .arg("-o")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["type"] == "event" && l["data"]["filename"] == file.to_str().unwrap())
        .collect();
    let ops: Vec<(&str, u64)> = events
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["data"]["size"].as_u64().unwrap_or(0)))
        .collect();
    // The shell opens the file, moves the fd to 1 (dup2: the original is closed) and printf
    // writes through fd 1; then cat reads the 10 bytes and the end of the file.
    assert_eq!(
        ops,
        [
            ("OPEN", 0),
            ("CLOSE", 0),
            ("WRITE", 10),
            ("OPEN", 0),
            ("READ", 10),
            ("READ", 0),
            ("CLOSE", 0)
        ]
    );
    let pids: std::collections::HashSet<u64> =
        events.iter().map(|e| e["data"]["pid"].as_u64().unwrap()).collect();
    assert!(pids.len() >= 2, "sh and its child cat are both traced: {pids:?}");
}
