//! The writer side of capture control: holds records that may become ancestors of captured lines,
//! and the flight recorder's recent lines, and writes them so that the file stays valid.
//!
//! The table holds exactly the records whose line is *not* in the file but may still be needed
//! (held, or kept by the recorder); a record absent from it is in the file, or can no longer be
//! referred to. A line that reaches the file first writes its missing ancestors, top down, each
//! with its own (real) start cycle and the annotations held with it (CAP-ANC-1).

use std::collections::{HashMap, VecDeque};

use super::config::{Capture, Recorder, Trigger};
use super::gate::{ANNOTATION, END, EVENT, RECORD};

/// Where the keeper's lines go: the writer's batch, counted in its summary.
pub(crate) trait Out {
    /// Appends one encoded line of `kind` (a `gate` kind index) at `clk` to the file.
    fn put(&mut self, kind: usize, clk: Option<u64>, bytes: &[u8]);
}

/// What the writer knows about a popped line.
pub(crate) struct Meta<'a> {
    pub(crate) kind: usize,
    /// The record's own id, or the record the line is on.
    pub(crate) id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) clk: u64,
    /// A record held as a possible ancestor rather than selected.
    pub(crate) hold: bool,
    pub(crate) name: &'a str,
    /// The event's `severity` hint is `error`.
    pub(crate) error: bool,
}

struct Entry {
    parent: Option<u64>,
    clk: u64,
    bytes: Vec<u8>,
    /// Annotations queued while the record was not in the file, then its end once ended: a line
    /// from another thread that needs the record may still arrive after its end (CAP-ANC-2).
    held: Vec<u8>,
    held_n: u64,
    /// The cycle of the held end, if any (the last line of `held`).
    end_clk: Option<u64>,
    /// Its own line is in the recorder's buffer.
    buffered: bool,
    /// Selected (not only held): its end is a recorded line of its own.
    selected: bool,
    open: bool,
    /// Ended, and no line referring to it can still be in a ring.
    safe: bool,
    /// Entries whose parent is this one.
    children: u32,
    /// Buffered lines referring to it.
    refs: u32,
}

struct Item {
    kind: usize,
    id: u64,
    clk: u64,
    len: usize,
}

/// The flight recorder's memory: encoded lines in arrival order.
struct Ring {
    limit: Recorder,
    items: VecDeque<Item>,
    bytes: VecDeque<u8>,
    max_clk: u64,
}

pub(crate) struct Keeper {
    table: HashMap<u64, Entry>,
    ring: Option<Ring>,
    triggers: Vec<Trigger>,
    /// Records ended in this pass of the writer; they become safe once every ring has passed
    /// the point it had reached when the pass ended.
    ended: Vec<u64>,
    graves: VecDeque<(Vec<u64>, Vec<u64>)>,
    /// Lines seen, per kind (what the writer popped).
    pub(crate) seen: [u64; 4],
    pub(crate) dumps: u64,
    scratch: Vec<u64>,
}

impl Keeper {
    /// A keeper when `c` needs one (anything held back); `None` writes lines straight through.
    pub(crate) fn new(c: &Capture) -> Option<Keeper> {
        if c.is_full() {
            return None;
        }
        Some(Keeper {
            table: HashMap::new(),
            ring: c.recorder.map(|limit| Ring {
                limit,
                items: VecDeque::new(),
                bytes: VecDeque::new(),
                max_clk: 0,
            }),
            triggers: c.triggers.clone(),
            ended: Vec::new(),
            graves: VecDeque::new(),
            seen: [0; 4],
            dumps: 0,
            scratch: Vec::new(),
        })
    }

