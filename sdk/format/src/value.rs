//! Typed values for the `data` of lines being written.
//!
//! A simulator's hot path hands the SDK static names and a few numbers. [`Str`] and [`Value`] carry
//! them without allocating, and [`Data`] keeps up to [`Data::INLINE`] fields inline, so emitting a
//! line with a couple of typed fields never touches the allocator. Arbitrary JSON is accepted too
//! (as validated raw text), for data that is not known until run time.

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::sync::Arc;

use super::hints::Color;
use super::json;

/// A string that is static, owned or shared: names on the hot path are usually `&'static str`.
///
/// ```
/// use jets_format::Str;
/// let a: Str = "Decode".into();
/// let b: Str = format!("core{}", 3).into();
/// assert_eq!(&*a, "Decode");
/// assert_eq!(&*b, "core3");
/// ```
#[derive(Clone)]
pub enum Str {
    /// A string with static lifetime: no allocation, no reference count.
    Static(&'static str),
    /// A string owned by this value.
    Owned(Box<str>),
    /// A string shared with others, reference-counted. For a name used on every line,
    /// [`Str::interned`] is cheaper.
    Shared(Arc<str>),
}

impl Str {
    /// The empty string.
    pub const EMPTY: Str = Str::Static("");

    /// True for a [`Str::Static`], which owns nothing.
    #[inline]
    pub fn is_static(&self) -> bool {
        matches!(self, Str::Static(_))
    }

    /// The same text as a [`Str::Static`] kept until the process exits: for a name made once
    /// and used for millions of lines (an instruction's disassembly, a unit's name), which then
    /// costs nothing to pass or to drop. A [`Str::Shared`] name costs a reference count that the
    /// emitting thread increments and the writer thread decrements for every line, a cache line
    /// bounced between their cores which the writer also reads the text from (measured on Tiny5:
    /// a full trace about 8 % slower than with interned names). Each distinct text is kept once: a
    /// second call with the same text returns the first copy. Never freed, so for a bounded set
    /// of names made at start-up, not for text unique to each line.
    ///
    /// ```
    /// use jets_format::Str;
    /// let a = Str::interned(&format!("addi x{}, x0, 1", 5));
    /// let b = Str::interned("addi x5, x0, 1");
    /// assert!(a.is_static());
    /// assert_eq!(a.as_str().as_ptr(), b.as_str().as_ptr()); // one copy
    /// ```
    pub fn interned(text: &str) -> Str {
        use std::collections::HashSet;
        use std::sync::{LazyLock, Mutex};
        static KEPT: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Mutex::default);
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        let kept_text = match kept.get(text) {
            Some(&s) => s,
            None => {
                let s: &'static str = Box::leak(text.into());
                kept.insert(s);
                s
            }
        };
        Str::Static(kept_text)
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match self {
            Str::Static(s) => s,
            Str::Owned(s) => s,
            Str::Shared(s) => s,
        }
    }
}

impl json::Text for Str {
    #[inline(always)]
    fn write_json_str(&self, out: &mut Vec<u8>) {
        match self {
            Str::Static(s) => json::write_static_str(out, s),
            s => json::write_str(out, s),
        }
    }

    #[inline(always)]
    fn clean_bytes(&self) -> Option<&[u8]> {
        match self {
            Str::Static(s) => json::static_is_clean(s).then_some(s.as_bytes()),
            s => json::Text::clean_bytes(&**s),
        }
    }
}

impl Deref for Str {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<&'static str> for Str {
    #[inline]
    fn from(s: &'static str) -> Self {
        Str::Static(s)
    }
}
impl From<String> for Str {
    fn from(s: String) -> Self {
        Str::Owned(s.into_boxed_str())
    }
}
impl From<Box<str>> for Str {
    fn from(s: Box<str>) -> Self {
        Str::Owned(s)
    }
}
impl From<Arc<str>> for Str {
    fn from(s: Arc<str>) -> Self {
        Str::Shared(s)
    }
}
impl From<&Arc<str>> for Str {
    fn from(s: &Arc<str>) -> Self {
        Str::Shared(Arc::clone(s))
    }
}
/// Clones: pass a name held in a table by reference (`&names[i]`), and a builder whose line is
/// left out (capture off, outside a window) never clones it, since builders convert their
/// arguments only when the line will be written.
impl From<&Str> for Str {
    #[inline]
    fn from(s: &Str) -> Self {
        s.clone()
    }
}

/// One typed value of a `data` field.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// JSON `true` / `false`.
    Bool(bool),
    /// A non-negative integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float (`null` in the file when not finite, as JSON has no NaN).
    F64(f64),
    /// A string.
    Str(Str),
    /// A color, written as `"#rrggbb"`.
    Color(Color),
}

