//! A queued line: built in place by the builders ([`Line`]), moved word by word into a ring entry
//! ([`Line::write_to`]), encoded by the writer where it lies ([`Entry::read`]), then dropped there
//! ([`Entry::drop_in_place`]).
//!
//! An entry holds only what its line uses: a header word, `clk`, the id and the name, then the
//! optional parts its flags name, then the inline fields. An event with two numeric fields is 16
//! words (128 bytes, two cache lines); the builder's `Line` is about 500 bytes, most of it room
//! for [`Data::INLINE`] fields that a line rarely fills. Values are moved bitwise (a `Str` or
//! `Value` may own heap memory): exactly one of the builder and the entry owns them at any time.

use std::mem::{size_of, ManuallyDrop, MaybeUninit};
use std::ptr;

use super::ring::Pos;
use crate::format::{Data, DataExtra, DataRef, Field, Str, Value};

/// Which line a [`Line`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Record,
    End,
    Event,
    Annotation,
    /// Not a line of the format: tells the capture keeper that a record whose end was queued
    /// held may be forgotten, since no record deferred under it is alive any more (CAP-DEFER-2).
    /// Never written.
    Release,
}

/// One line being built, in the builder's storage until it is pushed.
///
/// One shape for all four kinds: the fields a kind does not use stay empty (an empty `Str` and
/// `Data` cost a few stores, no allocation) and take no room in the ring.
pub(crate) struct Line {
    pub(crate) kind: Kind,
    pub(crate) clk: u64,
    /// A record's own id; for the other kinds, the record referred to.
    pub(crate) id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) name: Str,
    pub(crate) record_type: Str,
    pub(crate) description: Str,
    pub(crate) data: Data,
    /// The line this one must follow when that one is on another thread's ring.
    pub(crate) after: Option<Pos>,
    /// Capture control: a record queued only as a possible ancestor (CAP-ANC-1); on a
    /// `record_end`, a record that stays one after its end, until it is released (CAP-DEFER-2).
    pub(crate) hold: bool,
}

impl Line {
    #[inline(always)]
    pub(crate) fn new(kind: Kind, id: u64, name: Str, after: Option<Pos>) -> Line {
        Line {
            kind,
            clk: 0,
            id,
            parent: None,
            name,
            record_type: Str::EMPTY,
            description: Str::EMPTY,
            data: Data::new(),
            after,
            hold: false,
        }
    }

    /// Writes a new line at `dst`, part by part, as [`Line::new`] makes it, and returns it.
    ///
    /// Why not `dst.write(Line::new(..))`: that builds the ~500-byte line on the stack and copies
    /// all of it (a `memcpy` call, most of it the uninitialized room for fields) into `dst`; this
    /// writes only the dozen words a new line has.
    ///
    /// # Safety
    /// `dst` is valid for writing a `Line` and aligned; what it held is overwritten, not dropped.
    #[inline(always)]
    pub(crate) unsafe fn init<'a>(
        dst: *mut Line,
        kind: Kind,
        id: u64,
        name: Str,
        after: Option<Pos>,
    ) -> &'a mut Line {
        // SAFETY: per the contract, every field of `*dst` is written once before the reference
        // to it is made.
        unsafe {
            ptr::addr_of_mut!((*dst).kind).write(kind);
            ptr::addr_of_mut!((*dst).clk).write(0);
            ptr::addr_of_mut!((*dst).id).write(id);
            ptr::addr_of_mut!((*dst).parent).write(None);
            // Inlined where the builder is made (`record::Pending::new`).
            store_str(ptr::addr_of_mut!((*dst).name), name);
            ptr::addr_of_mut!((*dst).record_type).write(Str::EMPTY);
            ptr::addr_of_mut!((*dst).description).write(Str::EMPTY);
            Data::init(ptr::addr_of_mut!((*dst).data));
            ptr::addr_of_mut!((*dst).after).write(after);
            ptr::addr_of_mut!((*dst).hold).write(false);
            &mut *dst
        }
    }

    /// The entry's size in words, as [`Line::write_to`] writes it on ring `ring`: for a push
    /// that cannot reserve [`MAX_WORDS`] and needs to know whether the line itself fits.
    pub(crate) fn words(&self, ring: u32) -> usize {
        let data = self.data.as_ref();
        let mut words = FIXED + data.inline.len() * FIELD;
        words += 2 * usize::from(self.after.is_some_and(|a| a.ring != ring));
        words += usize::from(self.parent.is_some());
        words += STR * usize::from(!is_static_empty(&self.record_type));
        words += STR * usize::from(!is_static_empty(&self.description));
        words + usize::from(data.extra.is_some())
    }

    /// Moves the line into the entry at `at`, in ring `ring`, and returns its size in words
    /// (its [`Line::words`]); the line is consumed: its storage must not be used or dropped
    /// afterwards, and nothing in it is reset (its owned parts are owned by the entry now). A
    /// dependency on a line of the same ring is left out, since the ring's order keeps it. The
    /// parts are written first and the header last, with the flags and size found on the way,
    /// so the line is read once.
    ///
    /// `RECORD` says whether the line is a `record` line: the parts only those have (a parent,
    /// a record type) are not looked for in the others, which never set them.
    ///
    /// # Safety
    /// `at` is valid for writing [`Line::words`] 8-byte-aligned words.
    #[inline(always)]
    pub(crate) unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Line>,
        at: *mut u64,
        ring: u32,
    ) -> usize {
        let l: &Line = line;
        debug_assert_eq!(RECORD, l.kind == Kind::Record);
        debug_assert!(RECORD || l.parent.is_none() && is_static_empty(&l.record_type));
        // The header's constant parts: the kind, and the flags of the parts every line checks.
        let mut header = (l.kind as u64) << 16 | u64::from(l.hold) << (32 + HOLD_BIT);
        // Whether the entry owns nothing, known here from what the builder tracked (the texts'
        // variants, the data's `owns` flag) so that the writer reads one bit rather than scan
        // every field for it (see [`Entry::owns_nothing`]). It costs the simulator's thread
        // about 8 instructions a line (callgrind, Tiny5 recorder, 2026-11-28: `push_line` 88.0
        // -> 94.0, `begin_line` 54.1 -> 55.4, `write_end` 20.2 -> 21.4 a line). Tested with
        // `&&`, whose branches are predictable (most lines own nothing): a branchless `&` cost
        // 2 more; looking at the optional texts only in the branches that write them, 1.4 more.
        if l.name.is_static()
            && (!RECORD || l.record_type.is_static())
            && l.description.is_static()
            && l.data.owns_nothing()
        {
            header |= FLAG_NOTHING;
        }
        // SAFETY: every write below stays within the words [`Line::words`] counts, each at an
        // 8-byte-aligned offset (all parts are whole words); each owned part of the line is
        // copied bitwise into the entry, which owns it from now on (the line is forgotten,
        // per the contract).
        unsafe {
            let (mut p, after) = put_head(at, &l.clk, &l.id, &l.name, &l.after, ring);
            header |= after;
            if let Some(parent) = l.parent.filter(|_| RECORD) {
                header |= FLAG_PARENT;
                p.write(parent);
                p = p.add(1);
            }
            if RECORD && !is_static_empty(&l.record_type) {
                header |= FLAG_RECORD_TYPE;
                p = put(p, &l.record_type);
            }
            if !is_static_empty(&l.description) {
                header |= FLAG_DESCRIPTION;
                p = put(p, &l.description);
            }
            if let Some(extra) = l.data.read_extra() {
                header |= FLAG_EXTRA;
                p.cast::<Box<DataExtra>>().write(extra);
                p = p.add(1);
            }
            let fields = l.data.read_inline_to(p.cast::<Field>());
            let words = p.offset_from(at) as usize + fields * FIELD;
            at.write(header | words as u64 | (fields as u64) << 24);
            words
        }
    }
}

