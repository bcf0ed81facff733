//! `jets tree FILE`: the record hierarchy with durations, annotations and event counts.
//!
//! Filters: `--depth N` keeps the top N levels (records below them are not stored, only their ids
//! in a compact set, so memory stays small on huge traces), `--type`, `--name REGEX` and
//! `--clk FROM..TO` keep the records that match, shown with their ancestors for context
//! (ancestors that do not match themselves are marked `·`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use jets::capture::FooterCapture;
use jets::format::Line;
use regex::Regex;
use serde_json::Value;

use crate::formats::timeline::read_trace;

/// Arguments of `jets tree`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The JETS trace.
    pub file: PathBuf,
    /// Show only the top N levels (1 = roots only).
    #[arg(long)]
    pub depth: Option<u32>,
    /// Show only records of this record_type (with their ancestors).
    #[arg(long = "type")]
    pub record_type: Option<String>,
    /// Show only records whose name matches this regular expression (with their ancestors).
    #[arg(long)]
    pub name: Option<String>,
    /// Show only records that overlap cycles FROM..TO (either side may be left out).
    #[arg(long)]
    pub clk: Option<String>,
}

/// What to show.
#[derive(Debug, Default)]
pub struct Filter {
    /// Levels kept (1 = roots only).
    pub depth: Option<u32>,
    /// Record type kept.
    pub record_type: Option<String>,
    /// Name pattern.
    pub name: Option<Regex>,
    /// Cycle window, inclusive.
    pub clk: Option<(u64, u64)>,
}

impl Filter {
    fn from_args(a: &Args) -> Result<Filter> {
        let name = match &a.name {
            Some(n) => Some(Regex::new(n).with_context(|| format!("--name {n:?}"))?),
            None => None,
        };
        let clk = match &a.clk {
            Some(w) => Some(parse_window(w)?),
            None => None,
        };
        if a.depth == Some(0) {
            bail!("--depth must be at least 1 (1 shows the roots)");
        }
        Ok(Filter { depth: a.depth, record_type: a.record_type.clone(), name, clk })
    }

    fn selective(&self) -> bool {
        self.record_type.is_some() || self.name.is_some() || self.clk.is_some()
    }

    fn matches(&self, n: &Node) -> bool {
        self.record_type.as_ref().is_none_or(|t| *t == n.record_type)
            && self.name.as_ref().is_none_or(|r| r.is_match(&n.name))
            && self.clk.is_none_or(|(from, to)| n.start <= to && n.end.is_none_or(|e| e >= from))
    }
}

/// Parses `FROM..TO`, `FROM..` or `..TO`.
pub fn parse_window(w: &str) -> Result<(u64, u64)> {
    let Some((a, b)) = w.split_once("..") else {
        bail!("--clk {w:?}: expected FROM..TO (cycles; either side may be left out)")
    };
    let num = |s: &str, default: u64| -> Result<u64> {
        if s.trim().is_empty() {
            Ok(default)
        } else {
            s.trim().parse().with_context(|| format!("--clk {w:?}: {s:?} is not a cycle number"))
        }
    };
    let (from, to) = (num(a, 0)?, num(b, u64::MAX)?);
    if from > to {
        bail!("--clk {w:?}: FROM is after TO");
    }
    Ok((from, to))
}

#[derive(Debug)]
struct Node {
    id: u64,
    name: String,
    record_type: String,
    start: u64,
    end: Option<u64>,
    depth: u32,
    events: u64,
    annotations: Vec<(String, String)>,
    children: Vec<usize>,
    parent: Option<usize>,
}

/// A set of record ids, kept compact: what `jets tree --depth` remembers of the records it leaves
/// out, to tell a parent below the limit (its child is left out too) from a parent never seen (an
/// error, CV-TREE-1) without storing the records.
///
/// Memory: ids go in chunks of 65,536 (keyed by their high 48 bits); a chunk holds a sorted list
/// of 16-bit offsets (2 bytes an id) up to 4,096 ids, then a bitmap (8 KiB for the chunk: 1 bit
/// an id or less). The SDK's writer numbers records 1, 2, 3, ..., so on a huge trace the chunks
/// fill and a billion records left out cost about 16 MiB (2 bytes a record at worst), where
/// storing them would cost a hundred bytes each. Ids scattered over the whole range cost a chunk
/// each (about 50 bytes): less than the record line that names one.
#[derive(Debug, Default)]
struct IdSet {
    chunks: HashMap<u64, Chunk>,
}

