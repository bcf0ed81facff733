//! A single-producer single-consumer ring of variable-size entries, counted in 64-bit words.
//!
//! A line takes only the words it needs (an event with two numeric fields: 16 words), so the
//! producer writes two or three cache lines per line instead of the whole largest-line slot a
//! ring of fixed slots would copy. Entries are contiguous: the buffer has `len` words plus room
//! for one largest entry after them, and an entry that starts near the end runs on into that
//! room (its words past `len` stand for the same ring positions at the start of the buffer,
//! which stay unused on that lap). So an entry is placed with one mask, without wrap markers, and
//! the free space is counted in ring positions alone. The producer publishes with one release
//! store of `tail`, the consumer frees with one of `head`; each side caches the other's index
//! and reads it again only when the cache says "full" or "empty".
//!
//! The ring moves bytes only; what an entry holds, and who drops it, is `line.rs`'s business.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

struct Buffer {
    /// The words, from `Box::into_raw` (freed in `Drop`): one pointer with provenance over all of
    /// them, since entries span several words and hold values of other types.
    words: *mut MaybeUninit<u64>,
    /// Ring positions; the allocation has `max_entry` more words.
    len: usize,
    max_entry: usize,
    mask: usize,
    /// Words consumed so far (monotonic). Written by the consumer.
    head: CachePadded<AtomicUsize>,
    /// Words published so far (monotonic). Written by the producer.
    tail: CachePadded<AtomicUsize>,
    producer_gone: AtomicBool,
}

// SAFETY: the words are shared under the head/tail protocol: the producer writes only the words
// of positions in [tail, head + len), the consumer reads only those of positions in [head, tail)
// (an entry's words past `len` stand for its positions at the start, unused on that lap), and
// each side publishes its index with release and reads the other's with acquire.
unsafe impl Sync for Buffer {}
// SAFETY: as above; the words hold values of `Send` types only (`line.rs`).
unsafe impl Send for Buffer {}

/// A new ring of at least `words` words (rounded up to a power of two), for entries of at most
/// `max_entry` words (at most half the ring): its producer end, the producer's cursor, and its
/// consumer end.
pub(crate) fn ring(words: usize, max_entry: usize) -> (Producer, Cursor, Consumer) {
    // A power of two, since positions are masked (and `Consumer::uncache` walks whole
    // 8-word cache lines): room for two entries is asked before rounding, not after.
    let len = words.max(2 * max_entry).next_power_of_two().max(64);
    let words: Box<[MaybeUninit<u64>]> = Box::new_uninit_slice(len + max_entry);
    let buf = Arc::new(Buffer {
        words: Box::into_raw(words).cast(),
        len,
        max_entry,
        mask: len - 1,
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        producer_gone: AtomicBool::new(false),
    });
    let cursor = Cursor {
        words: buf.words.cast(),
        mask: buf.mask,
        len,
        max_entry,
        buf: Arc::as_ptr(&buf),
        tail: 0,
        limit: len,
        ahead: if prefetch_w() { AHEAD.min(len / 4) } else { 0 },
    };
    let consumer = Consumer { buf, head: 0, tail: 0, freed: 0, flush: flush(), asked: 0 };
    (Producer { buf: Arc::clone(&consumer.buf) }, cursor, consumer)
}

impl Buffer {
    #[inline(always)]
    fn at(&self, index: usize) -> *mut u64 {
        // SAFETY: masked, so within the allocation (with `max_entry` words after it).
        unsafe { self.words.add(index & self.mask).cast() }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `words` came from `Box::into_raw` of a slice of `len + max_entry` words, freed
        // only here.
        // Entries left in it are leaked, not dropped: the buffer does not know their layout
        // (the writer drains every ring before it lets go of it).
        let all = std::ptr::slice_from_raw_parts_mut(self.words, self.len + self.max_entry);
        // SAFETY: as above.
        drop(unsafe { Box::from_raw(all) });
    }
}

/// The producer end: it keeps the buffer alive, and dropping it tells the consumer that no more
/// entries come. Entries are written through the ring's [`Cursor`].
pub(crate) struct Producer {
    buf: Arc<Buffer>,
}

impl Producer {
    /// True when the consumer end was dropped (the writer is gone).
    pub(crate) fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.buf) == 1
    }
}