/// What a push moves into a ring entry: a builder's [`Line`], or a [`Plain`] line.
pub(crate) trait Queued {
    /// A record's own id; for the other kinds, the record referred to. A record line pushed with
    /// id 0 is given its id by the push.
    fn id_mut(&mut self) -> &mut u64;
    /// The entry's size in words on ring `ring` (see [`Line::words`]).
    fn words(&self, ring: u32) -> usize;
    /// Moves the line into the entry at `at` and returns its size in words (see
    /// [`Line::write_to`], whose contract this is).
    ///
    /// # Safety
    /// As for [`Line::write_to`].
    unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Self>,
        at: *mut u64,
        ring: u32,
    ) -> usize;
}

impl Queued for Line {
    #[inline(always)]
    fn id_mut(&mut self) -> &mut u64 {
        &mut self.id
    }
    #[inline(always)]
    fn words(&self, ring: u32) -> usize {
        Line::words(self, ring)
    }
    #[inline(always)]
    unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Self>,
        at: *mut u64,
        ring: u32,
    ) -> usize {
        // SAFETY: the same contract.
        unsafe { Line::write_to::<RECORD>(line, at, ring) }
    }
}

/// A line with nothing but its kind, cycle, id and name, and the line it must follow: a record's
/// end with no status, the end of nearly every record. Its entry, the one [`Line::write_to`]
/// makes of such a line, is written straight from these few words rather than from a `Line`
/// built on the stack and read back part by part: 127 → 108 instructions per end (callgrind,
/// 2026-11-28; Tiny5's simulator thread 1 % fewer instructions).
///
/// An event with no data is made this way when it is asked for by name
/// ([`crate::RecordHandle::emit_event_at`]); one through its builder is not: a builder that kept
/// only its name until a field was added, and pushed a `Plain` line when none was, saved 4
/// instructions of about 210 on an event with no fields and cost 135 more on one with two (the
/// larger builder moved through the chained calls, and the line made out of line at the first
/// field). With the call of its own, Tiny5's simulator thread does 389 → 367 instructions a line
/// (callgrind, 2026-11-28; half its lines are such events), and such an event takes 7.0 ns
/// against 11.2 through a builder (criterion, `producer/emit_event_at` and `event_no_data`).
///
/// An event whose fields are all given at once, `N` of them (at most [`Data::INLINE`]), is made
/// the same way ([`crate::RecordHandle::emit_event_fields_at`]): its fields go straight from
/// the caller's array into the entry, after the name, where [`Line::write_to`] puts a line's
/// inline fields, so the writer reads both alike. The line borrows the array rather than holding
/// a copy: moved into the line, the array was copied with 16-byte loads over the 8-byte stores
/// that had just made it, which the CPU cannot forward (see [`put`]). It owns what the array
/// holds all the same: dropping the line drops the fields, and pushing it moves them on.
///
/// Its fields are a type parameter ([`PlainFields`]) so that a line with none (`()`, the ends
/// and events by name that make up most of a pipeline's lines) is the five words it was: a
/// pointer to an empty array there cost Tiny5's simulator thread 1 % more instructions.
pub(crate) struct Plain<F: PlainFields = ()> {
    pub(crate) kind: Kind,
    pub(crate) clk: u64,
    pub(crate) id: u64,
    pub(crate) name: Str,
    pub(crate) after: Option<Pos>,
    pub(crate) fields: F,
}

/// The fields of a [`Plain`] line: none (`()`), or an array it borrows and owns.
pub(crate) trait PlainFields {
    /// The fields.
    fn as_slice(&self) -> &[Field];
    /// Drops the fields of a line that was not pushed.
    ///
    /// # Safety
    /// The fields are not used or dropped again.
    unsafe fn drop_unwritten(&mut self);
    /// Moves the fields of a line that was not pushed into `data` (a builder's line made of it).
    ///
    /// # Safety
    /// As for [`PlainFields::drop_unwritten`].
    unsafe fn move_into(&mut self, data: &mut Data);
    /// Whether the fields own nothing (see [`own_nothing`]).
    #[inline(always)]
    fn own_nothing(&self) -> bool {
        own_nothing(self.as_slice())
    }
}

impl PlainFields for () {
    #[inline(always)]
    fn as_slice(&self) -> &[Field] {
        &[]
    }
    #[inline(always)]
    unsafe fn drop_unwritten(&mut self) {}
    #[inline(always)]
    unsafe fn move_into(&mut self, _: &mut Data) {}
}

impl<const N: usize> PlainFields for &mut ManuallyDrop<[Field; N]> {
    #[inline(always)]
    fn as_slice(&self) -> &[Field] {
        const { assert!(N <= Data::INLINE, "at most Data::INLINE fields") };
        &self[..]
    }
    /// Does nothing for fields that own nothing (most): then there is no call of the drop glue,
    /// which would read every value's variant again out of line (it made a left-out event with
    /// two numbers cost 15–20 instructions more, callgrind, the 6502 emulator with capture off,
    /// 2026-11-29).
    #[inline(always)]
    unsafe fn drop_unwritten(&mut self) {
        if !own_nothing(&self[..]) {
            // SAFETY: per the contract.
            unsafe { ManuallyDrop::drop(self) };
        }
    }
    #[inline(always)]
    unsafe fn move_into(&mut self, data: &mut Data) {
        // SAFETY: per the contract, the fields are read out once, here.
        data.push_all(unsafe { ManuallyDrop::take(self) });
    }
}

/// An array of fields given at once, with whether they own nothing, asked where the array is
/// made: there the compiler knows each value's variant (a number, a static text) and the answer
/// is a constant, where the line's push, out of line, read every value's variant again to find
/// it (about 4 instructions a field: callgrind, `producer_loop`, a Tiny5-like record's six
/// fields 24 instructions, 2026-12-01).
pub(crate) struct ArrayFields<'a, const N: usize> {
    array: &'a mut ManuallyDrop<[Field; N]>,
    owns_nothing: bool,
}

