//! Built without the `enabled` feature (`cargo test -p jets-sdk --no-default-features --features
//! tracing,macros --test compiled_out`, as `scripts/test` does): the same instrumentation
//! compiles, runs its bodies, computes nothing for the trace and writes no line but the header and
//! the footer, which says why.
#![cfg(all(not(feature = "enabled"), feature = "tracing", feature = "macros"))]

mod common;

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use common::Buf;
use jets::{Metadata, RecordHandle, Trace};
use tracing_subscriber::layer::SubscriberExt;

static COMPUTED: AtomicU32 = AtomicU32::new(0);

fn costly(x: u64) -> u64 {
    COMPUTED.fetch_add(1, Relaxed);
    x * 2
}

#[jets::record(trace = trace, skip(trace), record_type = "Core", clk = costly(1), handle = me,
    fields(doubled = costly(n)), ret)]
fn native(trace: &Trace, n: u64) -> u64 {
    assert!(me.is_none(), "compiled out: the body's handle is None");
    n + 1
}

#[jets::record(description = "via tracing", fields(doubled = costly(n)))]
fn via_tracing(n: u64) -> u64 {
    n + 2
}

#[test]
fn instrumentation_compiles_to_nothing() {
    assert!(!jets::COMPILED_IN, "the build says it does not trace");
    let out = Buf::default();
    let trace = Trace::to_writer(out.clone(), Metadata::new().tool("compiled-out")).unwrap();
    let layer = jets::JetsLayer::new(trace.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        assert_eq!(native(&trace, 3), 4);
        assert_eq!(via_tracing(3), 5);
        let _span = tracing::info_span!("plain", clk = 1u64).entered();
        tracing::info!(clk = 2u64, "an event");
    });
    assert_eq!(COMPUTED.load(Relaxed), 0, "no field value is computed");
    let root = trace.root("core", "Core").begin_at(0).unwrap();
    let child: RecordHandle = root.child("insn", "Instruction").begin_at(1).unwrap();
    jets::event!(child, "Fetch", clk = 1, pc = 4u64).unwrap();
    child.emit_event_at(1, "Decode").unwrap();
    child.emit_event_fields_at(1, "Issue", [("port", 2u64.into())]).unwrap();
    let uop = child
        .begin_child_fields_at(1, "uop", "Uop", || {
            COMPUTED.fetch_add(1, Relaxed);
            [("port", 2u64.into())]
        })
        .unwrap();
    assert!(!uop.is_recorded());
    uop.end_at(2).unwrap();
    assert_eq!(COMPUTED.load(Relaxed), 0, "a record's fields are not made");
    child.end_at(2).unwrap();
    root.end_at(3).unwrap();
    // The host collector too (jets-host does not turn `enabled` back on): it samples, and writes
    // nothing.
    #[cfg(target_os = "linux")]
    {
        let config = jets_host::HostConfig { perf: false, ..Default::default() }
            .interval(std::time::Duration::from_millis(1));
        let monitor = jets_host::HostMonitor::start(&trace, config).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let report = monitor.stop().unwrap();
        assert!(report.samples >= 1, "the collector ran: {} samples", report.samples);
    }
    trace.close().unwrap();

    let text = out.text();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}\n{text}");
    let kinds: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
        .collect();
    assert_eq!(kinds, [r#""header""#, r#""footer""#], "{text}");
    assert!(text.contains(r#""capture":"compiled out""#), "{text}");
}