impl Value {
    /// Appends this value as JSON.
    #[inline(always)]
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(b) => json::write_bool(out, *b),
            Value::U64(v) => json::write_u64(out, *v),
            Value::I64(v) => json::write_i64(out, *v),
            Value::F64(v) => json::write_f64(out, *v),
            Value::Str(s) => json::Text::write_json_str(s, out),
            // `#rrggbb` never needs escaping: the quoted text in one copy.
            Value::Color(c) => {
                let hex = c.to_hex();
                let mut quoted = [b'"'; 9];
                quoted[1..8].copy_from_slice(hex.as_bytes());
                out.extend_from_slice(&quoted);
            }
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident as $as:ty),* $(,)?) => {$(
        impl From<$t> for Value {
            #[inline]
            fn from(v: $t) -> Self { Value::$variant(v as $as) }
        }
    )*};
}
value_from!(
    u8 => U64 as u64, u16 => U64 as u64, u32 => U64 as u64, u64 => U64 as u64, usize => U64 as u64,
    i8 => I64 as i64, i16 => I64 as i64, i32 => I64 as i64, i64 => I64 as i64, isize => I64 as i64,
    f32 => F64 as f64, f64 => F64 as f64,
);
impl From<bool> for Value {
    #[inline]
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&'static str> for Value {
    #[inline]
    fn from(v: &'static str) -> Self {
        Value::Str(Str::Static(v))
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v.into())
    }
}
impl From<Str> for Value {
    fn from(v: Str) -> Self {
        Value::Str(v)
    }
}
impl From<Arc<str>> for Value {
    fn from(v: Arc<str>) -> Self {
        Value::Str(Str::Shared(v))
    }
}
impl From<Color> for Value {
    fn from(v: Color) -> Self {
        Value::Color(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A typed field with a static key: what [`Data`] keeps inline.
pub type Field = (&'static str, Value);

/// The `data` of a line being written: typed fields, optionally merged with raw JSON.
///
/// Up to [`Data::INLINE`] fields with static keys are stored inline; more spill to the heap,
/// as do a field with an owned key and every field after it (so that fields keep their order).
#[derive(Clone, Debug)]
pub struct Data {
    /// Only the used slots are ever initialized: a line with no data costs nothing here, and the
    /// writer's queue copies only the used ones.
    inline: Inline,
    /// Rare parts live behind one pointer, so the common case stays small to copy.
    extra: Option<Box<DataExtra>>,
}

/// The inline fields of a [`Data`], in order: the first `len` slots are initialized.
///
/// `len`'s high bit ([`SPILLED`]) says that a field went to the spill, so every later one goes
/// there too (the order of fields is kept): a push then asks one question, `len < INLINE`, for
/// both "full" and "spilled".
struct Inline {
    len: u32,
    /// Set once a field owns memory (a text that is not static): [`Data::owns_nothing`] then
    /// answers from this and `extra` instead of scanning the fields. It sits in the padding
    /// after `len`, so `Data` keeps its size.
    owns: bool,
    xs: [MaybeUninit<Field>; Data::INLINE],
}

/// See [`Inline`].
const SPILLED: u32 = 1 << 31;

impl Inline {
    const fn new() -> Inline {
        Inline { len: 0, owns: false, xs: [const { MaybeUninit::uninit() }; Data::INLINE] }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        (self.len & !SPILLED) as usize
    }

    #[inline(always)]
    fn as_slice(&self) -> &[Field] {
        // SAFETY: the first `len()` slots are initialized.
        unsafe { std::slice::from_raw_parts(self.xs.as_ptr().cast::<Field>(), self.len()) }
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        let fields =
            std::ptr::slice_from_raw_parts_mut(self.xs.as_mut_ptr().cast::<Field>(), self.len());
        // SAFETY: the first `len()` slots are initialized, and dropped only here.
        unsafe { std::ptr::drop_in_place(fields) };
    }
}

impl Clone for Inline {
    fn clone(&self) -> Inline {
        let mut copy = Inline::new();
        for (slot, field) in copy.xs.iter_mut().zip(self.as_slice()) {
            slot.write(field.clone());
            copy.len += 1; // counted as it goes, so that a panicking clone drops only these
        }
        copy.len = self.len;
        copy.owns = self.owns;
        copy
    }
}

impl fmt::Debug for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The rare parts of a [`Data`]: fields with owned keys or beyond [`Data::INLINE`], raw JSON.
/// Opaque; public only so that a writer can move a `Data` through its queue in parts.
#[derive(Clone, Debug, Default)]
pub struct DataExtra {
    spill: Vec<(Str, Value)>,
    /// Checked JSON text on one line ([`one_line`]).
    json: Option<Box<str>>,
}

/// A [`Data`] taken apart: its inline fields and its rare parts, borrowed. The writer encodes
/// lines from this view in place, where its queue holds them.
#[derive(Clone, Copy, Debug)]
pub struct DataRef<'a> {
    /// The inline fields, in order.
    pub inline: &'a [Field],
    /// The rare parts, if any.
    pub extra: Option<&'a DataExtra>,
}

impl DataRef<'_> {
    fn spill(&self) -> &[(Str, Value)] {
        self.extra.map_or(&[], |e| &e.spill)
    }

    fn json(&self) -> Option<&str> {
        self.extra.and_then(|e| e.json.as_deref())
    }

    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.inline.is_empty() && self.spill().is_empty() && self.json().is_none()
    }

    /// True when the data would be written as a JSON object (or is empty).
    pub fn is_object(&self) -> bool {
        self.json().is_none_or(|raw| raw.starts_with('{'))
    }

    /// True when the data owns no memory: static keys and numbers, booleans, colors or static
    /// strings only. Dropping such a `Data` frees nothing, so a caller that discards many may
    /// skip its drop (see `jets::write::record::drop_line`).
    #[inline]
    pub fn owns_nothing(&self) -> bool {
        self.extra.is_none()
            && self.inline.iter().all(|(_, v)| !matches!(v, Value::Str(s) if !s.is_static()))
    }

    /// The typed fields in the order they were added.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        let inline = self.inline.iter().map(|(k, v)| (*k, v));
        inline.chain(self.spill().iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// The execution unit the written data names: its `unit_id` member as a JSON reader reads
    /// it, when that is a non-negative integer. The raw JSON's members are written after the
    /// typed fields ([`DataRef::write_json`]), so where both name one, a reader, which keeps a
    /// member's last value, sees the raw JSON's, and so does this.
    ///
    /// ```
    /// let mut d = jets_format::Data::new();
    /// d.push("unit_id", 2u64);
    /// assert_eq!(d.as_ref().unit_id(), Some(2));
    /// d.parse_json(r#"{"unit_id": 3, "pc": 64}"#).unwrap();
    /// assert_eq!(d.as_ref().unit_id(), Some(3));
    /// ```
    pub fn unit_id(&self) -> Option<u64> {
        const KEY: &str = "unit_id";
        let typed = || {
            self.fields().filter(|(k, _)| *k == KEY).last().and_then(|(_, v)| match v {
                Value::U64(u) => Some(*u),
                Value::I64(i) => u64::try_from(*i).ok(),
                _ => None,
            })
        };
        match self.json().map(|raw| member_of_object(raw, KEY)) {
            Some(Some(v)) => v.as_u64(),
            _ => typed(),
        }
    }

    /// Appends the data as one JSON value: the raw JSON when it is the only content, otherwise an
    /// object holding the typed fields followed by the raw object's own members.
    ///
    /// Call only when [`DataRef::is_object`] holds or there are no typed fields.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        if self.extra.is_none() {
            // Typed fields with static keys only, the common case: each key's comma is known
            // from its place, and no iterator chains the (empty) spilled fields on.
            out.push(b'{');
            for (i, (k, v)) in self.inline.iter().enumerate() {
                json::write_static_member_key(out, k, i > 0);
                v.write_json(out);
            }
            out.push(b'}');
            return;
        }
        let raw = self.json();
        if self.inline.is_empty() && self.spill().is_empty() {
            if let Some(raw) = raw {
                out.extend_from_slice(raw.as_bytes());
                return;
            }
        }
        out.push(b'{');
        for (k, v) in self.fields() {
            json::write_key(out, k);
            v.write_json(out);
        }
        if let Some(raw) = raw {
            // `raw` is a validated object: `{` members `}`. Splice its members in after ours.
            let inner = raw[1..raw.len() - 1].trim();
            if !inner.is_empty() {
                if !matches!(out.last(), Some(b'{')) {
                    out.push(b',');
                }
                out.extend_from_slice(inner.as_bytes());
            }
        }
        out.push(b'}');
    }
}