impl<'a, const N: usize> ArrayFields<'a, N> {
    /// `array`, owned by the line it goes into from now on (see [`Plain`]).
    #[inline(always)]
    pub(crate) fn new(array: &'a mut ManuallyDrop<[Field; N]>) -> ArrayFields<'a, N> {
        let owns_nothing = own_nothing(&array[..]);
        ArrayFields { array, owns_nothing }
    }

    /// `array`, of which `owns_nothing` says whether it owns nothing ([`own_nothing`]): for a
    /// caller that asked as soon as it made the array, where the compiler still knows each
    /// value's variant (a call made between, even one not taken, makes it load them again).
    #[inline(always)]
    pub(crate) fn known(
        array: &'a mut ManuallyDrop<[Field; N]>,
        owns_nothing: bool,
    ) -> ArrayFields<'a, N> {
        debug_assert_eq!(owns_nothing, own_nothing(&array[..]));
        ArrayFields { array, owns_nothing }
    }
}

impl<const N: usize> PlainFields for ArrayFields<'_, N> {
    #[inline(always)]
    fn as_slice(&self) -> &[Field] {
        self.array.as_slice()
    }
    /// As for the array's.
    #[inline(always)]
    unsafe fn drop_unwritten(&mut self) {
        if !self.owns_nothing {
            // SAFETY: per the contract.
            unsafe { ManuallyDrop::drop(self.array) };
        }
    }
    #[inline(always)]
    unsafe fn move_into(&mut self, data: &mut Data) {
        // SAFETY: per the contract.
        unsafe { self.array.move_into(data) };
    }
    #[inline(always)]
    fn own_nothing(&self) -> bool {
        self.owns_nothing
    }
}

impl<F: PlainFields> Drop for Plain<F> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the line owns its fields (see the type), and is dropped only when it was not
        // pushed, which would have moved them into the entry.
        unsafe { self.fields.drop_unwritten() };
    }
}

/// Whether `fields` own nothing: their values are numbers, flags, colors or static texts. Known
/// at compile time where the array is made in view (most calls), so the test folds away.
#[inline(always)]
pub(crate) fn own_nothing(fields: &[Field]) -> bool {
    fields.iter().all(|(_, v)| !matches!(v, Value::Str(s) if !s.is_static()))
}

impl<F: PlainFields> Queued for Plain<F> {
    #[inline(always)]
    fn id_mut(&mut self) -> &mut u64 {
        &mut self.id
    }
    #[inline(always)]
    fn words(&self, ring: u32) -> usize {
        plain_words(&self.after, ring, 0, self.fields.as_slice().len())
    }
    #[inline(always)]
    unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Self>,
        at: *mut u64,
        ring: u32,
    ) -> usize {
        debug_assert!(!RECORD && line.kind != Kind::Record, "a record line is never plain");
        let fields = line.fields.as_slice();
        // Only the name and the fields can own something (see [`Entry::owns_nothing`]).
        let nothing = line.name.is_static() && line.fields.own_nothing();
        let header = (line.kind as u64) << 16 | u64::from(nothing) << (32 + NOTHING_BIT);
        let l = &**line;
        // SAFETY: the caller's contract, which is `write_plain`'s.
        unsafe {
            write_plain(at, ring, header, (&l.clk, &l.id, &l.name, &l.after), fields, |p| (p, 0))
        }
    }
}

/// A `record_end` line with no status, the end of nearly every record: the entry a [`Plain`]
/// end (`Plain { kind: Kind::End, name: Str::EMPTY, fields: (), .. }`) makes, written from
/// these three values. Each is read as a plain word, so the compiler writes what it has in
/// registers rather than store the line on the stack and read it back (a `Plain` line's parts
/// go through [`put`]'s volatile reads, which must stay: its name is made by the caller): 10
/// instructions less per end (callgrind, `producer_loop instruction`, 2026-12-01).
pub(crate) struct End {
    pub(crate) clk: u64,
    pub(crate) id: u64,
    /// The record's line, which the end must follow (kept only when on another ring).
    pub(crate) after: Pos,
}

impl Queued for End {
    #[inline(always)]
    fn id_mut(&mut self) -> &mut u64 {
        &mut self.id
    }
    #[inline(always)]
    fn words(&self, ring: u32) -> usize {
        plain_words(&Some(self.after), ring, 0, 0)
    }
    #[inline(always)]
    unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Self>,
        at: *mut u64,
        ring: u32,
    ) -> usize {
        debug_assert!(!RECORD, "an end is no record");
        let End { clk, id, after } = **line;
        // A static empty name and no fields: the entry owns nothing.
        let header = (Kind::End as u64) << 16 | FLAG_NOTHING;
        // SAFETY: the caller's contract: room for the entry (`words`); nothing in it is owned.
        unsafe {
            at.add(1).write(clk);
            at.add(2).write(id);
            store_str(at.add(3).cast::<Str>(), Str::EMPTY);
            let (words, flags) = match after.ring != ring {
                true => {
                    at.add(FIXED).write(after.ring as u64);
                    at.add(FIXED + 1).write(after.index);
                    (FIXED + 2, FLAG_AFTER)
                }
                false => (FIXED, 0),
            };
            at.write(header | flags | words as u64);
            words
        }
    }
}

/// The size in words of a [`Plain`] or [`PlainRecord`] entry: its head, `between` words after it,
/// and `fields` fields.
#[inline(always)]
fn plain_words(after: &Option<Pos>, ring: u32, between: usize, fields: usize) -> usize {
    FIXED + 2 * usize::from(after.is_some_and(|a| a.ring != ring)) + between + fields * FIELD
}

/// Writes the entry of a [`Plain`] or [`PlainRecord`] line at `at` and returns its size in
/// words: the head (cycle, id, name, the line it follows), what `between` writes after it (a
/// record's parent and type; it returns where it stopped and the flags of what it wrote), the
/// fields, and the header word last, with `header`'s bits.
///
/// # Safety
/// As for [`Line::write_to`]: `at` has room for the entry; the name, what `between` writes and
/// the fields are moved bitwise into it, and the caller forgets its line.
#[inline(always)]
unsafe fn write_plain(
    at: *mut u64,
    ring: u32,
    header: u64,
    (clk, id, name, after): (&u64, &u64, &Str, &Option<Pos>),
    fields: &[Field],
    between: impl FnOnce(*mut u64) -> (*mut u64, u64),
) -> usize {
    // SAFETY: per the contract.
    unsafe {
        let (p, after) = put_head(at, clk, id, name, after, ring);
        let (mut p, parts) = between(p);
        for field in fields {
            p = put(p, field);
        }
        let words = p.offset_from(at) as usize;
        at.write(header | after | parts | (fields.len() as u64) << 24 | words as u64);
        words
    }
}