    /// Takes one popped line, encoded as `bytes`. Returns true when it triggers a dump (the
    /// writer then calls [`Keeper::dump`]).
    pub(crate) fn line(&mut self, m: &Meta<'_>, bytes: &[u8], out: &mut dyn Out) -> bool {
        self.seen[m.kind] += 1;
        let recording = self.ring.is_some();
        match m.kind {
            RECORD => {
                if !m.hold && !recording {
                    // Selected and written now: a held parent chain goes first.
                    self.materialize(m.parent, out);
                    out.put(RECORD, Some(m.clk), bytes);
                    return false;
                }
                if let Some(p) = m.parent.and_then(|p| self.table.get_mut(&p)) {
                    p.children += 1;
                }
                let buffered = recording && !m.hold;
                self.table.insert(
                    m.id,
                    Entry {
                        parent: m.parent,
                        clk: m.clk,
                        bytes: bytes.to_vec(),
                        held: Vec::new(),
                        held_n: 0,
                        end_clk: None,
                        buffered,
                        selected: !m.hold,
                        open: true,
                        safe: false,
                        children: 0,
                        refs: 0,
                    },
                );
                if buffered {
                    self.record_item(RECORD, m.id, m.clk, bytes);
                }
                false
            }
            ANNOTATION => {
                match self.table.get_mut(&m.id) {
                    Some(e) if !e.buffered => {
                        e.held.extend_from_slice(bytes);
                        e.held_n += 1;
                    }
                    _ if recording => {
                        let clk = self.ring.as_ref().map_or(0, |r| r.max_clk);
                        self.record_item(ANNOTATION, m.id, clk, bytes);
                    }
                    _ => out.put(ANNOTATION, None, bytes),
                }
                false
            }
            END => {
                if let Some(e) = self.table.get_mut(&m.id) {
                    e.open = false;
                    self.ended.push(m.id);
                    if recording && e.selected {
                        self.record_item(END, m.id, m.clk, bytes);
                    } else {
                        e.held.extend_from_slice(bytes);
                        e.end_clk = Some(m.clk);
                    }
                } else if recording {
                    self.record_item(END, m.id, m.clk, bytes);
                } else {
                    out.put(END, Some(m.clk), bytes);
                }
                false
            }
            _ => {
                if recording {
                    self.record_item(EVENT, m.id, m.clk, bytes);
                    self.triggers.iter().any(|t| match t {
                        Trigger::Event(name) => name == m.name,
                        Trigger::Error => m.error,
                    })
                } else {
                    self.materialize(Some(m.id), out);
                    out.put(EVENT, Some(m.clk), bytes);
                    false
                }
            }
        }
    }

    /// Appends a line to the recorder and forgets what falls out of it.
    fn record_item(&mut self, kind: usize, id: u64, clk: u64, bytes: &[u8]) {
        if kind != RECORD {
            if let Some(e) = self.table.get_mut(&id) {
                e.refs += 1;
            }
        }
        let Some(ring) = self.ring.as_mut() else { return };
        ring.max_clk = ring.max_clk.max(clk);
        ring.items.push_back(Item { kind, id, clk, len: bytes.len() });
        ring.bytes.extend(bytes);
        // Drop what fell out of the window, always keeping the newest line.
        while let Some(ring) = self.ring.as_mut() {
            let Some(front) = ring.items.front() else { break };
            let old = match ring.limit {
                Recorder::Cycles(n) => front.clk.saturating_add(n) <= ring.max_clk,
                Recorder::Bytes(n) => ring.bytes.len() as u64 > n,
            };
            if !old || ring.items.len() == 1 {
                break;
            }
            let Some(item) = ring.items.pop_front() else { break };
            ring.bytes.drain(..item.len);
            self.forget_item(&item);
        }
    }

    /// A buffered line left the recorder without being written.
    fn forget_item(&mut self, item: &Item) {
        if let Some(e) = self.table.get_mut(&item.id) {
            if item.kind == RECORD {
                e.buffered = false;
            } else {
                e.refs = e.refs.saturating_sub(1);
            }
            self.try_remove(item.id);
        }
    }