/// Where the producer writes: its position, and a copy of what it needs of the buffer (where
/// the words are, their number and mask), kept by value in the pushing thread's own storage. A
/// push then finds the place for its entry one load away, instead of through the `Producer`'s
/// pointer to the buffer; a chain of dependent loads is what a push waits on.
///
/// It does not keep the buffer alive: every use is `unsafe`, allowed only while the ring's
/// [`Producer`] is.
pub(crate) struct Cursor {
    words: *mut u64,
    mask: usize,
    len: usize,
    max_entry: usize,
    buf: *const Buffer,
    /// Words written so far (published: `buf.tail`).
    tail: usize,
    /// The last `head` read from the consumer plus `len`: the positions before it are free
    /// (kept as this sum so that a push compares one value: `tail + n <= limit`).
    limit: usize,
    /// How far past the tail, in words, [`Cursor::commit`] asks for the cache line the producer
    /// will write there (`prefetchw`); 0: not at all (a CPU without the instruction, Miri, other
    /// targets). [`AHEAD`], or a quarter of a smaller ring. Read only where the hint is issued.
    #[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
    ahead: usize,
}

/// How far ahead of its tail the producer asks for the line it will write, in words: 2 KiB, 32
/// cache lines, so from a few to a few dozen pushes ahead (an entry is 5 words or more).
///
/// Why: a ring line the producer comes back to, a lap later, was last read by the writer's core,
/// so the producer's first store to it waits for that core to give it up, and the stores queued
/// behind it wait too (they leave the core in order). `prefetchw` asks for the line, for writing,
/// several pushes before the first store, so that the wait overlaps the pushes in between.
/// On the Intel Xeon VM, idle, criterion `producer` with the builds alternated (medians): in
/// eight rounds of this build against the one before (2026-11-29 03:08–03:12 UTC), a two-field
/// event 41.9 -> 38.9 ns on one thread and 44.5 -> 39.7 ns per thread on two, `emit_event_at`
/// 23.5 -> 21.0 ns, each faster in six rounds of eight; in earlier sets (02:48–03:02) with the
/// distance a constant, 37.2 -> 33.2, 42.0 -> 33.8 and 20.6 -> 18.1 ns in four rounds. One set
/// of four (03:06–03:08) showed nothing, with the host slower: 41–43 ns in both builds. On Tiny5
/// (`pipeline_modes`, pinned, alternated) the host's own spread (±20 % between runs of one build)
/// hides it: `count` 2.74 -> 2.44 s (five pairs of eight faster) and the flight recorder
/// 3.23 -> 2.60 s (seven of eight) in one set, the recorder 2.66 -> 2.68 s in the next six
/// pairs, and in ten pairs each at 04:27–04:30 the recorder 4.12 -> 4.03 s and `count` 2.45 ->
/// 2.43 s, faster in four and five pairs: on Tiny5 no gain stands out of the spread.
/// 128 and 512 words ahead did no better; 1024 (8 KiB) did worse, and so did asking for a
/// second line per push. Not measured on AMD's CPUs, where the writer also flushes the lines it
/// has read ([`flush`]) and the producer's first store then goes to memory, which the prefetch
/// overlaps too.
const AHEAD: usize = 256;

/// How far ahead of its head, in words, the consumer asks for the cache lines of entries the
/// producer has published (`prefetcht0`), never past the published tail: 2 KiB, as [`AHEAD`].
///
/// Why: every line the writer reads was last written by the simulator's core, so each first read
/// of a cache line waits for that core to hand it over (a round trip between the cores, 120-290 ns
/// on the project's VM), and the writer reads lines one after another. Asked for ahead, the
/// hand-overs overlap. Tiny5's flight recorder, the writer the busier thread (`pipeline_modes
/// recorder 1300`, simulator pinned to CPU 0, six alternated pairs, Intel Xeon VM, idle,
/// 2026-11-30 00:56 UTC): 1.678 -> 1.572 s (median), faster in six pairs of six, its waits for
/// room 0.078 -> 0.040 s; `count` 1.55 -> 1.50 s (four of four). 128 and 1024 words ahead did
/// alike (five rounds each). On the 6502 emulator's recorder (`mos6502-trace`, four alternated
/// pairs, 02:20 UTC) 64 words did worse (4.98-5.11 s against 4.52-4.81 s) and 512 alike.
#[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
const READ_AHEAD: usize = 256;

