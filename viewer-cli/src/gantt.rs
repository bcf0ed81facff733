//! `jets gantt FILE -o OUT.html`: the viewer as one self-contained HTML file, for small traces.
//!
//! The page is the same front-end as `jets view`; instead of asking the server, it reads a bundle
//! inlined in the page: the summary, every bar with its label, every record's details and the
//! host tracks, all written by the same API functions and escaped for a `<script>` element.

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
    let t1 = ix.now().max(t0) + 1;
    // Less than a cycle per pixel (for any trace shorter than 4 G cycles): no bars are merged.
    let px = u32::MAX;
    let bars = api::window_json(shared, &ix, t0, t1, px, &rows, true);
    let mut o = Vec::with_capacity(bars.len() * 3 + summary.len() + 1024);
    o.extend_from_slice(b"{\"summary\":");
    o.extend_from_slice(&summary);
    o.extend_from_slice(b",\"window\":");
    o.extend_from_slice(&bars);
    o.extend_from_slice(b",\"host\":");
    o.extend_from_slice(&host);
    o.extend_from_slice(b",\"nodes\":[");
    for rec in 0..ix.recs.len() as u32 {
        if rec > 0 {
            o.push(b',');
        }
        api::node_json(&mut o, shared, &ix, rec);
    }
    o.extend_from_slice(b"],\"records\":{");
    drop(ix);
    let ids: Vec<u64> = shared
        .index
        .read()
        .map_err(|_| anyhow!("index poisoned"))?
        .recs
        .iter()
        .map(|r| r.id)
        .collect();
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        jets::format::json::write_str(&mut o, &id.to_string());
        o.push(b':');
        let params = [("id".to_owned(), id.to_string())].into_iter().collect();
        o.extend_from_slice(&api::record(shared, &params).map_err(api_err)?);
    }
    o.extend_from_slice(b"}}");
    Ok(web::page_static(&o))
}