/// A `record` line whose typed fields are all given at once
/// ([`crate::RecordHandle::begin_child_fields_at`]): the entry [`Line::write_to`] makes of a
/// builder's record with those fields and no description, written straight from these words
/// and the caller's array, as [`Plain`] writes an event. A builder's record is made in a pooled
/// ~500-byte `Line` and then copied into the ring; this one is copied once, from the array
/// (callgrind, `producer_loop`: 622 → 532 instructions a two-field record begun and ended).
pub(crate) struct PlainRecord<F: PlainFields> {
    pub(crate) clk: u64,
    /// 0 until the push gives the record its id.
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) name: Str,
    pub(crate) record_type: Str,
    /// The parent's line, which the record must follow (the entry keeps it only when that line
    /// is on another thread's ring).
    pub(crate) after: Option<Pos>,
    /// Capture control: queued only as a possible ancestor (CAP-ANC-1).
    pub(crate) hold: bool,
    pub(crate) fields: F,
}

impl<F: PlainFields> Drop for PlainRecord<F> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: as for `Plain`: dropped only when not pushed.
        unsafe { self.fields.drop_unwritten() };
    }
}

impl<F: PlainFields> Queued for PlainRecord<F> {
    #[inline(always)]
    fn id_mut(&mut self) -> &mut u64 {
        &mut self.id
    }
    #[inline(always)]
    fn words(&self, ring: u32) -> usize {
        let between = 1 + STR * usize::from(!is_static_empty(&self.record_type));
        plain_words(&self.after, ring, between, self.fields.as_slice().len())
    }
    #[inline(always)]
    unsafe fn write_to<const RECORD: bool>(
        line: &ManuallyDrop<Self>,
        at: *mut u64,
        ring: u32,
    ) -> usize {
        debug_assert!(RECORD, "a plain record is pushed as a record");
        let fields = line.fields.as_slice();
        let nothing =
            line.name.is_static() && line.record_type.is_static() && line.fields.own_nothing();
        let header = (Kind::Record as u64) << 16
            | u64::from(line.hold) << (32 + HOLD_BIT)
            | u64::from(nothing) << (32 + NOTHING_BIT);
        let l = &**line;
        // The parts only a record has, in `Line::write_to`'s order: the parent, the type.
        let parent_and_type = |p: *mut u64| {
            // SAFETY: within the entry (`words` counts them); the type is moved bitwise.
            unsafe {
                p.write(l.parent);
                match is_static_empty(&l.record_type) {
                    true => (p.add(1), FLAG_PARENT),
                    false => (put(p.add(1), &l.record_type), FLAG_PARENT | FLAG_RECORD_TYPE),
                }
            }
        };
        // SAFETY: the caller's contract, which is `write_plain`'s.
        unsafe {
            write_plain(
                at,
                ring,
                header,
                (&l.clk, &l.id, &l.name, &l.after),
                fields,
                parent_and_type,
            )
        }
    }
}

/// An entry in a ring, read in place.
pub(crate) struct Entry<'a> {
    pub(crate) kind: Kind,
    pub(crate) clk: u64,
    pub(crate) id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) name: &'a Str,
    pub(crate) record_type: &'a Str,
    pub(crate) description: &'a Str,
    pub(crate) data: DataRef<'a>,
    pub(crate) hold: bool,
    /// Its size in words.
    pub(crate) words: usize,
    /// See [`Entry::owns_nothing`].
    owns_nothing: bool,
}

/// The fixed part of an entry: its header and first words, without the optional parts and the
/// fields ([`Entry::head`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) kind: Kind,
    pub(crate) clk: u64,
    /// A record's own id; for the other kinds, the record referred to.
    pub(crate) id: u64,
    pub(crate) hold: bool,
    /// Its size in words.
    pub(crate) words: usize,
    /// As [`Entry::owns_nothing`].
    pub(crate) owns_nothing: bool,
}

static EMPTY: Str = Str::EMPTY;

/// Where the parts of an entry are, from its header.
struct Parts {
    parent: Option<*mut u64>,
    record_type: Option<*mut Str>,
    description: Option<*mut Str>,
    extra: Option<*mut Box<DataExtra>>,
    fields: *mut Field,
    count: usize,
}

impl Parts {
    /// # Safety
    /// `at` is the first word of an entry written by [`Line::write_to`].
    #[inline(always)]
    unsafe fn of(at: *mut u64) -> Parts {
        // SAFETY: the same layout as `write_to`, from the flags it wrote; all within the entry.
        unsafe {
            let header = at.read();
            let flags = (header >> 32) as u8;
            let offsets = OFFSETS[(flags & PART_FLAGS) as usize];
            // The word offset of a part, from the table.
            let at_part = |part: u32| at.add((offsets >> (8 * part)) as u8 as usize);
            let part = |flag: u8, part: u32| (flags & flag != 0).then(|| at_part(part));
            Parts {
                parent: part(PARENT, 1),
                record_type: part(RECORD_TYPE, 2).map(|p| p.cast::<Str>()),
                description: part(DESCRIPTION, 3).map(|p| p.cast::<Str>()),
                extra: part(EXTRA, 4).map(|p| p.cast::<Box<DataExtra>>()),
                fields: at_part(5).cast(),
                count: (header >> 24) as u8 as usize,
            }
        }
    }
}

/// The flags that say which optional parts an entry has.
const PART_FLAGS: u8 = AFTER | PARENT | RECORD_TYPE | DESCRIPTION | EXTRA;

/// For each combination of [`PART_FLAGS`], the word offsets at which [`Line::write_to`] puts
/// the optional parts and the fields, one byte each (after, parent, record type, description,
/// extra, fields): a lookup instead of a walk that tests each flag in turn, since the writer
/// thread finds the parts of every line it takes.
const OFFSETS: [u64; 32] = {
    let mut table = [0u64; 32];
    let mut flags = 0;
    while flags < 32 {
        let sizes = [(AFTER, 2), (PARENT, 1), (RECORD_TYPE, STR), (DESCRIPTION, STR), (EXTRA, 1)];
        let mut offset = FIXED;
        let mut packed = 0u64;
        let mut i = 0;
        while i < sizes.len() {
            packed |= (offset as u64) << (8 * i);
            if flags as u8 & sizes[i].0 != 0 {
                offset += sizes[i].1;
            }
            i += 1;
        }
        table[flags] = packed | (offset as u64) << 40;
        flags += 1;
    }
    table
};