// SAFETY: the pointers are into a buffer that is `Send + Sync`; the cursor is used by one
// thread at a time (its owner's `&mut`), under the contract of its methods.
unsafe impl Send for Cursor {}

impl Cursor {
    /// The largest entry the ring can take, in words.
    #[cfg(test)]
    pub(crate) fn max_entry(&self) -> usize {
        self.max_entry
    }

    /// Room for an entry of `n` words (1 <= n <= [`Cursor::max_entry`]), contiguous; `None` when
    /// the ring is full. Write the entry (at most `n` words), then [`Cursor::commit`] it.
    ///
    /// # Safety
    /// The ring's [`Producer`] is alive, and this is the ring's only cursor.
    #[inline(always)]
    pub(crate) unsafe fn reserve(&mut self, n: usize) -> Option<*mut u64> {
        debug_assert!(n >= 1 && n <= self.max_entry);
        if self.tail + n > self.limit {
            // SAFETY: the buffer is alive, per the contract.
            self.limit = unsafe { (*self.buf).head.load(Ordering::Acquire) } + self.len;
            if self.tail + n > self.limit {
                return None;
            }
        }
        // SAFETY: masked, so within the allocation (with `max_entry` words after it).
        Some(unsafe { self.words.add(self.tail & self.mask) })
    }

    /// Publishes the entry of `n` words just written at the place [`Cursor::reserve`] gave (`n`
    /// at most what was reserved).
    ///
    /// # Safety
    /// As for [`Cursor::reserve`].
    #[inline(always)]
    pub(crate) unsafe fn commit(&mut self, n: usize) {
        self.tail += n;
        // SAFETY: the buffer is alive, per the contract.
        unsafe { (*self.buf).tail.store(self.tail, Ordering::Release) };
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if self.ahead != 0 {
            // Masked, so inside the buffer; never read or written through.
            let line = self.words.wrapping_add((self.tail + self.ahead) & self.mask);
            // SAFETY: `prefetchw` only asks for the line (a hint: nothing changes that a program
            // can see, whoever owns or writes the line meanwhile), on a CPU that has it
            // (`ahead` is 0 otherwise), at an address inside the ring's buffer, which is alive.
            unsafe {
                std::arch::asm!("prefetchw [{p}]", p = in(reg) line, options(nostack, preserves_flags, readonly))
            };
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.buf.producer_gone.store(true, Ordering::Release);
    }
}

/// The consumer end.
pub(crate) struct Consumer {
    buf: Arc<Buffer>,
    /// Words read so far (freed up to `freed`; published: `buf.head`).
    head: usize,
    /// Last `tail` read from the producer.
    tail: usize,
    freed: usize,
    /// Whether and how [`Consumer::uncache`] flushes ([`flush`]): x86_64 only, not under Miri.
    #[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
    flush: Flush,
    /// Words up to which [`Consumer::peek`] has asked for the cache lines ahead.
    #[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
    asked: usize,
}

/// Whether and how the consumer takes the lines it has read out of the caches
/// ([`Consumer::uncache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flush {
    /// Not at all.
    Never,
    /// With `clflush`, each waiting for the one before.
    Each,
    /// With `clflushopt`, overlapping ([`flush_opt`]).
    Overlapped,
}

/// Whether the lines are flushed, decided once per process from the CPU's vendor: on AMD,
/// where the flushes kept a simulator from stalling when its core and the writer's were far
/// apart; not on Intel, where they only slowed every mode down; nowhere else (the
/// measurements are at [`Consumer::uncache`]). Never under Miri or off x86-64.
fn flush() -> Flush {
    match (amd(), flush_opt()) {
        (false, _) => Flush::Never,
        (true, false) => Flush::Each,
        (true, true) => Flush::Overlapped,
    }
}

/// Whether the CPU is AMD's (CPUID leaf 0's vendor, "AuthenticAMD"). Asked once per process.
fn amd() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        static AMD: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        asked_once(&AMD, || {
            // SAFETY: CPUID has no preconditions on x86-64 (an `unsafe fn` in older Rust).
            #[allow(unused_unsafe)]
            let id = unsafe { std::arch::x86_64::__cpuid(0) };
            // The vendor's twelve letters are in EBX, EDX, ECX, in that order.
            let mut vendor = [0u8; 12];
            for (part, word) in vendor.chunks_mut(4).zip([id.ebx, id.edx, id.ecx]) {
                part.copy_from_slice(&word.to_le_bytes());
            }
            &vendor == b"AuthenticAMD"
        })
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    false
}