impl Default for Data {
    fn default() -> Self {
        Data::new()
    }
}

impl Data {
    /// How many fields with static keys are kept without allocating (hints included).
    pub const INLINE: usize = 8;

    /// No data.
    pub const fn new() -> Self {
        Data { inline: Inline::new(), extra: None }
    }

    /// Writes an empty `Data` at `dst` (as [`Data::new`]) without copying the room for inline
    /// fields, which stays uninitialized: a writer builds lines in reused storage, and a
    /// `dst.write(Data::new())` may copy all of that room.
    ///
    /// # Safety
    /// `dst` is valid for writing a `Data` and aligned; what it held is overwritten, not dropped.
    #[inline(always)]
    pub unsafe fn init(dst: *mut Data) {
        // SAFETY: per the contract; both fields are written, the array's slots need no value.
        unsafe {
            std::ptr::addr_of_mut!((*dst).extra).write(None);
            std::ptr::addr_of_mut!((*dst).inline.len).write(0);
            std::ptr::addr_of_mut!((*dst).inline.owns).write(false);
        }
    }

    /// Adds a field. Later fields with the same key are written too; readers keep the last.
    #[inline(always)]
    pub fn push(&mut self, key: impl Into<Str>, value: impl Into<Value>) {
        // `ManuallyDrop`: the static arm owns nothing, and the other moves the key on, so no
        // drop check of the key is left for the compiler to emit.
        let key = std::mem::ManuallyDrop::new(key.into());
        match *key {
            Str::Static(k) if self.inline.len < Data::INLINE as u32 => {
                // The value is made here, in the one branch that uses it, so it is stored
                // straight into its slot. Made before the branch, it lived on the stack and was
                // copied with a 16-byte load of an 8-byte store just made, which the CPU cannot
                // forward: a stall of several nanoseconds per field.
                let len = self.inline.len;
                let field = self.inline.xs[len as usize].write((k, value.into()));
                // Known when the value is made: a number or a static text (most fields) owns
                // nothing, and this test is compiled out.
                if matches!(&field.1, Value::Str(s) if !s.is_static()) {
                    self.inline.owns = true;
                }
                self.inline.len = len + 1;
            }
            _ => self.push_spilled(std::mem::ManuallyDrop::into_inner(key), value.into()),
        }
    }

