//! The writer side of capture control: holds records that may become ancestors of captured lines,
//! and the flight recorder's recent lines, and writes them so that the file stays valid.
//!
//! Nothing is encoded until it is written. A line the keeper keeps is moved, as the raw entry
//! the producer queued (`line.rs`: a few words, position independent, values moved bitwise), out
//! of its ring into a slot of the keeper's own: a copy of ~16 words into storage that is reused,
//! so keeping a line costs a `memcpy`, not a JSON encoding and an allocation. Most held records
//! and most recorded lines are never written; the few that are get encoded then.
//!
//! The table holds exactly the records whose line is *not* in the file but may still be needed
//! (held, or kept by the recorder); a record absent from it is in the file, or can no longer be
//! referred to. A line that reaches the file first writes its missing ancestors, top down, each
//! with its own (real) start cycle and the annotations held with it (CAP-ANC-1).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::MaybeUninit;

use super::config::{Capture, Recorder, Trigger};
use super::gate::{ANNOTATION, END, EVENT, RECORD};
use crate::format::Value;
use crate::write::line::{Entry, Kind};

/// Where the keeper's lines go: the writer encodes them onto its batch and counts them.
pub(crate) trait Out {
    /// Appends `line` to the file.
    fn put(&mut self, line: &Entry<'_>);
}

/// A record id's slot in the table. Ids are unique, and hashing them with a multiplication is
/// enough (SipHash was a measurable part of the keeper's cost).
#[derive(Default)]
struct IdHash(u64);

impl Hasher for IdHash {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Ids = HashMap<u64, u32, BuildHasherDefault<IdHash>>;

/// No slot.
const NONE: u32 = u32::MAX;

/// Kept raw entries: slots of reusable word storage, each owning the values of the entry it
/// holds, shared by up to two owners (a record kept both in the table and in the recorder).
#[derive(Default)]
struct Lines {
    slots: Vec<Raw>,
    free: Vec<u32>,
}

#[derive(Default)]
struct Raw {
    /// The entry's words; `MaybeUninit` because a `Str` inside may have padding.
    words: Vec<MaybeUninit<u64>>,
    owners: u8,
}

impl Lines {
    /// Moves the entry at `at` (of `n` words) into a slot; the ring's copy must not be dropped.
    ///
    /// # Safety
    /// `at` is a published, not yet dropped entry of `n` words, which the caller gives up.
    unsafe fn take(&mut self, at: *mut u64, n: usize, owners: u8) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Raw::default());
            (self.slots.len() - 1) as u32
        });
        let raw = &mut self.slots[slot as usize];
        raw.words.clear();
        raw.words.reserve(n);
        // SAFETY: `at` holds `n` words (the caller's contract); `reserve` made room for them;
        // copying possibly uninitialised bytes as `MaybeUninit` is allowed.
        unsafe {
            std::ptr::copy_nonoverlapping(at.cast::<MaybeUninit<u64>>(), raw.words.as_mut_ptr(), n);
            raw.words.set_len(n);
        }
        raw.owners = owners;
        slot
    }

    /// The entry in `slot`.
    fn get(&mut self, slot: u32) -> Entry<'_> {
        let at = self.slots[slot as usize].words.as_mut_ptr().cast::<u64>();
        // SAFETY: a slot with owners holds an entry moved in whole by `take`, not dropped (it is
        // dropped when the last owner lets go); it stays unchanged while borrowed.
        unsafe { Entry::read(at) }
    }

    /// One owner lets go of `slot`; the last one drops the entry and frees the slot.
    fn release(&mut self, slot: u32) {
        let raw = &mut self.slots[slot as usize];
        raw.owners = raw.owners.saturating_sub(1);
        if raw.owners == 0 {
            // SAFETY: the entry was moved in by `take` and is dropped once, here.
            unsafe { Entry::drop_in_place(raw.words.as_mut_ptr().cast()) };
            raw.words.clear();
            self.free.push(slot);
        }
    }
}

