//! `jets gantt FILE -o OUT.html`: the viewer as one self-contained HTML file, for small traces.
//!
//! The page is the same front-end as `jets view`; instead of asking the server, it reads a bundle
//! inlined in the page: the summary, every bar with its label, every record's details, every
//! pipeline row (so the page has the same pipeline mode) and the host tracks, all written by the
//! same API functions and escaped for a `<script>` element.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use crate::view::{api, build, web};

/// Arguments of `jets gantt`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The JETS trace.
    pub file: PathBuf,
    /// The HTML file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Refuse traces with more records than this (the page holds every record; use `jets view`
    /// for large traces).
    #[arg(long, default_value_t = 50_000)]
    pub max_records: u64,
}

/// Runs `jets gantt`.
pub fn run(args: Args) -> Result<ExitCode> {
    let shared = build::build_now(&args.file)?;
    let html = page(&shared, args.max_records)?;
    std::fs::write(&args.output, html)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let counts = shared.index.read().map_err(|_| anyhow!("index poisoned"))?.counts;
    eprintln!(
        "jets gantt: {} records, {} events -> {}",
        counts.records,
        counts.events,
        args.output.display()
    );
    if counts.errors > 0 {
        eprintln!(
            "jets gantt: {} lines of {} were skipped (see the page's status bar)",
            counts.errors,
            args.file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything the static page reads, written by the same API functions as `jets view`'s answers.
#[derive(serde::Serialize)]
struct Bundle {
    summary: api::Summary,
    window: api::WindowOut,
    host: api::HostOut,
    nodes: Vec<api::Node>,
    records: Vec<api::RecordOut>,
    /// Every row of every pipeline group, its markers unmerged (the page merges them per zoom).
    pipeline: Vec<api::PipeGroup>,
}

/// The static page of an indexed trace.
pub fn page(shared: &build::Shared, max_records: u64) -> Result<String> {
    let api_err = |e: api::ApiError| anyhow!("{}", e.message);
    let summary = api::summary(shared).map_err(api_err)?;
    let host = api::host(shared).map_err(api_err)?;
    let ix = shared.index.read().map_err(|_| anyhow!("index poisoned"))?;
    if ix.counts.records > max_records {
        bail!(
            "{}: {} records is more than a static page should hold (--max-records {max_records}); \
             use `jets view` for large traces",
            shared.path.display(),
            ix.counts.records
        );
    }
    let rows: Vec<u32> = (0..ix.rows.len() as u32).collect();
    let t0 = ix.first_clk.unwrap_or(0);
    // A window is [t0, t1): one past the last cycle, or, for a trace reaching u64::MAX, a window
    // ending there, which holds that cycle too (VW-END-3).
    let t1 = ix.now().max(t0).saturating_add(1);
    // Less than a cycle per pixel (for any trace shorter than 4 G cycles): no bars are merged.
    let px = u32::MAX;
    let window = api::window_of(shared, &ix, t0, t1, px, &rows, true);
    let all = 0..ix.recs.len() as u32;
    // A cycle per u32::MAX pixels: only events at the same cycle are merged.
    let cpp = 1.0 / f64::from(px);
    let pipeline = (0..ix.seqs.len() as u32)
        .map(|seq| api::PipeGroup {
            seq,
            rows: api::pipe_rows(&ix, seq, 0..ix.seqs[seq as usize].recs.len(), cpp),
        })
        .collect();
    let bundle = Bundle {
        pipeline,
        summary,
        window,
        host,
        nodes: all.clone().map(|r| api::node(&ix, r)).collect(),
        records: all.map(|r| api::record_of(shared, &ix, r)).collect(),
    };
    let data = serde_json::to_vec(&bundle).context("encoding the page's data")?;
    Ok(web::page_static(&data))
}