impl<'a> Entry<'a> {
    /// Reads the entry at `at`.
    ///
    /// # Safety
    /// `at` is the first word of an entry written by [`Line::write_to`] and not dropped yet, and
    /// it stays in place, unchanged, for `'a`.
    #[inline]
    pub(crate) unsafe fn read(at: *mut u64) -> Entry<'a> {
        // SAFETY: per the contract, each part holds the value `write_to` put there.
        unsafe {
            let head = Entry::head(at);
            let parts = Parts::of(at);
            let text = |s: Option<*mut Str>| s.map_or(&EMPTY, |s| &*s);
            Entry {
                kind: head.kind,
                clk: head.clk,
                id: head.id,
                parent: parts.parent.map(|p| p.read()),
                name: &*at.add(3).cast::<Str>(),
                record_type: text(parts.record_type),
                description: text(parts.description),
                data: DataRef {
                    inline: std::slice::from_raw_parts(parts.fields, parts.count),
                    extra: parts.extra.map(|b| &**b),
                },
                hold: head.hold,
                words: head.words,
                owns_nothing: head.owns_nothing,
            }
        }
    }

    /// Reads the fixed part of the entry at `at`: the header and the words before the name,
    /// without finding where the optional parts and the fields are (`Parts::of`), which a line
    /// the writer only keeps, counts or steps past does not need.
    ///
    /// # Safety
    /// `at` is the first word of an entry written by [`Line::write_to`] or [`Plain`]'s, and not
    /// dropped yet.
    #[inline(always)]
    pub(crate) unsafe fn head(at: *mut u64) -> Head {
        // SAFETY: per the contract, the entry's first three words are there, as written.
        let (header, clk, id) = unsafe { (at.read(), at.add(1).read(), at.add(2).read()) };
        let flags = (header >> 32) as u8;
        Head {
            kind: match (header >> 16) as u8 {
                0 => Kind::Record,
                1 => Kind::End,
                2 => Kind::Event,
                3 => Kind::Annotation,
                _ => Kind::Release,
            },
            clk,
            id,
            hold: flags & HOLD != 0,
            words: (header & 0xffff) as usize,
            owns_nothing: flags & NOTHING != 0,
        }
    }

    /// True when dropping the entry would free nothing (static texts, typed values that own
    /// nothing: most lines a simulator writes). Its drop, which walks the entry's parts again
    /// and matches every field, is then skipped, as `record::drop_line` does for a line left out;
    /// the flight recorder forgets such a line without reading it again.
    ///
    /// A bit of the header, set when the entry is written from what the builder knew (its data's
    /// `owns` flag, its texts' variants). It replaces a scan of the texts and of every field
    /// (about 53 instructions for an event with six fields) on every line the writer took, and
    /// with it the finding of the parts that only the scan needed: callgrind, Tiny5, writer
    /// thread, 400 less 200 words, 2026-11-28: recorder 340.7 -> 272.4 instructions a line,
    /// count 147.0 -> 119.0; a full trace's encoding (either thread) 584.7 -> 570.1.
    #[inline]
    pub(crate) fn owns_nothing(&self) -> bool {
        self.owns_nothing
    }

    /// What the writer needs to put the entry at `at` in order, and no more: its size in words
    /// and the line it must follow. Read from the header and that one part, so that a writer
    /// that hands the entry on to be encoded elsewhere (the encoders' batches) does not decode
    /// the whole entry for two words.
    ///
    /// # Safety
    /// As for [`Entry::read`].
    #[inline(always)]
    pub(crate) unsafe fn order(at: *mut u64) -> (usize, Option<Pos>) {
        // SAFETY: per the contract; the header says whether the part is there, and where.
        unsafe {
            let header = at.read();
            let flags = (header >> 32) as u8;
            let after = (flags & AFTER != 0).then(|| {
                let p = at.add((OFFSETS[(flags & PART_FLAGS) as usize] & 0xff) as usize);
                Pos { ring: p.read() as u32, index: p.add(1).read() }
            });
            ((header & 0xffff) as usize, after)
        }
    }

    /// Drops what the entry at `at` owns (texts, values, raw JSON).
    ///
    /// # Safety
    /// As for [`Entry::read`]; afterwards the entry must not be read or dropped again.
    #[inline]
    pub(crate) unsafe fn drop_in_place(at: *mut u64) {
        // SAFETY: per the contract; each part is dropped once, where `write_to` put it.
        unsafe {
            let parts = Parts::of(at);
            ptr::drop_in_place(at.add(3).cast::<Str>());
            if let Some(s) = parts.record_type {
                ptr::drop_in_place(s);
            }
            if let Some(s) = parts.description {
                ptr::drop_in_place(s);
            }
            if let Some(b) = parts.extra {
                ptr::drop_in_place(b);
            }
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(parts.fields, parts.count));
        }
    }
}

/// Copies `*value` bitwise to the words at `at` and returns the word after it.
///
/// One 8-byte word at a time, each read on its own (volatile: the compiler may neither merge the
/// reads into 16-byte loads nor call `memcpy`). The builder has just stored these parts a word at
/// a time, and a wider load over several recent stores cannot be forwarded from them: the CPU
/// waits until they reach the cache, several nanoseconds per part. `MaybeUninit` words, so unused
/// bytes (an enum's padding) are copied as they are and pointers keep their provenance.
///
/// # Safety
/// `at` is valid for writing `size_of::<T>()` bytes, 8-byte aligned; `T` is a whole number of
/// words. The caller moves `*value` (it must not drop it afterwards) or `T` is `Copy`.
#[inline(always)]
unsafe fn put<T>(at: *mut u64, value: *const T) -> *mut u64 {
    let words = size_of::<T>() / 8;
    let (src, dst) = (value.cast::<MaybeUninit<u64>>(), at.cast::<MaybeUninit<u64>>());
    // SAFETY: per the contract.
    unsafe {
        for w in 0..words {
            dst.add(w).write(src.add(w).read_volatile());
        }
        at.add(words)
    }
}

/// Writes the parts every entry has after its header (cycle, id, name) and, when it is on
/// another ring than `ring`, the line it must follow; returns the next word, and the header
/// flag that says whether that line was written. A word at a time (see [`put`]): a line made
/// on the caller's stack just before (a [`Plain`] line) had its cycle and id copied together,
/// one 16-byte load over two 8-byte stores, which waited for those stores to reach the cache:
/// 41 % of the samples in `write_end` (perf, Tiny5 `count`); a record begun and ended went
/// 28.6 → 25.6 ns with this and [`store_str`] (criterion, 2026-11-28).
///
/// # Safety
/// `at` is the first word of an entry with room for the parts written; the name is moved
/// bitwise into it, as for [`put`].
#[inline(always)]
unsafe fn put_head(
    at: *mut u64,
    clk: &u64,
    id: &u64,
    name: &Str,
    after: &Option<Pos>,
    ring: u32,
) -> (*mut u64, u64) {
    // SAFETY: per the contract.
    unsafe {
        let p = put(put(put(at.add(1), clk), id), name);
        match after.filter(|a| a.ring != ring) {
            Some(after) => {
                p.write(after.ring as u64);
                p.add(1).write(after.index);
                (p.add(2), FLAG_AFTER)
            }
            None => (p, 0),
        }
    }
}

/// Moves `s` into `*at` without copying it whole. A text made from a `&'static str` is rebuilt
/// from its two words, which the compiler has in registers or as constants: moved as a whole
/// `Str`, it was copied through the stack with a 16-byte load over two 8-byte stores, which
/// stalls (see `put`); read word by word with `put`, the words also went through the stack (12
/// more instructions). Inlined where the text is made.
///
/// # Safety
/// `at` is valid for writing a `Str` and aligned; what it holds is overwritten, not dropped.
#[inline(always)]
pub(crate) unsafe fn store_str(at: *mut Str, s: Str) {
    // SAFETY: per the contract.
    unsafe {
        match s {
            Str::Static(t) => at.write(Str::Static(t)),
            s => {
                put(at.cast(), &ManuallyDrop::new(s));
            }
        }
    }
}