impl Drop for Lines {
    /// Frees what the kept entries own (texts, values) when the trace ends with lines kept.
    fn drop(&mut self) {
        for raw in &mut self.slots {
            if raw.owners > 0 {
                // SAFETY: as in `release`: owned and not dropped yet.
                unsafe { Entry::drop_in_place(raw.words.as_mut_ptr().cast()) };
                raw.owners = 0;
            }
        }
    }
}

/// A record not in the file that may still be needed.
struct Node {
    id: u64,
    parent: Option<u64>,
    /// Its record line (in `Lines`).
    line: u32,
    /// Annotations queued while the record was not in the file (written after it).
    notes: Vec<u32>,
    /// Its end, held: a line from another thread that needs the record may still arrive after
    /// its end (CAP-ANC-2).
    end: u32,
    /// Its own line is in the recorder's buffer.
    buffered: bool,
    /// Selected (not only held): its end is a recorded line of its own.
    selected: bool,
    open: bool,
    /// Ended, and no line referring to it can still be in a ring.
    safe: bool,
    /// Nodes whose parent is this one.
    children: u32,
    /// Recorded lines referring to it.
    refs: u32,
}

impl Node {
    /// Still needed in the table: open, possibly referred to by a line in a ring, or by a child,
    /// a recorded line or the recorder itself.
    fn needed(&self) -> bool {
        self.open || !self.safe || self.children > 0 || self.refs > 0 || self.buffered
    }
}

/// The held records: nodes in a flat vector (slots reused), found by record id.
#[derive(Default)]
struct Table {
    nodes: Vec<Node>,
    free: Vec<u32>,
    ids: Ids,
}

impl Table {
    fn slot(&self, id: u64) -> Option<usize> {
        self.ids.get(&id).map(|&s| s as usize)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Node> {
        let s = self.slot(id)?;
        Some(&mut self.nodes[s])
    }

    /// Adds `node` (whose `notes` is empty): a reused slot keeps its notes vector's capacity.
    fn insert(&mut self, mut node: Node) {
        let id = node.id;
        let s = match self.free.pop() {
            Some(s) => {
                let slot = &mut self.nodes[s as usize];
                node.notes = std::mem::take(&mut slot.notes);
                *slot = node;
                s
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.ids.insert(id, s);
    }

    /// Takes the node out of the table and returns its slot, whose lines the caller writes or
    /// releases, draining its notes.
    fn remove(&mut self, id: u64) -> Option<usize> {
        let s = self.ids.remove(&id)?;
        self.free.push(s);
        Some(s as usize)
    }
}

struct Item {
    id: u64,
    clk: u64,
    /// A record's line (in `Lines`, shared with its node); `NONE`: the line is the next one in
    /// the recorder's `Fifo`.
    line: u32,
    words: u32,
    /// The table slot of the record `id` (`NONE`: not in the table when the line came). The
    /// item keeps the node in its slot (as `buffered` or one of its `refs`), so the slot stays
    /// that record's until the item leaves, and forgetting it needs no lookup by id.
    node: u32,
    kind: u8,
}

/// The flight recorder: kept lines in arrival order, with the memory they take.
struct Ring {
    limit: Recorder,
    items: VecDeque<Item>,
    /// The recorded lines that are not records, back to back in arrival order.
    fifo: Fifo,
    bytes: u64,
    max_clk: u64,
}

/// Words per chunk of the recorder's queue: 512 KiB, far above the largest entry.
const CHUNK: usize = 1 << 16;

/// Raw entries queued back to back in chunks of reused memory, taken from the front in the order
/// they came: lines that only the recorder keeps (events, ends, annotations) are written and read
/// sequentially, so keeping one costs a copy into memory the prefetcher already brings in.
#[derive(Default)]
struct Fifo {
    chunks: VecDeque<Vec<MaybeUninit<u64>>>,
    /// Words of the front chunk already taken.
    head: usize,
    spare: Vec<Vec<MaybeUninit<u64>>>,
}

impl Fifo {
    /// Moves the entry at `at`, of `n` words, to the back.
    ///
    /// # Safety
    /// As for [`Lines::take`].
    unsafe fn push(&mut self, at: *mut u64, n: usize) {
        if self.chunks.back().is_none_or(|c| c.len() + n > CHUNK) {
            let chunk = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK));
            self.chunks.push_back(chunk);
        }
        let Some(chunk) = self.chunks.back_mut() else { return };
        let len = chunk.len();
        // SAFETY: the chunk has capacity CHUNK >= len + n (checked above; never reallocated, so
        // entries already in it stay in place); `at` holds `n` words (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                at.cast::<MaybeUninit<u64>>(),
                chunk.as_mut_ptr().add(len),
                n,
            );
            chunk.set_len(len + n);
        }
    }

    /// The entry at the front (there is one: each `Item` with `NONE` has its entry here).
    fn front(&mut self) -> Option<Entry<'_>> {
        let head = self.head;
        let chunk = self.chunks.front_mut()?;
        if head >= chunk.len() {
            return None;
        }
        // SAFETY: an entry moved in whole by `push`, not dropped yet; it stays in place while
        // borrowed.
        Some(unsafe { Entry::read(chunk.as_mut_ptr().add(head).cast()) })
    }

    /// Drops the front entry, of `n` words, and moves past it.
    fn pop(&mut self, n: usize) {
        let head = self.head;
        let Some(chunk) = self.chunks.front_mut() else { return };
        if head + n > chunk.len() {
            return;
        }
        // SAFETY: the front entry (as in `front`), dropped once, here.
        unsafe { Entry::drop_in_place(chunk.as_mut_ptr().add(head).cast()) };
        self.head += n;
        if self.head < chunk.len() {
            return;
        }
        self.head = 0;
        if self.chunks.len() == 1 {
            // The only chunk, all taken: start it over.
            if let Some(chunk) = self.chunks.front_mut() {
                chunk.clear();
            }
        } else if let Some(mut done) = self.chunks.pop_front() {
            done.clear();
            self.spare.push(done);
        }
    }
}