/// A question about the CPU, asked once per process: `cell` keeps the answer (0: not asked yet,
/// 1: no, 2: yes). Not a `OnceLock`, which is a lock: a child forked while another thread
/// asks would inherit it held and wait forever at its first ring (CA-FORK-1). Two threads that
/// ask at once both ask the CPU and get the same answer.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn asked_once(cell: &std::sync::atomic::AtomicU8, ask: impl FnOnce() -> bool) -> bool {
    match cell.load(Ordering::Relaxed) {
        0 => {
            let yes = ask();
            cell.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        answer => answer == 2,
    }
}

/// Whether CPUID leaf `leaf` (subleaf 0) sets bit `bit` of the register `reg` picks from it.
/// CPUID exists on every x86-64, but a leaf above the CPU's maximum for its range (the basic
/// leaves, or the extended ones from 0x8000_0000) is answered with zeros or with the highest
/// leaf's values, so that maximum is asked first.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn cpuid_bit(leaf: u32, reg: fn(std::arch::x86_64::CpuidResult) -> u32, bit: u32) -> bool {
    // SAFETY: CPUID has no preconditions on x86-64 (an `unsafe fn` in older Rust, such as the
    // MSRV, 1.85).
    #[allow(unused_unsafe)]
    unsafe {
        let max = std::arch::x86_64::__cpuid(leaf & 0x8000_0000).eax;
        max >= leaf && reg(std::arch::x86_64::__cpuid_count(leaf, 0)) & (1 << bit) != 0
    }
}

/// Whether the CPU has `prefetchw` (CPUID leaf 0x8000_0001, ECX bit 8, which Linux calls
/// `3dnowprefetch`). Asked once per process.
fn prefetch_w() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        asked_once(&HAS, || cpuid_bit(0x8000_0001, |r| r.ecx, 8))
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    false
}

/// Whether the CPU has `clflushopt` (CPUID leaf 7, EBX bit 23): a flush that is ordered only
/// against fences and the line's own accesses, so that a run of them overlaps, where each
/// `clflush` waits for the previous one. Asked once per process.
fn flush_opt() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        asked_once(&HAS, || cpuid_bit(7, |r| r.ebx, 23))
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    false
}