    /// Writes the held chain ending at `id` (ancestors first) and takes it out of the table.
    fn materialize(&mut self, id: Option<u64>, out: &mut dyn Out) {
        let mut chain = std::mem::take(&mut self.scratch);
        chain.clear();
        let mut cur = id;
        while let Some(e) = cur.and_then(|i| self.table.get(&i).map(|e| (i, e))) {
            chain.push(e.0);
            cur = e.1.parent;
        }
        for &id in chain.iter().rev() {
            // Every id of the chain was just found in the table.
            let Some(e) = self.table.remove(&id) else { continue };
            out.put(RECORD, Some(e.clk), &e.bytes);
            // Annotations carry no clk; they follow their record, then its held end.
            let mut held = e.held.split_inclusive(|&b| b == b'\n');
            for line in held.by_ref().take(e.held_n as usize) {
                out.put(ANNOTATION, None, line);
            }
            if let (Some(clk), Some(line)) = (e.end_clk, held.next()) {
                out.put(END, Some(clk), line);
            }
        }
        self.scratch = chain;
    }

    fn try_remove(&mut self, mut id: u64) {
        loop {
            let Some(e) = self.table.get(&id) else { return };
            if e.open || !e.safe || e.children > 0 || e.refs > 0 || e.buffered {
                return;
            }
            let parent = e.parent;
            self.table.remove(&id);
            let Some(p) = parent else { return };
            let Some(pe) = self.table.get_mut(&p) else { return };
            pe.children = pe.children.saturating_sub(1);
            id = p;
        }
    }

    /// Called by the writer after each pass over the rings, with each ring's lines popped so
    /// far and (lazily) their lines pushed so far.
    pub(crate) fn end_pass(&mut self, popped: &[u64], pushed: impl FnOnce() -> Vec<u64>) {
        while let Some((snapshot, _)) = self.graves.front() {
            let passed =
                snapshot.iter().enumerate().all(|(r, &n)| popped.get(r).is_some_and(|&p| p >= n));
            if !passed {
                break;
            }
            let Some((_, ids)) = self.graves.pop_front() else { break };
            for id in ids {
                if let Some(e) = self.table.get_mut(&id) {
                    e.safe = true;
                    self.try_remove(id);
                }
            }
        }
        if !self.ended.is_empty() {
            // Anything referring to a record was pushed before its end (the end consumes the
            // handle), so it is in a ring before this snapshot.
            self.graves.push_back((pushed(), std::mem::take(&mut self.ended)));
        }
    }

    /// Writes what the flight recorder holds, with the ancestors its lines need, and empties it.
    pub(crate) fn dump(&mut self, out: &mut dyn Out) {
        let Some(ring) = self.ring.as_mut() else { return };
        self.dumps += 1;
        let items = std::mem::take(&mut ring.items);
        let bytes = std::mem::take(&mut ring.bytes);
        let (a, b) = bytes.as_slices();
        let mut line = Vec::new();
        let mut at = 0usize;
        for item in items {
            line.clear();
            let range = at..at + item.len;
            at += item.len;
            if range.end <= a.len() {
                line.extend_from_slice(&a[range]);
            } else if range.start >= a.len() {
                line.extend_from_slice(&b[range.start - a.len()..range.end - a.len()]);
            } else {
                line.extend_from_slice(&a[range.start..]);
                line.extend_from_slice(&b[..range.end - a.len()]);
            }
            if item.kind == RECORD {
                if let Some(e) = self.table.get_mut(&item.id) {
                    e.buffered = false;
                    let parent = e.parent;
                    self.materialize(parent, out);
                    self.materialize(Some(item.id), out);
                }
                continue;
            }
            if let Some(e) = self.table.get_mut(&item.id) {
                e.refs = e.refs.saturating_sub(1);
            }
            self.materialize(Some(item.id), out);
            let clk = (item.kind != ANNOTATION).then_some(item.clk);
            out.put(item.kind, clk, &line);
        }
        if let Some(ring) = self.ring.as_mut() {
            ring.items = VecDeque::new();
            ring.bytes = bytes;
            ring.bytes.clear();
        }
    }
}