    /// Adds `fields`, in order, as [`Data::push`] adds them one by one; when they fit in the
    /// inline room (the usual case) they are moved there in one copy.
    ///
    /// ```
    /// let mut d = jets_format::Data::new();
    /// d.push("a", 1u64);
    /// d.push_all([("b", 2u64.into()), ("c", true.into())]);
    /// assert_eq!(d.fields().map(|(k, _)| k).collect::<Vec<_>>(), ["a", "b", "c"]);
    /// ```
    #[inline(always)]
    pub fn push_all<const N: usize>(&mut self, fields: [Field; N]) {
        let len = self.inline.len as usize; // above `INLINE` once spilled
        if len + N > Data::INLINE {
            for (k, v) in fields {
                self.push(k, v);
            }
            return;
        }
        // SAFETY: slots `len..len + N` are within the array (checked above) and unused; the
        // array's fields move there and are counted by `len` from now on.
        let moved = unsafe {
            let at = self.inline.xs.as_mut_ptr().add(len).cast::<[Field; N]>();
            at.write(fields);
            &*at
        };
        // Asked of the fields where they now are: the array can then be made in place (a closure
        // inlined into the write) rather than on the stack and copied over.
        let owns = moved.iter().any(|(_, v)| matches!(v, Value::Str(s) if !s.is_static()));
        self.inline.len = (len + N) as u32;
        self.inline.owns |= owns;
    }