impl Consumer {
    /// The next entry's first word, or `None` when nothing is published. Stays valid until
    /// [`Consumer::pop`]. Asks for the cache lines of what follows, up to [`READ_AHEAD`] words.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<*mut u64> {
        if self.head == self.tail {
            self.load_published();
        }
        self.peek_loaded()
    }

    /// Looks at what is published now: [`Consumer::peek_loaded`] gives entries up to there.
    #[inline]
    pub(crate) fn load_published(&mut self) {
        self.tail = self.buf.tail.load(Ordering::Acquire);
    }

    /// [`Consumer::peek`] of what was published when it was last looked at: `None` past it, even
    /// if more is published since.
    #[inline]
    pub(crate) fn peek_loaded(&mut self) -> Option<*mut u64> {
        if self.head == self.tail {
            return None;
        }
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            // Whole cache lines of positions (8 words), each asked for once.
            let until = self.tail.min(self.head + READ_AHEAD) & !7;
            let mut at = self.asked.max(self.head & !7);
            while at < until {
                // SAFETY: `prefetcht0` reads nothing architecturally and cannot fault; the
                // address is masked into the buffer anyway.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        self.buf.at(at).cast(),
                    )
                };
                at += 8;
            }
            self.asked = self.asked.max(at);
        }
        Some(self.buf.at(self.head))
    }

    /// Moves past the entry [`Consumer::peek`] gave, of `n` words. Its words become free for the
    /// producer at the next [`Consumer::release`].
    #[inline]
    pub(crate) fn pop(&mut self, n: usize) {
        self.head += n;
    }

    /// Hands the words of popped entries back to the producer.
    #[inline]
    pub(crate) fn release(&mut self) {
        self.release_to(self.head);
    }

    /// Hands back the words of popped entries up to word position `pos` (at most
    /// [`Consumer::position`]): for entries still read elsewhere after their pop (an encoder
    /// thread), released once it is done with them.
    #[inline]
    pub(crate) fn release_to(&mut self, pos: usize) {
        debug_assert!(pos <= self.head);
        if pos > self.freed {
            self.uncache(self.freed, pos);
            self.freed = pos;
            self.buf.head.store(pos, Ordering::Release);
        }
    }

    /// Takes the memory of words `from..to`, read and handed back, out of every core's caches
    /// (`clflush`, one per cache line), so that the producer's next writes there, a lap later,
    /// find no copy to take back from the consumer's core. Where the two cores are far apart
    /// (another core complex or socket; on this project's VM the host moves its two cores
    /// about, and a round trip between them takes 65 or 330 ns from minute to minute), taking
    /// those copies back one line at a time stalled the simulator's stores: with it, a run that
    /// makes and hands over every line (`count`) took 2.4–2.6 s rather than 7.2–8.8 s, and a
    /// flight recorder 3.5–3.6 s rather than 7.5–8.3 s, on a par with cores close together
    /// (2.2 and 3.0–3.1 s), where the flushes cost the recorder, whose writer is the busier
    /// thread, 8 % (3.3 s). That was an AMD EPYC VM. On an Intel Xeon VM (2026-11-28, cores
    /// 150–210 ns apart, alternated pairs of Tiny5 runs, the simulator pinned) the flushes
    /// slowed every mode instead: the recorder 4.45 s against 3.97 s without (medians of nine
    /// pairs, six faster without, three alike; its waits for room 0.47 against 0.23 s),
    /// `count` 4.08 against 3.71 s (four of five pairs), the full trace 6.39 against 5.96 s
    /// (four of four). So they are made on AMD's CPUs only ([`flush`]). Nothing on other
    /// targets, nor under Miri.
    ///
    /// The lines are those of positions `from`, `from + 8`, … below `to`, each masked, walked
    /// as at most two runs of addresses ([`flush_runs`]) rather than masking each position:
    /// 4 instructions a line flushed instead of 8, and about 1.7 lines are flushed per line
    /// taken (callgrind, Tiny5, writer thread, 2026-11-28: recorder 260.9 -> 253.9
    /// instructions a line, count 81.4 -> 74.6, a full trace's sequencing 63.7 -> 56.8).
    ///
    /// With `clflushopt` where the CPU has it ([`flush_opt`]): the flushes of a run overlap
    /// rather than wait for each other. The loop was a tenth of the flight recorder's writer
    /// thread (perf), whose speed sets the recorder's: Tiny5's `recorder`, ten alternated pairs
    /// (2026-11-28), median 1.56 s against 1.63 s.
    #[inline]
    fn uncache(&self, from: usize, to: usize) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if self.flush != Flush::Never {
            // A pointer walk: the buffer's address is read once (the `asm!` may write memory,
            // so an address made from `self.buf` in the loop was read again for every line).
            let words = self.buf.words;
            for run in flush_runs(from, to, self.buf.mask) {
                // Only compared and flushed, never read through: `wrapping_add`.
                let (mut p, end) = (words.wrapping_add(run.start), words.wrapping_add(run.end));
                // Why both loops are sound: `clflush` and `clflushopt` only write a line back
                // and invalidate it, which loses nothing whoever writes the line meanwhile (the
                // flush is coherent: the producer's later store reloads the line); the address
                // is inside the ring's buffer (`flush_runs` stays below its length), which is
                // alive while `self` is; `clflushopt` only when the CPU has it.
                // One loop per instruction, the choice made once per run, not per line.
                macro_rules! flush_each {
                    ($insn:literal) => {
                        while p < end {
                            // SAFETY: see above.
                            unsafe {
                                std::arch::asm!(concat!($insn, " [{p}]"), p = in(reg) p, options(nostack, preserves_flags))
                            };
                            p = p.wrapping_add(64 / 8);
                        }
                    };
                }
                if self.flush == Flush::Overlapped {
                    flush_each!("clflushopt");
                } else {
                    flush_each!("clflush");
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = (from, to);
    }

    /// Keeps the ring's memory alive while held: for entries read elsewhere after their pop,
    /// even if this end is dropped meanwhile (a writer thread unwinding).
    pub(crate) fn keep_alive(&self) -> Arc<dyn Send + Sync> {
        Arc::clone(&self.buf) as Arc<dyn Send + Sync>
    }

    /// Words consumed so far (compare with [`Consumer::published`]).
    pub(crate) fn position(&self) -> usize {
        self.head
    }

    /// Words published so far.
    pub(crate) fn published(&self) -> usize {
        self.buf.tail.load(Ordering::Acquire)
    }

    /// True when nothing is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.head == self.published()
    }

    /// True once the producer end is dropped; with [`Consumer::is_empty`], the ring is done.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.buf.producer_gone.load(Ordering::Acquire)
    }
}