/// Static empty texts are "absent": they need no room and no drop.
#[inline(always)]
fn is_static_empty(s: &Str) -> bool {
    matches!(s, Str::Static(t) if t.is_empty())
}

const FIXED: usize = 3 + STR;
const STR: usize = size_of::<Str>() / 8;
const FIELD: usize = size_of::<Field>() / 8;
const AFTER: u8 = 1;
const PARENT: u8 = 2;
const RECORD_TYPE: u8 = 4;
const DESCRIPTION: u8 = 8;
const EXTRA: u8 = 16;
const HOLD_BIT: u32 = 5;
const HOLD: u8 = 1 << HOLD_BIT;
/// Set when the entry owns nothing (see [`Entry::owns_nothing`]). A bit for "owns nothing"
/// rather than for "owns something" (which costs the same): an entry without it is dropped,
/// the safe side.
const NOTHING_BIT: u32 = 6;
const NOTHING: u8 = 1 << NOTHING_BIT;
// The flags in place in the header word (bits 32..40).
const FLAG_AFTER: u64 = (AFTER as u64) << 32;
const FLAG_PARENT: u64 = (PARENT as u64) << 32;
const FLAG_RECORD_TYPE: u64 = (RECORD_TYPE as u64) << 32;
const FLAG_DESCRIPTION: u64 = (DESCRIPTION as u64) << 32;
const FLAG_EXTRA: u64 = (EXTRA as u64) << 32;
const FLAG_NOTHING: u64 = (NOTHING as u64) << 32;

// Every part is a whole number of 8-byte words with at most 8-byte alignment, so parts can sit
// back to back in a word array; and the largest entry fits the header's 16-bit size.
const _: () = {
    assert!(size_of::<Str>() % 8 == 0 && std::mem::align_of::<Str>() <= 8);
    assert!(size_of::<Field>() % 8 == 0 && std::mem::align_of::<Field>() <= 8);
    assert!(size_of::<Box<DataExtra>>() == 8);
    assert!(MAX_WORDS < 1 << 16);
};