    /// A field with an owned key, or beyond [`Data::INLINE`] fields.
    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, key: Str, value: Value) {
        self.inline.len |= SPILLED;
        self.extra.get_or_insert_with(Box::default).spill.push((key, value));
    }

    /// The data, borrowed in parts.
    #[inline]
    pub fn as_ref(&self) -> DataRef<'_> {
        DataRef { inline: self.inline.as_slice(), extra: self.extra.as_deref() }
    }

    /// Copies the inline fields bitwise to `dst` and returns how many there are; the copies own
    /// what the fields own. Nothing is reset here, so the caller must forget `self` afterwards:
    /// neither use nor drop it (a writer moves a line out of storage it then treats as
    /// uninitialized, and a store to mark the fields moved would be wasted work).
    ///
    /// # Safety
    /// `dst` must be valid for writing `self.as_ref().inline.len()` fields, aligned for
    /// [`Field`], and not overlap `self`. The caller owns the copied fields (drops them once) and
    /// does not use or drop `self` afterwards (see [`Data::read_extra`] for its other part).
    #[inline(always)]
    pub unsafe fn read_inline_to(&self, dst: *mut Field) -> usize {
        const WORDS: usize = std::mem::size_of::<Field>() / 8;
        let n = self.inline.len();
        let src = self.inline.xs.as_ptr().cast::<MaybeUninit<u64>>();
        let dst = dst.cast::<MaybeUninit<u64>>();
        // One 8-byte word at a time, each read on its own (volatile, so the compiler neither
        // calls `memcpy` nor merges the reads into 16- or 32-byte loads): the fields were just
        // stored a word at a time, and a wider load over several recent stores cannot be
        // forwarded from them, which stalls until they reach the cache. `MaybeUninit` words:
        // a field's unused bytes are copied as they are, pointers keep their provenance. The
        // first two fields, the usual case, are copied without a loop (its setup and counting
        // cost about as many instructions as copying one field).
        let copy = |f: usize| {
            // SAFETY: per the contract, field `f < n` is readable at `src` (`Field` is a whole
            // number of words, asserted in the tests) and writable at `dst`.
            unsafe {
                let (src, dst) = (src.add(f * WORDS), dst.add(f * WORDS));
                for w in 0..WORDS {
                    dst.add(w).write(src.add(w).read_volatile());
                }
            }
        };
        if n > 0 {
            copy(0);
            if n > 1 {
                copy(1);
                (2..n).for_each(copy);
            }
        }
        n
    }

    /// The rare parts, read bitwise: the result owns them, so, as for [`Data::read_inline_to`],
    /// the caller must not use or drop `self` afterwards.
    ///
    /// # Safety
    /// As for [`Data::read_inline_to`]: `self` is forgotten afterwards.
    #[inline(always)]
    pub unsafe fn read_extra(&self) -> Option<Box<DataExtra>> {
        // SAFETY: per the contract, the box is owned by the result alone from now on.
        unsafe { std::ptr::read(&self.extra) }
    }

    /// Parses and sets raw JSON data: JSON that trace readers accept, or an error (WR-DATA-2:
    /// not `1e999`, a lone surrogate escape, or nesting of 128 levels or more, which `serde_json`
    /// reads past as raw text but refuses as a value).
    ///
    /// ```
    /// let mut d = jets_format::Data::new();
    /// d.parse_json(r#"{"x": 1}"#).unwrap();
    /// assert!(d.parse_json("{oops").is_err());
    /// assert!(d.parse_json(r#"{"x": 1e999}"#).is_err());
    /// ```
    pub fn parse_json(&mut self, text: &str) -> Result<(), serde_json::Error> {
        check_json(text)?;
        self.extra.get_or_insert_with(Box::default).json = Some(one_line(text));
        Ok(())
    }

    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.as_ref().is_empty()
    }

    /// True when the data would be written as a JSON object (or is empty).
    #[inline]
    pub fn is_object(&self) -> bool {
        // Typed fields alone always are: the common case answers without a call.
        self.extra.is_none() || self.as_ref().is_object()
    }

    /// As [`DataRef::owns_nothing`], without looking at the fields: a flag set when one that
    /// owns something is added says it (a builder's line is discarded this way once per record
    /// that capture deferred and never needed, CAP-DEFER-1, where the scan was most of the cost).
    ///
    /// The SDK's writer trusts it too (an entry's "owns nothing" header bit, from which the entry
    /// is not dropped): any new way of filling the inline fields, or a new `Value` that owns
    /// memory, must keep the flag right, or what it owns leaks.
    #[inline]
    pub fn owns_nothing(&self) -> bool {
        self.extra.is_none() && !self.inline.owns
    }

    /// The typed fields in the order they were added.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        let inline = self.inline.as_slice().iter().map(|(k, v)| (*k, v));
        let spill = self.extra.as_deref().map_or(&[][..], |e| &e.spill);
        inline.chain(spill.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// Appends the data as one JSON value: the raw JSON when it is the only content, otherwise an
    /// object holding the typed fields followed by the raw object's own members.
    ///
    /// Call only when [`Data::is_object`] holds or there are no typed fields.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.as_ref().write_json(out)
    }
}

/// The last value of `key` among the members of `raw`, when `raw` is an object (validated JSON
/// text); the other members are skipped unparsed, and no key is copied.
fn member_of_object(raw: &str, key: &str) -> Option<serde_json::Value> {
    use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, Visitor};

    /// Reads a member's key as whether it is `self.0`.
    struct IsKey<'k>(&'k str);

    impl<'de> DeserializeSeed<'de> for IsKey<'_> {
        type Value = bool;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_str(self)
        }
    }

    impl Visitor<'_> for IsKey<'_> {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a member's key")
        }

        fn visit_str<E: Error>(self, k: &str) -> Result<bool, E> {
            Ok(k == self.0)
        }
    }

    /// Reads an object as the last value of its member `self.0`.
    struct Member<'k>(&'k str);

    impl<'de> Visitor<'de> for Member<'_> {
        type Value = Option<serde_json::Value>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(is_key) = map.next_key_seed(IsKey(self.0))? {
                if is_key {
                    found = Some(map.next_value()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }

    let mut de = serde_json::Deserializer::from_str(raw);
    de.deserialize_map(Member(key)).ok().flatten()
}

/// Checks that `text` is JSON that readers of a trace accept: what `serde_json` parses into a
/// value (`jets stats`, `jets convert` and the validator read lines so), found without making
/// the value (WR-DATA-2). A raw value alone is not enough: `serde_json` reads past a number out
/// of a double's range (`1e999`), a lone UTF-16 surrogate escape (`"\ud800"`) and nesting
/// of 128 levels or more as raw text, and a trace holding one is refused by every reader.
///
/// The same parser does the work with a visitor that keeps nothing, so the two cannot disagree:
/// numbers, strings and keys are decoded (and refused) exactly as for a value, and the depth
/// limit is the parser's own. Making the value instead, as the C API did, allocated for every
/// map, key and string (WR-DATA-2 has what that cost a C event).
///
/// ```
/// assert!(jets_format::check_json(r#"{"pc": 4096, "ok": [true, null, "é"]}"#).is_ok());
/// assert!(jets_format::check_json("1e999").is_err());
/// assert!(jets_format::check_json(r#""\ud800""#).is_err());
/// ```
pub fn check_json(text: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Readable>(text).map(drop)
}

/// `text`, JSON that [`check_json`] accepted, as text for one line of a JSON Lines file
/// (WR-DATA-3): without the whitespace at its ends and, when it holds a line break (pretty-printed
/// JSON), without any whitespace between its tokens. A line break can only be between tokens:
/// JSON strings hold theirs escaped. Written as given, pretty-printed data split its line in
/// several, and the file was no longer JSON Lines.
fn one_line(text: &str) -> Box<str> {
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let text = text.trim_matches(blank);
    if !text.bytes().any(|b| b == b'\n' || b == b'\r') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if blank(c) {
            continue;
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out.into_boxed_str()
}

/// Any JSON value a reader accepts, read and thrown away: deserializing one checks a value as
/// making a `serde_json::Value` would (strings and keys decoded, so a lone surrogate is an error;
/// numbers converted, so one beyond a double's range is an error; the parser's depth limit)
/// without keeping anything. serde's `IgnoredAny` would skip both unchecked. [`check_json`]
/// parses with it, and the validator reads with it the members it does not keep (spec/rules.md,
/// JV1 and JV3), so the writer and the validator refuse the same values.
///
/// ```
/// let ok = serde_json::from_str::<jets_format::Readable>(r#"{"a": [1, "x"]}"#);
/// assert!(ok.is_ok());
/// assert!(serde_json::from_str::<jets_format::Readable>("[1e999]").is_err());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Readable;

impl<'de> serde::Deserialize<'de> for Readable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Readable)
    }
}