/// The ids of an [`IdSet`] sharing their high 48 bits.
#[derive(Debug)]
enum Chunk {
    /// Sorted low 16 bits, at most [`Chunk::SPARSE_MAX`].
    Sparse(Vec<u16>),
    /// One bit per low 16 bits.
    Dense(Box<[u64; 1024]>),
}

impl Chunk {
    /// Where a sparse chunk becomes a bitmap: 4,096 offsets take the bitmap's 8 KiB.
    const SPARSE_MAX: usize = 4096;
}

impl IdSet {
    fn insert(&mut self, id: u64) {
        let (high, low) = (id >> 16, id as u16);
        let chunk = self.chunks.entry(high).or_insert_with(|| Chunk::Sparse(Vec::new()));
        match chunk {
            Chunk::Sparse(list) => match list.binary_search(&low) {
                Ok(_) => {}
                Err(at) if list.len() < Chunk::SPARSE_MAX => list.insert(at, low),
                Err(_) => {
                    let mut bits = Box::new([0u64; 1024]);
                    for &l in list.iter().chain([&low]) {
                        bits[usize::from(l / 64)] |= 1 << (l % 64);
                    }
                    *chunk = Chunk::Dense(bits);
                }
            },
            Chunk::Dense(bits) => bits[usize::from(low / 64)] |= 1 << (low % 64),
        }
    }

    fn contains(&self, id: u64) -> bool {
        let (high, low) = (id >> 16, id as u16);
        match self.chunks.get(&high) {
            None => false,
            Some(Chunk::Sparse(list)) => list.binary_search(&low).is_ok(),
            Some(Chunk::Dense(bits)) => bits[usize::from(low / 64)] & (1 << (low % 64)) != 0,
        }
    }
}