impl Drop for Fifo {
    /// Frees what the entries still queued own.
    fn drop(&mut self) {
        while let Some(n) = self.front().map(|e| e.words) {
            self.pop(n);
        }
    }
}

pub(crate) struct Keeper {
    lines: Lines,
    table: Table,
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

fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Record => RECORD,
        Kind::End => END,
        Kind::Event => EVENT,
        Kind::Annotation => ANNOTATION,
    }
}

impl Keeper {
    /// A keeper when `c` needs one (anything held back); `None` writes lines straight through.
    pub(crate) fn new(c: &Capture) -> Option<Keeper> {
        if c.is_full() {
            return None;
        }
        Some(Keeper {
            lines: Lines::default(),
            table: Table::default(),
            ring: c.recorder.map(|limit| Ring {
                limit,
                items: VecDeque::new(),
                fifo: Fifo::default(),
                bytes: 0,
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

    /// Takes the popped entry at `at`: writes it to `out` now, or keeps it. Returns true when it
    /// kept it: the entry then belongs to the keeper and the caller must not drop it (it only
    /// pops its words). A trigger (CAP-REC-3) writes the recorder at once, with the trigger line.
    ///
    /// # Safety
    /// `at` is a published, not yet dropped entry, and `m` is `Entry::read(at)`.
    pub(crate) unsafe fn line(&mut self, at: *mut u64, m: &Entry<'_>, out: &mut dyn Out) -> bool {
        let kind = kind_index(m.kind);
        self.seen[kind] += 1;
        let recording = self.ring.is_some();
        let take = |lines: &mut Lines, owners| {
            // SAFETY: `at` is a published entry of `m.words` words, not dropped (the caller's
            // contract); once taken, this returns true and the caller leaves it.
            unsafe { lines.take(at, m.words, owners) }
        };
        match kind {
            RECORD => {
                if !m.hold && !recording {
                    // Selected and written now: a held parent chain goes first.
                    self.materialize(m.parent, out);
                    out.put(m);
                    return false;
                }
                if let Some(p) = m.parent.and_then(|p| self.table.get_mut(p)) {
                    p.children += 1;
                }
                let buffered = recording && !m.hold;
                let line = take(&mut self.lines, 1 + buffered as u8);
                self.table.insert(Node {
                    id: m.id,
                    parent: m.parent,
                    line,
                    notes: Vec::new(),
                    end: NONE,
                    buffered,
                    selected: !m.hold,
                    open: true,
                    safe: false,
                    children: 0,
                    refs: 0,
                });
                if buffered {
                    self.record_item(RECORD, m.id, m.clk, line, m.words);
                }
            }
            ANNOTATION => match self.table.get_mut(m.id) {
                Some(n) if !n.buffered => {
                    let line = take(&mut self.lines, 1);
                    if let Some(n) = self.table.get_mut(m.id) {
                        n.notes.push(line);
                    }
                }
                _ if recording => {
                    let clk = self.ring.as_ref().map_or(0, |r| r.max_clk);
                    // SAFETY: the caller's contract; kept, so the caller leaves it.
                    unsafe { self.record_entry(ANNOTATION, m.id, clk, at, m.words) };
                }
                _ => {
                    out.put(m);
                    return false;
                }
            },
            END => {
                if let Some(n) = self.table.get_mut(m.id) {
                    n.open = false;
                    let selected = n.selected;
                    self.ended.push(m.id);
                    if recording && selected {
                        // SAFETY: the caller's contract; kept, so the caller leaves it.
                        unsafe { self.record_entry(END, m.id, m.clk, at, m.words) };
                    } else {
                        let line = take(&mut self.lines, 1);
                        if let Some(n) = self.table.get_mut(m.id) {
                            n.end = line;
                        }
                    }
                } else if recording {
                    // SAFETY: the caller's contract; kept, so the caller leaves it.
                    unsafe { self.record_entry(END, m.id, m.clk, at, m.words) };
                } else {
                    out.put(m);
                    return false;
                }
            }
            _ => {
                if !recording {
                    self.materialize(Some(m.id), out);
                    out.put(m);
                    return false;
                }
                let trigger = self.triggers.iter().any(|t| match t {
                    Trigger::Event(name) => name.as_str() == &**m.name,
                    Trigger::Error => m.data.fields().any(|(k, v)| {
                        k == "severity" && matches!(v, Value::Str(s) if &**s == "error")
                    }),
                });
                // SAFETY: the caller's contract; kept, so the caller leaves it.
                unsafe { self.record_entry(EVENT, m.id, m.clk, at, m.words) };
                if trigger {
                    // CAP-REC-3: a trigger writes the recorder now, with the trigger line in it.
                    self.dump(out);
                }
            }
        }
        true
    }

    /// Moves a line that is not a record into the recorder's queue, and records it.
    ///
    /// # Safety
    /// As for [`Lines::take`]; only with a recorder.
    unsafe fn record_entry(&mut self, kind: usize, id: u64, clk: u64, at: *mut u64, n: usize) {
        let Some(ring) = self.ring.as_mut() else { return };
        // SAFETY: the caller's contract.
        unsafe { ring.fifo.push(at, n) };
        self.record_item(kind, id, clk, NONE, n);
    }

    /// Appends a kept line to the recorder and forgets what falls out of it.
    fn record_item(&mut self, kind: usize, id: u64, clk: u64, line: u32, words: usize) {
        let node = self.table.slot(id);
        if kind != RECORD {
            if let Some(s) = node {
                self.table.nodes[s].refs += 1;
            }
        }
        let node = node.map_or(NONE, |s| s as u32);
        let Some(ring) = self.ring.as_mut() else { return };
        ring.max_clk = ring.max_clk.max(clk);
        ring.bytes += words as u64 * 8;
        ring.items.push_back(Item { id, clk, line, words: words as u32, node, kind: kind as u8 });
        // Drop what fell out of the window, always keeping the newest line.
        while let Some(ring) = self.ring.as_mut() {
            let Some(front) = ring.items.front() else { break };
            let old = match ring.limit {
                Recorder::Cycles(n) => front.clk.saturating_add(n) <= ring.max_clk,
                // The memory the recorder keeps: its lines as queued (not as encoded).
                Recorder::Bytes(n) => ring.bytes > n,
            };
            if !old || ring.items.len() == 1 {
                break;
            }
            let Some(item) = ring.items.pop_front() else { break };
            ring.bytes -= item.words as u64 * 8;
            self.forget_item(&item);
        }
    }

    /// A recorded line left the recorder without being written.
    fn forget_item(&mut self, item: &Item) {
        if item.line == NONE {
            if let Some(ring) = self.ring.as_mut() {
                ring.fifo.pop(item.words as usize);
            }
        } else {
            self.lines.release(item.line);
        }
        if item.node != NONE {
            let n = &mut self.table.nodes[item.node as usize];
            debug_assert_eq!(n.id, item.id, "an item's node stays in its slot");
            if usize::from(item.kind) == RECORD {
                n.buffered = false;
            } else {
                n.refs = n.refs.saturating_sub(1);
            }
            if !n.needed() {
                self.try_remove(item.id);
            }
        }
    }

    /// Writes the held chain ending at `id` (ancestors first) and takes it out of the table.
    fn materialize(&mut self, id: Option<u64>, out: &mut dyn Out) {
        let mut chain = std::mem::take(&mut self.scratch);
        chain.clear();
        let mut cur = id;
        while let Some(s) = cur.and_then(|i| self.table.slot(i)) {
            let n = &self.table.nodes[s];
            chain.push(n.id);
            cur = n.parent;
        }
        for &id in chain.iter().rev() {
            // Every id of the chain was just found in the table.
            let Some(s) = self.table.remove(id) else { continue };
            let n = &mut self.table.nodes[s];
            out.put(&self.lines.get(n.line));
            self.lines.release(n.line);
            // Annotations carry no clk; they follow their record, then its held end.
            for note in n.notes.drain(..) {
                out.put(&self.lines.get(note));
                self.lines.release(note);
            }
            if n.end != NONE {
                out.put(&self.lines.get(n.end));
                self.lines.release(n.end);
            }
        }
        self.scratch = chain;
    }

    fn try_remove(&mut self, mut id: u64) {
        loop {
            let Some(s) = self.table.slot(id) else { return };
            let n = &self.table.nodes[s];
            if n.needed() {
                return;
            }
            let parent = n.parent;
            // Never written: its lines are dropped unwritten.
            let Some(s) = self.table.remove(id) else { return };
            let n = &mut self.table.nodes[s];
            self.lines.release(n.line);
            for note in n.notes.drain(..) {
                self.lines.release(note);
            }
            if n.end != NONE {
                self.lines.release(n.end);
            }
            let Some(p) = parent else { return };
            let Some(pn) = self.table.get_mut(p) else { return };
            pn.children = pn.children.saturating_sub(1);
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
                if let Some(n) = self.table.get_mut(id) {
                    n.safe = true;
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
        let mut items = std::mem::take(&mut ring.items);
        ring.bytes = 0;
        for item in items.drain(..) {
            if usize::from(item.kind) == RECORD {
                if let Some(n) = self.table.get_mut(item.id) {
                    n.buffered = false;
                    let parent = n.parent;
                    self.materialize(parent, out);
                    self.materialize(Some(item.id), out);
                }
                // Written just now with its node, or earlier as an ancestor.
                self.lines.release(item.line);
                continue;
            }
            if let Some(n) = self.table.get_mut(item.id) {
                n.refs = n.refs.saturating_sub(1);
            }
            self.materialize(Some(item.id), out);
            if let Some(ring) = self.ring.as_mut() {
                if let Some(line) = ring.fifo.front() {
                    out.put(&line);
                }
                ring.fifo.pop(item.words as usize);
            }
        }
        if let Some(ring) = self.ring.as_mut() {
            // Keep the allocation for the next lines.
            ring.items = items;
        }
    }
}
