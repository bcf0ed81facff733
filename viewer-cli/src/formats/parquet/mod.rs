//! `jets convert TRACE --to parquet --run NAME -o DIR`: a trace as one run of a Hive-partitioned
//! Parquet dataset, `DIR/run=NAME/{records,events,annotations,host_samples}.parquet`, that DuckDB,
//! Spark, Trino or a warehouse read as one table per kind across every run exported into `DIR`.
//! The schema and its decisions (PQ-*) are in spec/parquet.md.

pub mod export;
pub mod schema;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::formats::timeline::read_trace;
pub use export::Counts;

/// The longest run name (PQ-RUN-1).
pub const RUN_NAME_MAX: usize = 128;

/// Checks a run name (PQ-RUN-1): 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `_`.
/// These need no escaping in a Hive partition path, and no engine takes the directory for a
/// hidden or temporary one.
pub fn check_run(name: &str) -> Result<&str> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > RUN_NAME_MAX {
        bail!("run name {name:?}: must be 1 to {RUN_NAME_MAX} characters (PQ-RUN-1)");
    }
    if let Some(c) = name.chars().find(|&c| !ok_char(c)) {
        bail!(
            "run name {name:?}: {c:?} is not allowed; use letters, digits, '.', '_' and '-' \
             (PQ-RUN-1)"
        );
    }
    if name.starts_with(['.', '_']) {
        bail!("run name {name:?}: must not start with '.' or '_', which engines skip (PQ-RUN-1)");
    }
    Ok(name)
}

/// The default run name of a trace file (PQ-RUN-2): its file name without the compression suffix
/// (`.gz`, `.zst`, `.br`) and then without the trace suffix (`.jets`, `.jsonl`, `.json`).
pub fn run_from_path(path: &Path) -> Result<String> {
    let mut name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    for suffixes in [&[".gz", ".zst", ".br"][..], &[".jets", ".jsonl", ".json"][..]] {
        if let Some(s) = suffixes.iter().find(|s| name.len() > s.len() && name.ends_with(*s)) {
            name = &name[..name.len() - s.len()];
        }
    }
    check_run(name)
        .map(str::to_owned)
        .with_context(|| format!("{}: give the run a name with --run", path.display()))
}

/// Where `jets convert` puts run `run` of dataset `dir`.
pub fn partition(dir: &Path, run: &str) -> PathBuf {
    dir.join(format!("run={run}"))
}

/// Exports `input` as run `run` (default: from the file name) into the dataset `dir`; returns the
/// partition written and its row counts. The run is written into a hidden directory first and
/// renamed into place when complete, so readers never see half a run, and a failed export leaves
/// the dataset as it was; an existing run of the same name is replaced (PQ-RUN-3).
pub fn convert(input: &Path, dir: &Path, run: Option<&str>) -> Result<(PathBuf, Counts)> {
    if dir == Path::new("-") {
        bail!("a Parquet dataset is a directory: -o DIR, not standard output");
    }
    let run = match run {
        Some(r) => check_run(r)?.to_owned(),
        None => run_from_path(input)?,
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = partition(dir, &run);
    let tmp = dir.join(format!(".run={run}.jets-tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
    }
    std::fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let written = write_run(input, &tmp, &run).and_then(|counts| {
        if target.exists() {
            std::fs::remove_dir_all(&target)
                .with_context(|| format!("replacing {}", target.display()))?;
        }
        std::fs::rename(&tmp, &target)
            .with_context(|| format!("moving {} to {}", tmp.display(), target.display()))?;
        Ok(counts)
    });
    match written {
        Ok(counts) => Ok((target, counts)),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn write_run(input: &Path, dir: &Path, run: &str) -> Result<Counts> {
    let mut export = export::Export::create(dir, run)?;
    read_trace(input, |_, line| export.line(line))?;
    export.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names() {
        assert_eq!(check_run("w32-seed.1_a").ok(), Some("w32-seed.1_a"));
        for bad in ["", ".x", "_x", "a/b", "a=b", "a b", "é", &"x".repeat(129)] {
            assert!(check_run(bad).is_err(), "{bad:?}");
        }
        let stem = |p: &str| run_from_path(Path::new(p)).ok();
        assert_eq!(stem("runs/pipeline.jets.gz").as_deref(), Some("pipeline"));
        assert_eq!(stem("w8.jsonl").as_deref(), Some("w8"));
        assert_eq!(stem("a.b.zst").as_deref(), Some("a.b"));
        assert_eq!(stem(".jets"), None);
        assert_eq!(stem("my run.jets"), None);
    }
}
