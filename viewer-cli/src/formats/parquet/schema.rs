//! The columns of the Parquet dataset, in file order (spec/parquet.md is the prose of this file).

use jets_host::sync::{MetricType, METRICS};

use super::table::{opt, req, Column, Kind};

/// `records.parquet`: one row per record, written when the record ends.
pub const RECORDS: &[Column] = &[
    req("run", Kind::Text),
    req("id", Kind::Int),
    opt("parent_id", Kind::Int),
    req("name", Kind::Text),
    req("record_type", Kind::Text),
    req("description", Kind::Text),
    req("start_clk", Kind::Int),
    opt("end_clk", Kind::Int),
    opt("status", Kind::Text),
    opt("unit_id", Kind::Int),
    opt("thread_id", Kind::Int),
    opt("subunit_id", Kind::Int),
    opt("display_label", Kind::Text),
    opt("color", Kind::Text),
    opt("criticality", Kind::Float),
    opt("data", Kind::Text),
];

/// `events.parquet`: one row per event, in file order.
pub const EVENTS: &[Column] = &[
    req("run", Kind::Text),
    req("record_id", Kind::Int),
    req("clk", Kind::Int),
    req("name", Kind::Text),
    req("description", Kind::Text),
    opt("severity", Kind::Text),
    opt("data", Kind::Text),
];

/// `annotations.parquet`: one row per annotation, in file order.
pub const ANNOTATIONS: &[Column] = &[
    req("run", Kind::Text),
    req("record_id", Kind::Int),
    req("name", Kind::Text),
    req("description", Kind::Text),
    opt("data", Kind::Text),
];

/// The host-sample columns before the metrics.
const HOST_CLOCKS: &[Column] = &[
    req("run", Kind::Text),
    req("record_id", Kind::Int),
    req("clk", Kind::Int),
    req("mono_ns", Kind::Int),
    req("real_ns", Kind::Int),
    opt("cpu_ns", Kind::Int),
    opt("host_instructions", Kind::Int),
];

/// The last host-sample column: data keys outside the convention, as a JSON object.
pub const HOST_EXTRA: Column = opt("extra", Kind::Text);

/// `host_samples.parquet`: the clocks, one nullable column per HostSync metric
/// ([`jets_host::sync::METRICS`], in that order), then [`HOST_EXTRA`].
pub fn host_samples() -> Vec<Column> {
    let metrics = METRICS.iter().map(|&(key, t)| match t {
        MetricType::Count => opt(key, Kind::Int),
        MetricType::Fraction => opt(key, Kind::Float),
    });
    HOST_CLOCKS.iter().copied().chain(metrics).chain([HOST_EXTRA]).collect()
}

/// `summary.parquet` of `jets stats --format parquet`: one row per run and record_type.
pub const SUMMARY: &[Column] = &[
    req("run", Kind::Text),
    req("file", Kind::Text),
    opt("record_type", Kind::Text),
    req("count", Kind::Int),
    req("ended", Kind::Int),
    req("unended", Kind::Int),
    opt("total_cycles", Kind::Int),
    opt("min_cycles", Kind::Int),
    opt("mean_cycles", Kind::Float),
    opt("p50_cycles", Kind::Int),
    opt("p95_cycles", Kind::Int),
    opt("p99_cycles", Kind::Int),
    opt("max_cycles", Kind::Int),
    opt("first_clk", Kind::Int),
    opt("last_clk", Kind::Int),
    req("extent_cycles", Kind::Int),
    opt("clock_frequency_mhz", Kind::Float),
    req("run_records", Kind::Int),
    req("run_events", Kind::Int),
    req("run_annotations", Kind::Int),
];