/// The positions whose cache lines [`Consumer::uncache`] flushes, those of `(from..to)
/// .step_by(8)` masked with `mask`, as at most two runs of unmasked buffer positions to take
/// every 8th of: up to the ring's end, then on from its start. The ring's length (`mask + 1`)
/// is a power of two of at least 64 words ([`ring`]), so a multiple of the step: the masked
/// positions run up from `from & mask` to the end, then on from the first step past it, less
/// the length. `to - from` is at most the length.
#[inline(always)]
#[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
fn flush_runs(from: usize, to: usize, mask: usize) -> [std::ops::Range<usize>; 2] {
    let len = mask + 1;
    debug_assert!(len.is_power_of_two() && len >= 64 && to - from <= len);
    let first = from & mask;
    let end = first + (to - from).div_ceil(8) * 8;
    if end <= len {
        return [first..end, 0..0];
    }
    [first..len, first + (len - first).div_ceil(8) * 8 - len..end - len]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs `uncache` walks flush exactly the lines of the positions it used to mask one
    /// by one, in the same order.
    #[test]
    fn flush_runs_are_the_masked_positions() {
        // Under Miri (a thousand times slower), every 7th start and fewer sizes.
        let (step, sizes) = if cfg!(miri) { (7, 17) } else { (1, 5) };
        for mask in [63, 127] {
            for from in (0..3 * (mask + 1)).step_by(step) {
                for n in (0..=mask + 1).filter(|n| n % sizes == 0 || *n > mask - 9) {
                    let masked: Vec<usize> =
                        (from..from + n).step_by(8).map(|w| w & mask).collect();
                    let runs: Vec<usize> = flush_runs(from, from + n, mask)
                        .into_iter()
                        .flat_map(|r| r.step_by(8))
                        .collect();
                    assert_eq!(runs, masked, "from {from}, {n} words, mask {mask}");
                }
            }
        }
    }

    /// A question about the CPU is asked once, and its answer, yes or no, kept.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[test]
    fn a_cpu_question_is_asked_once_and_its_answer_kept() {
        for answer in [false, true] {
            let cell = std::sync::atomic::AtomicU8::new(0);
            let asked = std::cell::Cell::new(0);
            let ask = || {
                asked.set(asked.get() + 1);
                answer
            };
            assert_eq!(asked_once(&cell, ask), answer);
            assert_eq!(asked_once(&cell, ask), answer, "the kept answer");
            assert_eq!(asked.get(), 1, "asked once");
        }
    }

    /// `clflushopt` is used exactly where the CPU has it, as the kernel reads CPUID too (under
    /// Miri and on other targets, never).
    #[test]
    fn clflushopt_is_used_where_the_kernel_says_the_cpu_has_it() {
        #[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
        assert_eq!(flush_opt(), kernel_says_the_cpu_has("clflushopt"));
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        assert!(!flush_opt());
    }

    /// The lines are flushed exactly on AMD's CPUs, as the kernel names the vendor, with
    /// `clflushopt` where there is one (under Miri and on other targets, never).
    #[test]
    fn lines_are_flushed_on_amd_only() {
        #[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
        {
            let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
            let vendor = info.lines().find_map(|l| l.strip_prefix("vendor_id"));
            let vendor =
                vendor.expect("a vendor_id in /proc/cpuinfo").trim_start_matches([' ', '\t', ':']);
            let want = match (vendor.trim() == "AuthenticAMD", flush_opt()) {
                (false, _) => Flush::Never,
                (true, false) => Flush::Each,
                (true, true) => Flush::Overlapped,
            };
            assert_eq!(flush(), want, "vendor {vendor:?}");
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        assert_eq!(flush(), Flush::Never);
    }

    /// The producer asks for lines ahead of it exactly where the kernel says the CPU has
    /// `prefetchw`, [`AHEAD`] words ahead, or a quarter of a ring too small for that (under Miri
    /// and off x86-64, never).
    #[test]
    fn lines_are_asked_for_ahead_where_the_cpu_has_prefetchw() {
        let has = if !cfg!(all(target_arch = "x86_64", not(miri))) {
            false
        } else if cfg!(target_os = "linux") {
            kernel_says_the_cpu_has("3dnowprefetch")
        } else {
            // No kernel's word to check it against: only the distances are.
            prefetch_w()
        };
        for (words, want) in [(1 << 14, AHEAD), (64, 16)] {
            let (_p, cur, _c) = ring(words, 16);
            assert_eq!(cur.ahead, if has { want } else { 0 }, "a ring of {words} words");
        }
    }

    /// Whether `/proc/cpuinfo` lists `flag` for every CPU (Linux only).
    fn kernel_says_the_cpu_has(flag: &str) -> bool {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let flags: Vec<&str> = info.lines().filter(|l| l.starts_with("flags")).collect();
        assert!(!flags.is_empty(), "no flags in /proc/cpuinfo");
        flags.iter().all(|l| l.split_whitespace().any(|w| w == flag))
    }

    /// A ring asked for less room than two entries still has a power-of-two length.
    #[test]
    fn a_ring_is_a_power_of_two_long() {
        for (words, max_entry) in [(8, 40), (64, 16), (100, 70), (1000, 3)] {
            let (_p, _cur, c) = ring(words, max_entry);
            let len = c.buf.len;
            assert!(len.is_power_of_two() && len >= words.max(2 * max_entry), "{len}");
            assert_eq!(c.buf.mask, len - 1);
        }
    }

    /// Entries of random-ish sizes through a small ring, across two threads, in order.
    #[test]
    fn entries_cross_threads_in_order_and_wrap() {
        let (p, mut cur, mut c) = ring(64, 16);
        let count: u64 = if cfg!(miri) { 300 } else { 100_000 };
        let size = |i: u64| 1 + (i * 7 % 13) as usize;
        let producer = std::thread::spawn(move || {
            for i in 0..count {
                let n = size(i);
                let at = loop {
                    // SAFETY: `p` lives until the end of this thread; one cursor.
                    match unsafe { cur.reserve(n) } {
                        Some(at) => break at,
                        None => std::thread::yield_now(),
                    }
                };
                for k in 0..n {
                    // SAFETY: `reserve` gave n free words at `at`.
                    unsafe { at.add(k).write(((i + 1) << 8) | k as u64) };
                }
                // SAFETY: as above.
                unsafe { cur.commit(n) };
            }
            drop(p);
        });
        let mut i = 0;
        while i < count {
            let Some(at) = c.peek() else {
                std::thread::yield_now();
                continue;
            };
            let n = size(i);
            for k in 0..n {
                // SAFETY: a published entry of n words.
                assert_eq!(unsafe { at.add(k).read() }, ((i + 1) << 8) | k as u64);
            }
            c.pop(n);
            if i % 3 == 0 {
                c.release();
            }
            i += 1;
        }
        c.release();
        producer.join().expect("producer");
        assert!(c.is_empty() && c.is_abandoned());
    }

    #[test]
    fn full_ring_refuses_until_released() {
        let (p, mut cur, mut c) = ring(64, 16);
        // `p` is alive throughout, and `cur` is the ring's one cursor.
        let mut reserve = |n| unsafe_reserve(&mut cur, n);
        let mut pushed = 0;
        while let Some(at) = reserve(10) {
            // SAFETY: reserved.
            unsafe { at.write(1) };
            pushed += 1;
        }
        assert_eq!(pushed, 6, "64 words hold six entries of 10");
        assert!(c.peek().is_some());
        c.pop(10);
        assert!(reserve(10).is_none(), "not released yet");
        c.release();
        assert!(reserve(10).is_some(), "released");
        assert_eq!(cur.max_entry(), 16);
        drop(p);
    }

    /// Reserves and commits `n` words at once (the tests write them afterwards).
    fn unsafe_reserve(cur: &mut Cursor, n: usize) -> Option<*mut u64> {
        // SAFETY: the callers keep the ring's `Producer` alive and use one cursor.
        let at = unsafe { cur.reserve(n) }?;
        // SAFETY: as above.
        unsafe { cur.commit(n) };
        Some(at)
    }
}