impl<'de> serde::de::Visitor<'de> for Readable {
    type Value = Readable;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_str<E>(self, _: &str) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_unit<E>(self) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_none<E>(self) -> Result<Readable, E> {
        Ok(Readable)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Readable, A::Error> {
        while items.next_element::<Readable>()?.is_some() {}
        Ok(Readable)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut members: A) -> Result<Readable, A::Error> {
        while members.next_entry::<Readable, Readable>()?.is_some() {}
        Ok(Readable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a reader makes of the text: the referee of [`check_json`].
    fn a_reader_accepts(text: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(text).is_ok()
    }

    #[test]
    fn check_json_accepts_what_a_reader_accepts_and_parse_json_refuses_the_rest() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let cases = [
            ("{}", true),
            (r#"{"pc":4096,"latency":3}"#, true),
            (r#" { "a" : [1, -2, 3.5e10, true, false, null, "x\"\n\u00e9"] } "#, true),
            ("18446744073709551616", true), // past u64: a double, as a reader reads it
            ("-9223372036854775809", true),
            ("1e308", true),
            (r#""\ud83d\ude00""#, true), // a surrogate pair
            (r#"{"a":1,"a":2}"#, true),  // a repeated key: the last wins, for a reader too
            ("1e999", false),
            ("-1e999", false),
            (r#"{"x":[1e400]}"#, false),
            (r#""\ud800""#, false),
            (r#""\udc00x""#, false),
            (r#"{"\ud800":1}"#, false), // in a key too
            ("{oops", false),
            ("[1,]", false),
            ("NaN", false),
            ("", false),
            ("1 2", false),
        ];
        let mut cases: Vec<(String, bool)> =
            cases.iter().map(|(t, ok)| (t.to_string(), *ok)).collect();
        // A reader takes 127 levels of nesting and refuses 128 (`serde_json`'s depth limit).
        cases.push((deep(127), true));
        cases.push((deep(128), false));
        cases.push((format!(r#"{{"a":{}}}"#, deep(126)), true));
        cases.push((format!(r#"{{"a":{}}}"#, deep(127)), false));
        for (text, ok) in &cases {
            assert_eq!(a_reader_accepts(text), *ok, "the case is wrong: {text:.40}");
            assert_eq!(check_json(text).is_ok(), *ok, "{text:.40}");
            let mut d = Data::new();
            assert_eq!(d.parse_json(text).is_ok(), *ok, "{text:.40}");
            assert_eq!(d.is_empty(), !ok, "data set only when accepted: {text:.40}");
        }
    }

    /// The data as written, and what a reader makes of it.
    fn written(text: &str) -> (String, serde_json::Value) {
        let mut d = Data::new();
        d.parse_json(text).expect("json");
        let mut out = Vec::new();
        d.as_ref().write_json(&mut out);
        let out = String::from_utf8(out).expect("utf8");
        let read = serde_json::from_str(&out).expect("written data reads");
        (out, read)
    }

    #[test]
    fn pretty_printed_json_is_written_on_one_line() {
        let pretty = "\r\n {\n  \"a\": 1,\n\t\"s\": \"two words, \\\"quoted\\\" \\n \\\\\",\r\n  \"b\": [\n    1,\n    2\n  ]\n}\n";
        let (out, read) = written(pretty);
        assert_eq!(out, r#"{"a":1,"s":"two words, \"quoted\" \n \\","b":[1,2]}"#);
        assert_eq!(read, serde_json::from_str::<serde_json::Value>(pretty).expect("json"));
        // On one line already: left as it was, but for its ends.
        assert_eq!(written(" { \"a\" : [1, 2] } ").0, r#"{ "a" : [1, 2] }"#);
        // Merged with typed fields, too.
        let mut d = Data::new();
        d.push("pc", 4u64);
        d.parse_json("{\n \"x\": [\n true\n ]\n}").expect("json");
        let mut out = Vec::new();
        d.as_ref().write_json(&mut out);
        assert_eq!(String::from_utf8(out).expect("utf8"), r#"{"pc":4,"x":[true]}"#);
    }

    proptest::proptest! {
        /// Any value, pretty-printed: written on one line, and read back as the same value.
        #[test]
        #[cfg_attr(miri, ignore = "safe code only; proptest reads the working directory")]
        fn any_pretty_json_is_one_line_with_the_same_value(
            keys in proptest::collection::vec("[a-z\" \\\\\n]{0,6}", 0..5),
            words in proptest::collection::vec("[ -~\n\t\u{e9}]{0,8}", 0..5),
            n in proptest::num::i64::ANY,
        ) {
            let inner: serde_json::Map<_, _> =
                words.iter().map(|w| (w.clone(), serde_json::json!([w, n, null]))).collect();
            let value: serde_json::Value = keys
                .iter()
                .map(|k| (k.clone(), serde_json::Value::Object(inner.clone())))
                .collect::<serde_json::Map<_, _>>()
                .into();
            let pretty = serde_json::to_string_pretty(&value).expect("json");
            let (out, read) = written(&pretty);
            proptest::prop_assert!(!out.contains(['\n', '\r']), "{}", out);
            proptest::prop_assert_eq!(read, value);
        }

        /// Any text, and any text made of JSON's own pieces: `check_json` and a reader agree.
        #[test]
        #[cfg_attr(miri, ignore = "safe code only; proptest reads the working directory")]
        fn check_json_agrees_with_a_reader(
            text in proptest::string::string_regex(
                r#"[\[\]{}:, "a\\u0-9ed.+\-]{0,40}|(\[|\{"k":){0,4}(-?[0-9]{1,3}(\.[0-9])?(e[+-]?[0-9]{1,3})?|"(\\u[dD][89aAbBcCfF][0-9a-f]{2}|[a-z])*"|true|null)[\]}]{0,4}"#
            ).expect("regex"),
        ) {
            proptest::prop_assert_eq!(check_json(&text).is_ok(), a_reader_accepts(&text), "{}", text);
        }
    }

    #[test]
    fn push_all_adds_what_pushes_one_by_one_add() {
        let owned = || Value::Str(String::from("owned").into());
        let cases: [(usize, bool); 4] = [(0, false), (0, true), (6, true), (7, false)];
        for (before, own) in cases {
            let (mut one, mut all) = (Data::new(), Data::new());
            for i in 0..before as u64 {
                one.push("n", i);
                all.push("n", i);
            }
            // The last two overflow the inline room after 7 (pushed one by one, then spilled).
            let v = if own { owned() } else { Value::Str("static".into()) };
            one.push("a", 1u64);
            one.push("s", v.clone());
            all.push_all([("a", 1u64.into()), ("s", v)]);
            let text = |d: &Data| d.fields().map(|(k, v)| format!("{k}={v:?}")).collect::<Vec<_>>();
            assert_eq!(text(&one), text(&all), "{before} {own}");
            assert_eq!(one.owns_nothing(), all.owns_nothing(), "{before} {own}");
            assert_eq!(all.owns_nothing(), !own && before + 2 <= Data::INLINE, "{before} {own}");
        }
    }

    #[test]
    fn data_owns_nothing_only_with_static_texts_and_plain_values() {
        // `Data` answers from a flag, `DataRef` by looking at the fields: they agree.
        let owns_nothing = |d: &Data| {
            assert_eq!(d.owns_nothing(), d.as_ref().owns_nothing(), "{d:?}");
            d.owns_nothing()
        };
        let mut d = Data::new();
        assert!(owns_nothing(&d));
        d.push("pc", 4u64);
        d.push("label", "ADD");
        d.push("color", Color::rgb(0x010203));
        assert!(owns_nothing(&d));
        let mut owned = d.clone();
        owned.push("name", String::from("x1"));
        assert!(!owns_nothing(&owned));
        owned.push("after", 1u64);
        assert!(!owns_nothing(&owned.clone()), "a clone owns what its original owns");
        let mut shared = d.clone();
        shared.push("name", Str::Shared("x2".into()));
        assert!(!owns_nothing(&shared));
        let mut spilled = d.clone();
        spilled.push(String::from("owned_key"), 1u64);
        assert!(!owns_nothing(&spilled), "a spilled field lives behind a box");
        let mut reused = std::mem::ManuallyDrop::new(owned);
        // SAFETY: dropped once, then made anew in place (as a writer reuses a line's storage),
        // and dropped again as the new value.
        unsafe {
            std::ptr::drop_in_place(&raw mut *reused);
            Data::init(&raw mut *reused);
        }
        assert!(owns_nothing(&reused), "made anew, it owns nothing");
        // SAFETY: `reused` holds the new value, dropped once.
        unsafe { std::mem::ManuallyDrop::drop(&mut reused) };
        let mut json = Data::new();
        json.parse_json("{}").expect("json");
        assert!(!owns_nothing(&json), "raw JSON is owned");
    }

    fn enc(d: &Data) -> String {
        let mut out = Vec::new();
        d.write_json(&mut out);
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn inline_and_spilled_fields_keep_order() {
        let mut d = Data::new();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
        for (i, k) in keys.into_iter().enumerate() {
            d.push(k, i as u64);
        }
        assert_eq!(d.as_ref().inline.len(), Data::INLINE, "the first eight are inline");
        let expected = r#"{"a":0,"b":1,"c":2,"d":3,"e":4,"f":5,"g":6,"h":7,"i":8,"j":9}"#;
        assert_eq!(enc(&d), expected);
    }

    #[test]
    fn a_field_after_a_spilled_one_keeps_its_place() {
        let mut d = Data::new();
        d.push("a", 1u8);
        d.push(String::from("b"), 2u8);
        d.push("c", 3u8);
        assert_eq!(d.as_ref().inline.len(), 1, "after a spill, every field spills");
        assert_eq!(enc(&d), r#"{"a":1,"b":2,"c":3}"#);
        let mut copy = d.clone();
        copy.push("d", 4u8);
        assert_eq!(enc(&copy), r#"{"a":1,"b":2,"c":3,"d":4}"#, "a clone keeps spilling");
        let mut json = Data::new();
        json.parse_json(r#"{"z":0}"#).expect("json");
        json.push("k", 1u8);
        assert_eq!(json.as_ref().inline.len(), 1, "raw JSON alone does not spill fields");
        assert_eq!(enc(&json), r#"{"k":1,"z":0}"#);
    }

    #[test]
    fn typed_values_and_merged_json() {
        let mut d = Data::new();
        d.push("s", "x\"y");
        d.push("f", 1.5);
        d.push("n", -3i32);
        d.push("b", true);
        d.parse_json(r#" { "z" : [1, 2] } "#).expect("json");
        assert_eq!(enc(&d), r#"{"s":"x\"y","f":1.5,"n":-3,"b":true,"z" : [1, 2]}"#);
        let v: serde_json::Value = serde_json::from_str(&enc(&d)).expect("valid json");
        assert_eq!(v["z"][1], 2);
    }

    /// Inline fields alone take the short path: every kind of value, at its extremes, spelled
    /// as serde_json spells the same object (colors as `#rrggbb`).
    #[test]
    fn inline_fields_of_every_kind_encode_like_serde_json() {
        let mut d = Data::new();
        assert_eq!(enc(&d), "{}");
        d.push("n", Value::Null);
        d.push("t", true);
        d.push("u", u64::MAX);
        d.push("i", i64::MIN);
        d.push("f", -0.25);
        d.push("s", "tab\there \"q\"");
        d.push("color", Color::rgb(0x0a0b0c));
        d.push("c", Color::rgb(0xffffff));
        assert!(d.as_ref().extra.is_none(), "eight fields stay inline");
        let expected = serde_json::json!({
            "n": null, "t": true, "u": u64::MAX, "i": i64::MIN, "f": -0.25,
            "s": "tab\there \"q\"", "color": "#0a0b0c", "c": "#ffffff"
        });
        assert_eq!(enc(&d), serde_json::to_string(&expected).expect("ser"));
    }

    #[test]
    fn raw_non_object_alone() {
        let mut d = Data::new();
        d.parse_json("[1,2]").expect("json");
        assert!(!d.is_object());
        assert_eq!(enc(&d), "[1,2]");
        let mut e = Data::new();
        e.parse_json("{}").expect("json");
        e.push("k", 1u8);
        assert_eq!(enc(&e), r#"{"k":1}"#);
    }

    #[test]
    fn data_stays_small() {
        assert!(std::mem::size_of::<Value>() <= 24, "{}", std::mem::size_of::<Value>());
        // A builder holds a Data on the stack; the writer's queue copies only the used fields.
        assert!(std::mem::size_of::<Data>() <= 512, "{}", std::mem::size_of::<Data>());
        assert_eq!(std::mem::size_of::<Field>(), 40);
    }
}