/// Builds the tree of `path` and renders it.
pub fn render(path: &Path, filter: &Filter) -> Result<String> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut roots = Vec::new();
    // The ids of the records left out below `--depth`: only their ids, compactly (see IdSet).
    let mut below = IdSet::default();
    let mut mhz = None;
    let mut capture = None;
    read_trace(path, |_, line| {
        match line {
            Line::Header(h) => mhz = h.clock_frequency_mhz(),
            Line::Record(r) => {
                let parent = match r.parent_id {
                    None => None,
                    Some(p) => match index.get(&p) {
                        Some(&i) => Some(i),
                        // A parent left out below the depth limit: so is its child.
                        None if below.contains(p) => {
                            below.insert(r.id);
                            return Ok(());
                        }
                        // A parent never seen (a lost or later line, or the record itself):
                        // skipping the record would hide its subtree from the tree without a
                        // word, with `--depth` or without (CV-TREE-1).
                        None => bail!("record {} refers to parent {p}, not seen before it", r.id),
                    },
                };
                let depth = parent.map_or(0, |p| nodes[p].depth + 1);
                if filter.depth.is_some_and(|d| depth >= d) {
                    below.insert(r.id);
                    return Ok(());
                }
                let i = nodes.len();
                nodes.push(Node {
                    id: r.id,
                    name: r.name.into_owned(),
                    record_type: r.record_type.into_owned(),
                    start: r.clk,
                    end: None,
                    depth,
                    events: 0,
                    annotations: Vec::new(),
                    children: Vec::new(),
                    parent,
                });
                index.insert(r.id, i);
                match parent {
                    Some(p) => nodes[p].children.push(i),
                    None => roots.push(i),
                }
            }
            Line::RecordEnd(e) => {
                if let Some(&i) = index.get(&e.record_id) {
                    nodes[i].end = Some(e.clk);
                }
            }
            Line::Event(e) => {
                if let Some(&i) = index.get(&e.record_id) {
                    nodes[i].events += 1;
                }
            }
            Line::Annotation(a) => {
                if let Some(&i) = index.get(&a.record_id) {
                    nodes[i].annotations.push((a.name.into_owned(), short_json(&a.data)));
                }
            }
            Line::Footer(f) => capture = FooterCapture::read(&f),
        }
        Ok(())
    })?;
    // Shown: matches, and ancestors of matches for context.
    let mut shown = vec![!filter.selective(); nodes.len()];
    let mut matched = vec![true; nodes.len()];
    if filter.selective() {
        for i in 0..nodes.len() {
            matched[i] = filter.matches(&nodes[i]);
            if matched[i] {
                let mut cur = Some(i);
                while let Some(c) = cur {
                    if shown[c] {
                        break;
                    }
                    shown[c] = true;
                    cur = nodes[c].parent;
                }
            }
        }
    }
    let mut out = String::new();
    // (node, text before its line, indentation of what hangs below it)
    let mut stack: Vec<(usize, String, String)> =
        roots.iter().rev().map(|&r| (r, String::new(), String::new())).collect();
    let mut count = 0u64;
    while let Some((i, line_prefix, indent)) = stack.pop() {
        if !shown[i] {
            continue;
        }
        count += 1;
        let n = &nodes[i];
        let _ = writeln!(out, "{line_prefix}{}", describe(n, matched[i], mhz));
        let kids: Vec<usize> = n.children.iter().copied().filter(|&c| shown[c]).collect();
        let bar = if kids.is_empty() { "   " } else { "│  " };
        for (name, data) in &n.annotations {
            let _ = writeln!(out, "{indent}{bar}@ {name} = {data}");
        }
        for (k, &c) in kids.iter().enumerate().rev() {
            let last = k + 1 == kids.len();
            let (connector, below) = if last { ("└─ ", "   ") } else { ("├─ ", "│  ") };
            stack.push((c, format!("{indent}{connector}"), format!("{indent}{below}")));
        }
    }
    if count == 0 {
        let _ = writeln!(out, "(no record matches)");
    }
    // A window's tree, or a recorder's, is not the run's: the records that enclose it span
    // cycles where nothing was captured (CV-TREE-2).
    if let Some(c) = capture {
        let _ = writeln!(out, "{}", c.describe());
    }
    Ok(out)
}

fn describe(n: &Node, matched: bool, mhz: Option<f64>) -> String {
    let mut s = String::new();
    if !matched {
        s.push_str("· ");
    }
    let _ = write!(s, "{} [{}] #{}  ", n.name, n.record_type, n.id);
    match n.end {
        Some(e) => {
            let d = e.saturating_sub(n.start);
            let _ = write!(s, "clk {}..{} ({d} cycles", n.start, e);
            if let Some(f) = mhz {
                let _ = write!(s, ", {}", crate::human::cycles_time(d, f));
            }
            s.push(')');
        }
        None => {
            let _ = write!(s, "clk {}.. (unended)", n.start);
        }
    }
    if n.events > 0 {
        let _ = write!(s, "  {} event{}", n.events, if n.events == 1 { "" } else { "s" });
    }
    s
}

/// Annotation data on one line, cut at 80 characters.
fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(77).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// Runs `jets tree`.
pub fn run(args: Args) -> Result<ExitCode> {
    let filter = Filter::from_args(&args)?;
    let text = render(&args.file, &filter)?;
    let mut out = crate::out::Out::stdout();
    out.text(&text)?;
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::IdSet;

    #[test]
    fn an_id_set_holds_what_was_put_in_sparse_or_dense() {
        let mut set = IdSet::default();
        let ids: Vec<u64> = (0..10_000u64).map(|i| i * 3).chain([u64::MAX, 1 << 40]).collect();
        for &id in ids.iter().rev() {
            set.insert(id);
            set.insert(id);
        }
        for &id in &ids {
            assert!(set.contains(id), "{id}");
            if let Some(next) = id.checked_add(1) {
                assert!(!set.contains(next), "{next}");
            }
        }
        assert!(!set.contains(u64::MAX - 1) && !set.contains((1 << 40) + 65_536));
        // 0..30,000 by 3: the first chunk passes 4,096 ids and is a bitmap.
        assert!(matches!(set.chunks.get(&0), Some(super::Chunk::Dense(_))));
    }
}