/// The largest entry, in words.
pub(crate) const MAX_WORDS: usize = FIXED + 2 + 1 + 2 * STR + 1 + Data::INLINE * FIELD;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Value;

    /// The ring the test entries are written to: none of the lines' dependencies is on it.
    const RING: u32 = 9;

    fn round_trip(line: Line) -> (String, usize) {
        let words = line.words(RING);
        assert!(words <= MAX_WORDS);
        let mut buf = vec![0u64; MAX_WORDS];
        let at = buf.as_mut_ptr();
        let line = ManuallyDrop::new(line);
        let written = match line.kind {
            // SAFETY: `buf` has `MAX_WORDS` words; `line` is forgotten.
            Kind::Record => unsafe { Line::write_to::<true>(&line, at, RING) },
            // SAFETY: as above.
            _ => unsafe { Line::write_to::<false>(&line, at, RING) },
        };
        assert_eq!(written, words, "the layout's size");
        // SAFETY: just written, and not read again.
        let (text, read) = unsafe { read_back(at) };
        assert_eq!(read, words);
        (text, words)
    }

    /// The entry at `at` as text (every part, and the line it must follow) and its size, which
    /// the writer's ordering reads alike; then drops it.
    ///
    /// # Safety
    /// `at` is an entry just written and not dropped; it is dropped here.
    unsafe fn read_back(at: *mut u64) -> (String, usize) {
        // SAFETY: per the contract; dropped once, after it is read.
        unsafe {
            let e = Entry::read(at);
            let (order_words, after) = Entry::order(at);
            assert_eq!(order_words, e.words, "the size the writer orders by");
            let mut data = Vec::new();
            e.data.write_json(&mut data);
            let text = format!(
                "{:?} {} {} {:?} {} {} {} {:?} {} {}",
                e.kind,
                e.clk,
                e.id,
                e.parent,
                &**e.name,
                &**e.record_type,
                &**e.description,
                after,
                String::from_utf8(data).expect("utf8"),
                e.hold
            );
            let words = e.words;
            Entry::drop_in_place(at);
            (text, words)
        }
    }

    /// Writes `line` and `other`, the same line made two ways, into entries of their own, checks
    /// that the entries are alike (size, header, every part read back), drops both, and returns
    /// the text of the entry ([`read_back`]).
    fn same_entry<const RECORD: bool, Q: Queued>(line: Line, other: Q, what: &str) -> String {
        let (line, other) = (ManuallyDrop::new(line), ManuallyDrop::new(other));
        assert_eq!(Queued::words(&*other, RING), line.words(RING), "{what}");
        let (mut from_line, mut from_other) = (vec![0u64; MAX_WORDS], vec![0u64; MAX_WORDS]);
        // SAFETY: both buffers have `MAX_WORDS` words; each line is forgotten, and its entry
        // dropped once below.
        let (n, m) = unsafe {
            (
                Line::write_to::<RECORD>(&line, from_line.as_mut_ptr(), RING),
                Q::write_to::<RECORD>(&other, from_other.as_mut_ptr(), RING),
            )
        };
        assert_eq!(n, m, "{what}");
        assert_eq!(from_line[0], from_other[0], "the header, {what}");
        // SAFETY: both just written, and not read again.
        let (a, b) =
            unsafe { (read_back(from_line.as_mut_ptr()), read_back(from_other.as_mut_ptr())) };
        assert_eq!(a, b, "{what}");
        a.0
    }

    #[test]
    fn an_event_with_two_numbers_is_two_cache_lines() {
        let mut l = Line::new(Kind::Event, 7, "Execute".into(), None);
        l.clk = 9;
        l.data.push("a", 1u64);
        l.data.push("b", 2u64);
        let (text, words) = round_trip(l);
        assert_eq!(text, r#"Event 9 7 None Execute   None {"a":1,"b":2} false"#);
        assert_eq!(words, 16);
    }

    #[test]
    fn a_dependency_on_the_same_ring_is_left_out() {
        let mut l = Line::new(Kind::Event, 7, "Execute".into(), Some(Pos { ring: RING, index: 3 }));
        l.clk = 9;
        let (text, words) = round_trip(l);
        assert_eq!(text, "Event 9 7 None Execute   None {} false");
        assert_eq!(words, FIXED);
    }

    /// A [`Plain`] line's entry is the one [`Line::write_to`] makes of the same line, word for
    /// word but for the name's (owned names are at different addresses), and reads back alike.
    #[test]
    fn a_plain_line_is_the_entry_of_the_same_line() {
        let afters = [None, Some(Pos { ring: RING, index: 3 }), Some(Pos { ring: 2, index: 40 })];
        for (kind, name, after) in afters.into_iter().flat_map(|after| {
            [(Kind::Event, "IF", after), (Kind::End, "", after), (Kind::Annotation, "n", after)]
        }) {
            for owned in [false, true] {
                let make = || -> Str {
                    match owned {
                        true => String::from(name).into(),
                        false => name.into(),
                    }
                };
                let mut line = Line::new(kind, 7, make(), after);
                line.clk = 9;
                let plain = Plain { kind, clk: 9, id: 7, name: make(), after, fields: () };
                let mut from_line = vec![0u64; MAX_WORDS];
                let mut from_plain = vec![0u64; MAX_WORDS];
                let (line, plain) = (ManuallyDrop::new(line), ManuallyDrop::new(plain));
                assert_eq!(Queued::words(&*plain, RING), line.words(RING));
                // SAFETY: both buffers have `MAX_WORDS` words; each line is forgotten, and its
                // entry dropped once below.
                let (n, m) = unsafe {
                    (
                        Line::write_to::<false>(&line, from_line.as_mut_ptr(), RING),
                        Plain::write_to::<false>(&plain, from_plain.as_mut_ptr(), RING),
                    )
                };
                assert_eq!(n, m, "{kind:?} {name:?} {after:?}");
                let name_words = 3..3 + STR;
                for w in (0..n).filter(|w| !owned || !name_words.contains(w)) {
                    assert_eq!(from_line[w], from_plain[w], "word {w} of {kind:?} {after:?}");
                }
                for at in [from_line.as_mut_ptr(), from_plain.as_mut_ptr()] {
                    // SAFETY: just written; read, then dropped once.
                    unsafe {
                        let e = Entry::read(at);
                        assert_eq!((e.kind, e.clk, e.id, &**e.name), (kind, 9, 7, name));
                        assert_eq!(Entry::order(at).1, after.filter(|a| a.ring != RING));
                        Entry::drop_in_place(at);
                    }
                }
            }
        }
    }

    /// An [`End`]'s entry is the one [`Line::write_to`] makes of the same end, word for word,
    /// on the same ring as its record's line and on another.
    #[test]
    fn an_end_is_the_entry_of_the_same_line() {
        for after in [Pos { ring: RING, index: 3 }, Pos { ring: 2, index: 40 }] {
            let mut line = Line::new(Kind::End, 7, Str::EMPTY, Some(after));
            line.clk = 9;
            let end = End { clk: 9, id: 7, after };
            let text = same_entry::<false, _>(line, end, &format!("{after:?}"));
            assert!(text.starts_with("End 9 7 None "), "{text}");
            let mut words = vec![0u64; MAX_WORDS];
            // SAFETY: `MAX_WORDS` words; the entry owns nothing, so it is not dropped.
            let n = unsafe {
                End::write_to::<false>(
                    &ManuallyDrop::new(End { clk: 9, id: 7, after }),
                    words.as_mut_ptr(),
                    RING,
                )
            };
            // SAFETY: just written.
            let head = unsafe { Entry::head(words.as_mut_ptr()) };
            assert!(head.owns_nothing && head.words == n);
        }
    }

    /// The header's "owns nothing" bit is set exactly when the entry owns nothing (as the scan
    /// of its texts and fields it replaced would say), and [`Entry::head`] agrees with
    /// [`Entry::read`], for lines and [`Plain`] lines alike.
    #[test]
    fn the_owns_nothing_bit_is_what_the_entry_owns_and_the_head_is_the_entry() {
        // What the bit replaced: a scan of the entry's texts and fields.
        let scan = |e: &Entry<'_>| {
            e.name.is_static()
                && e.record_type.is_static()
                && e.description.is_static()
                && e.data.owns_nothing()
        };
        let check = |at: *mut u64, owns_nothing: bool, what: &str| {
            // SAFETY: `at` was just written by a `write_to`; read, then dropped once.
            unsafe {
                let (e, head) = (Entry::read(at), Entry::head(at));
                assert_eq!(e.owns_nothing(), owns_nothing, "{what}");
                assert_eq!(scan(&e), owns_nothing, "{what}: the scan");
                let read = Head {
                    kind: e.kind,
                    clk: e.clk,
                    id: e.id,
                    hold: e.hold,
                    words: e.words,
                    owns_nothing: e.owns_nothing(),
                };
                assert_eq!(head, read, "{what}: the head");
                Entry::drop_in_place(at);
            }
        };
        type Change = fn(&mut Line);
        let changes: [(&str, bool, Change); 12] = [
            ("nothing", true, |_| {}),
            ("static texts and plain values", true, |l| {
                l.description = "static".into();
                l.data.push("a", 1u64);
                l.data.push("s", Value::Str("static".into()));
                l.data.push("b", true);
            }),
            ("an owned name", false, |l| l.name = String::from("owned").into()),
            ("a shared name", false, |l| l.name = std::sync::Arc::<str>::from("n").into()),
            ("an interned name", true, |l| l.name = Str::interned("interned")),
            ("an owned description", false, |l| l.description = String::from("d").into()),
            ("an owned empty description", false, |l| l.description = String::new().into()),
            ("an owned field value", false, |l| {
                l.data.push("a", 1u64);
                l.data.push("s", Value::Str(String::from("owned").into()));
            }),
            ("a field with an owned key", false, |l| l.data.push(String::from("k"), 1u64)),
            ("a spilled field", false, |l| {
                for i in 0..=Data::INLINE as u64 {
                    l.data.push("k", i);
                }
            }),
            ("raw JSON", false, |l| l.data.parse_json(r#"{"z":1}"#).expect("json")),
            ("a dependency and hold", true, |l| {
                l.after = Some(Pos { ring: 2, index: 40 });
                l.hold = true;
            }),
        ];
        for kind in [Kind::Record, Kind::End, Kind::Event, Kind::Annotation] {
            for (what, owns_nothing, change) in &changes {
                if *what == "a dependency and hold" && kind != Kind::Record {
                    continue;
                }
                let mut l = Line::new(kind, 3, "static".into(), None);
                l.clk = 5;
                change(&mut l);
                let mut buf = vec![0u64; MAX_WORDS];
                let line = ManuallyDrop::new(l);
                // SAFETY: `buf` has `MAX_WORDS` words; `line` is forgotten, its entry dropped
                // once by `check`.
                unsafe {
                    match kind {
                        Kind::Record => Line::write_to::<true>(&line, buf.as_mut_ptr(), RING),
                        _ => Line::write_to::<false>(&line, buf.as_mut_ptr(), RING),
                    };
                }
                check(buf.as_mut_ptr(), *owns_nothing, &format!("{kind:?}, {what}"));
            }
        }
        // The record-only parts.
        for (what, owns_nothing, record_type) in [
            ("a static record type", true, Str::from("T")),
            ("an owned record type", false, Str::from(String::from("T"))),
            ("a shared record type", false, std::sync::Arc::<str>::from("T").into()),
        ] {
            let mut l = Line::new(Kind::Record, 3, "static".into(), None);
            l.parent = Some(1);
            l.record_type = record_type;
            let mut buf = vec![0u64; MAX_WORDS];
            let line = ManuallyDrop::new(l);
            // SAFETY: as above.
            unsafe { Line::write_to::<true>(&line, buf.as_mut_ptr(), RING) };
            check(buf.as_mut_ptr(), owns_nothing, what);
        }
        for (kind, owned, after) in [
            (Kind::End, false, None),
            (Kind::End, true, Some(Pos { ring: 2, index: 40 })),
            (Kind::Event, false, Some(Pos { ring: 2, index: 40 })),
            (Kind::Annotation, true, None),
        ] {
            let name: Str = if owned { String::from("n").into() } else { "n".into() };
            let plain = ManuallyDrop::new(Plain { kind, clk: 5, id: 3, name, after, fields: () });
            let mut buf = vec![0u64; MAX_WORDS];
            // SAFETY: as above.
            unsafe { Plain::write_to::<false>(&plain, buf.as_mut_ptr(), RING) };
            check(buf.as_mut_ptr(), !owned, &format!("plain {kind:?}, owned name {owned}"));
        }
        // Plain events with fields: the bit follows the name and the fields' values.
        for (owned_name, owned_value) in [(false, false), (false, true), (true, false)] {
            let name: Str = if owned_name { String::from("n").into() } else { "n".into() };
            let text: Str = if owned_value { String::from("v").into() } else { "v".into() };
            let mut fields = ManuallyDrop::new([("a", Value::U64(1)), ("s", Value::Str(text))]);
            let plain = ManuallyDrop::new(Plain {
                kind: Kind::Event,
                clk: 5,
                id: 3,
                name,
                after: None,
                fields: &mut fields,
            });
            let mut buf = vec![0u64; MAX_WORDS];
            // SAFETY: as above; the fields are the line's, moved into the entry.
            unsafe { Plain::write_to::<false>(&plain, buf.as_mut_ptr(), RING) };
            let what =
                format!("plain event with fields, owned name {owned_name}, value {owned_value}");
            check(buf.as_mut_ptr(), !owned_name && !owned_value, &what);
        }
    }

    /// A [`Plain`] event with fields makes the entry [`Line::write_to`] makes of the event with
    /// the same fields pushed one by one: the same header and size, the same line read back, on
    /// the same ring and on another; and a plain line dropped unpushed drops its fields (Miri runs
    /// this module: a field's text leaked or freed twice would be reported).
    #[test]
    fn a_plain_event_with_fields_is_the_entry_of_the_same_line() {
        for after in [None, Some(Pos { ring: RING, index: 3 }), Some(Pos { ring: 2, index: 40 })] {
            for owned in [false, true] {
                let text = || -> Str {
                    match owned {
                        true => String::from("text").into(),
                        false => "text".into(),
                    }
                };
                let mut line = Line::new(Kind::Event, 7, "MEM".into(), after);
                line.clk = 9;
                line.data.push("addr", 4096u64);
                line.data.push("by", text());
                let mut fields =
                    ManuallyDrop::new([("addr", 4096u64.into()), ("by", text().into())]);
                let plain = Plain {
                    kind: Kind::Event,
                    clk: 9,
                    id: 7,
                    name: "MEM".into(),
                    after,
                    fields: &mut fields,
                };
                let text = same_entry::<false, _>(line, plain, &format!("{after:?} owned {owned}"));
                let after = after.filter(|a| a.ring != RING);
                let data = r#"{"addr":4096,"by":"text"}"#;
                assert_eq!(text, format!("Event 9 7 None MEM   {after:?} {data} false"));
            }
        }
        // Dropped without being pushed: the line drops the fields it borrows.
        let mut fields = ManuallyDrop::new([("by", Value::Str(String::from("owned").into()))]);
        let plain = Plain {
            kind: Kind::Event,
            clk: 1,
            id: 1,
            name: "n".into(),
            after: None,
            fields: &mut fields,
        };
        drop(plain);
    }

    #[test]
    fn a_plain_record_is_the_entry_of_the_same_line() {
        let afters = [None, Some(Pos { ring: RING, index: 3 }), Some(Pos { ring: 2, index: 40 })];
        for after in afters {
            // Which of the name, the record type and a field own their text (bits 0, 1, 2).
            for (owned, hold) in (0..8).flat_map(|o| [(o, false), (o, true)]) {
                let text = |part: u32, t: &'static str| -> Str {
                    match owned & 1 << part != 0 {
                        true => String::from(t).into(),
                        false => t.into(),
                    }
                };
                let mut line = Line::new(Kind::Record, 0, text(0, "lw"), after);
                line.clk = 9;
                line.parent = Some(4);
                line.record_type = text(1, "Instruction");
                line.hold = hold;
                line.data.push("pc", 64u64);
                line.data.push("display_label", text(2, "lw"));
                let mut fields = ManuallyDrop::new([
                    ("pc", 64u64.into()),
                    ("display_label", text(2, "lw").into()),
                ]);
                let plain = PlainRecord {
                    clk: 9,
                    id: 0,
                    parent: 4,
                    name: text(0, "lw"),
                    record_type: text(1, "Instruction"),
                    after,
                    hold,
                    fields: &mut fields,
                };
                let what = format!("{after:?} owned {owned} hold {hold}");
                let text = same_entry::<true, _>(line, plain, &what);
                let after = after.filter(|a| a.ring != RING);
                let data = r#"{"pc":64,"display_label":"lw"}"#;
                let want = format!("Record 9 0 Some(4) lw Instruction  {after:?} {data} {hold}");
                assert_eq!(text, want);
            }
        }
        // Dropped without being pushed: the line drops its texts and the fields it borrows.
        let mut fields = ManuallyDrop::new([("by", Value::Str(String::from("owned").into()))]);
        let plain = PlainRecord {
            clk: 1,
            id: 0,
            parent: 1,
            name: String::from("n").into(),
            record_type: String::from("T").into(),
            after: None,
            hold: false,
            fields: &mut fields,
        };
        drop(plain);
    }

    #[test]
    fn every_part_round_trips_and_owned_parts_are_freed() {
        let mut l = Line::new(Kind::Record, 3, String::from("owned name").into(), None);
        l.after = Some(Pos { ring: 2, index: 40 });
        l.parent = Some(1);
        l.hold = true;
        l.record_type = std::sync::Arc::<str>::from("Shared").into();
        l.description = "static".into();
        for i in 0..Data::INLINE + 2 {
            l.data.push("k", Value::Str(format!("v{i}").into()));
        }
        l.data.parse_json(r#"{"z":true}"#).expect("json");
        let (text, words) = round_trip(l);
        assert!(
            text.starts_with(
                "Record 0 3 Some(1) owned name Shared static Some(Pos { ring: 2, index: 40 })"
            ),
            "{text}"
        );
        assert!(text.ends_with(r#""k":"v9","z":true} true"#), "{text}");
        assert_eq!(words, MAX_WORDS);
    }
}
