//! What a line carries besides its ids and clk, from C arguments: names, description, `data` JSON
//! text and typed fields. Pointers, NULL, UTF-8, interned handles and field kinds are checked at
//! the call, before the record's lock is taken and before anything is queued; what only a written
//! line needs (copies of text, the JSON parse: [`Text::apply`], [`Checked::fill`]) is done in the
//! builder's `with`, for a line capture does not leave out (CA-JSON-2).

use std::ffi::c_char;
use std::mem::MaybeUninit;

use jets::format::{Data, Str, Value};
use jets::write::{AnnotationBuilder, EventBuilder, RecordBuilder};

use crate::codes::JETS_ERR_INVALID_JSON;
use crate::cstr;
use crate::failure::{Failure, Msg};
use crate::intern;
use crate::types::*;

/// A line's description and data, checked.
pub(crate) struct Parts {
    description: Option<Str>,
    data: Option<Data>,
}

impl Parts {
    /// Sets them on a builder.
    #[inline(always)]
    pub(crate) fn apply<B: Describe>(self, mut b: B) -> B {
        if let Some(d) = self.description {
            b = b.describe(d);
        }
        if let Some(data) = self.data {
            b = b.with_data(data);
        }
        b
    }
}

/// The builder methods shared by records, events and annotations.
pub(crate) trait Describe: Sized {
    /// The builder's `with`: `f` runs only if the builder holds a line.
    fn when_made(self, f: impl FnOnce(Self) -> Self) -> Self;
    fn describe(self, text: Str) -> Self;
    fn with_data(self, data: Data) -> Self;
    fn typed(self, field: (&'static str, Value)) -> Self;
}

macro_rules! describe {
    ($($builder:ident),*) => {$(
        impl Describe for $builder<'_> {
            #[inline(always)]
            fn when_made(self, f: impl FnOnce(Self) -> Self) -> Self {
                self.with(f)
            }
            #[inline(always)]
            fn describe(self, text: Str) -> Self {
                self.description(text)
            }
            #[inline(always)]
            fn with_data(self, data: Data) -> Self {
                self.data(data)
            }
            #[inline(always)]
            fn typed(self, (key, value): (&'static str, Value)) -> Self {
                self.field(key, value)
            }
        }
    )*};
}
describe!(RecordBuilder, EventBuilder, AnnotationBuilder);

fn parse_json(data: &mut Data, text: &str, what: &str) -> Result<(), Failure> {
    // Only JSON that trace readers accept (CA-JSON-1): `Data::parse_json` refuses the rest
    // (WR-DATA-2), which `serde_json` would otherwise read past as raw text.
    data.parse_json(text).map_err(|e| {
        Failure::new(
            JETS_ERR_INVALID_JSON,
            format!("{what} is not JSON that trace readers accept: {e}"),
        )
    })
}

/// The plain-string arguments `description` and `data_json` (both optional), read as text: their
/// copy and the JSON parse wait for a builder that holds a line ([`Text::apply`]).
pub(crate) struct Text<'a> {
    description: Option<&'a str>,
    json: Option<&'a str>,
}

/// Reads the plain-string arguments `description` and `data_json` (both optional): NULL and
/// UTF-8 are checked here, at the call, whatever capture then does with the line.
///
/// # Safety
/// Both are NULL or NUL-terminated strings, alive while the result is.
pub(crate) unsafe fn text<'a>(
    description: *const c_char,
    data_json: *const c_char,
) -> Result<Text<'a>, Failure> {
    // SAFETY: forwarded from the caller.
    let description = unsafe { cstr::optional(description, "description") }?;
    // SAFETY: forwarded from the caller.
    let json = unsafe { cstr::optional(data_json, "data_json") }?;
    Ok(Text { description, json })
}

impl Text<'_> {
    /// Sets the description and data on `b` if it holds a line: a line capture leaves out costs
    /// no copy and no JSON parse, and its JSON is not judged (rule CA-JSON-2).
    pub(crate) fn apply<B: Describe>(self, b: B) -> Result<B, Failure> {
        let mut failed = None;
        let b = b.when_made(|b| match self.parts() {
            Ok(parts) => parts.apply(b),
            Err(e) => {
                failed = Some(e);
                b
            }
        });
        failed.map_or(Ok(b), Err)
    }

    fn parts(self) -> Result<Parts, Failure> {
        let data = match self.json {
            Some(json) => {
                let mut data = Data::new();
                parse_json(&mut data, json, "data_json")?;
                Some(data)
            }
            None => None,
        };
        Ok(Parts { description: self.description.map(|d| Str::from(d.to_owned())), data })
    }
}

/// `sizeof(jets_attrs)` of the first version (up to `data_json`): still accepted.
const FIRST_SIZE: usize = std::mem::offset_of!(jets_attrs, domain);

/// A `jets_attrs` read from C, its size checked.
pub(crate) struct Attrs(jets_attrs);

impl Attrs {
    /// Reads `*p`.
    ///
    /// # Safety
    /// `p` is NULL or points to a `jets_attrs` whose `size` says how many bytes are valid.
    pub(crate) unsafe fn read(p: *const jets_attrs) -> Result<Attrs, Failure> {
        if p.is_null() {
            return Err(Failure::invalid("attrs is NULL"));
        }
        // SAFETY: `size` is the first member of every version of the struct.
        let size = unsafe { std::ptr::read_unaligned(p.cast::<u32>()) } as usize;
        if size < FIRST_SIZE {
            return Err(Failure::invalid(format!(
                "attrs->size is {size}, expected at least {FIRST_SIZE} (initialize with JETS_ATTRS_INIT)"
            )));
        }
        let ours = std::mem::size_of::<jets_attrs>();
        if size >= ours {
            // The common case, a struct of this version or a newer one: a fixed-size copy.
            // SAFETY: the caller's struct has at least `ours` valid bytes, laid out as ours; every
            // member is plain data valid for any bits it can get from C.
            return Ok(Attrs(unsafe { std::ptr::read_unaligned(p) }));
        }
        // An older, shorter version: the members it lacks stay zero (no domain, the trace clock).
        // (The copy below overwrites `size` too: the caller's is at least `FIRST_SIZE`.)
        let mut a = jets_attrs::default();
        // SAFETY: the caller's struct has `size` valid bytes, fewer than ours; every member is
        // plain data valid for any bits it can get from a C struct of the same layout.
        unsafe {
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&mut a as *mut jets_attrs).cast(), size)
        };
        Ok(Attrs(a))
    }

    /// The domain named (0: none).
    pub(crate) fn domain(&self) -> jets_domain {
        self.0.domain
    }

    /// The clock named (0: the trace's).
    pub(crate) fn clock(&self) -> jets_clock {
        self.0.clock
    }

    pub(crate) fn name(&self) -> Result<&'static str, Failure> {
        required(self.0.name, "attrs->name")
    }

    pub(crate) fn record_type(&self) -> Result<&'static str, Failure> {
        required(self.0.record_type, "attrs->record_type")
    }

    /// Checks description, data JSON text and every field (key, kind, value), so that
    /// [`Checked::fill`] cannot fail; `domain` is the domain's name, written as `data.domain` on
    /// a record line. The common shape (up to 4 typed fields and nothing else) is converted here,
    /// once: [`filled!`] then moves the values into the builder without looking them up again.
    ///
    /// # Safety
    /// `fields` points to `field_count` fields; `data_json` is NULL or NUL-terminated.
    /// The converted fields go to `typed`, the caller's (moving them through the result would
    /// copy them).
    #[inline(always)]
    pub(crate) unsafe fn check<'a>(
        &'a self,
        domain: Option<&'static str>,
        typed: &'a mut Typed,
    ) -> Result<Checked<'a>, Failure> {
        let a = &self.0;
        let fields: &[jets_field] = match (a.field_count, a.fields.is_null()) {
            (0, _) => &[],
            // SAFETY: non-NULL, and the caller promises `field_count` fields.
            (n, false) => unsafe { std::slice::from_raw_parts(a.fields, n) },
            (n, true) => return Err(null_fields(n)),
        };
        if a.description == 0 && a.data_json.is_null() && domain.is_none() && fields.len() <= 4 {
            for (i, f) in fields.iter().enumerate() {
                // SAFETY: forwarded from the caller.
                match unsafe { convert(f) } {
                    Some(kv) => typed.push(kv),
                    // SAFETY: forwarded from the caller.
                    None => return Err(unsafe { bad_field(f, i) }),
                }
            }
            return Ok(Checked {
                description: None,
                json: None,
                fields,
                domain,
                typed: Some(typed),
            });
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.check_slow(fields, domain) }
    }

    /// [`Attrs::check`] for any other shape: checks without converting.
    ///
    /// # Safety
    /// As [`Attrs::check`].
    #[inline(never)]
    unsafe fn check_slow<'a>(
        &'a self,
        fields: &'a [jets_field],
        domain: Option<&'static str>,
    ) -> Result<Checked<'a>, Failure> {
        let a = &self.0;
        let description = match a.description {
            0 => None,
            h => Some(Str::Static(intern::lookup(h, "attrs->description")?)),
        };
        // SAFETY: forwarded from the caller. Parsed only for a line that is made (CA-JSON-2).
        let json = unsafe { cstr::optional(a.data_json, "attrs->data_json") }?;
        for (i, f) in fields.iter().enumerate() {
            intern::lookup(f.key, "field key")?;
            if f.kind == JETS_FIELD_TEXT {
                // Checked without the copy `value` makes.
                // SAFETY: the caller promises a NUL-terminated string (or NULL, refused), and a
                // pointer is valid for any 8 initialized bytes of the union.
                unsafe { cstr::required(f.value.text, "text field value") }?;
            } else {
                // SAFETY: not a text field: `value` reads no pointer.
                unsafe { value(f, i) }?;
            }
        }
        Ok(Checked { description, json, fields, domain, typed: None })
    }
}

#[cold]
fn null_fields(n: usize) -> Failure {
    Failure::invalid(format!("attrs->fields is NULL but field_count is {n}"))
}

/// Why field `f` (number `index`) was refused by [`convert`].
///
/// # Safety
/// As [`value`].
#[cold]
#[inline(never)]
unsafe fn bad_field(f: &jets_field, index: usize) -> Failure {
    if let Err(e) = intern::lookup(f.key, "field key") {
        return e;
    }
    // SAFETY: forwarded from the caller.
    match unsafe { value(f, index) } {
        Err(e) => e,
        Ok(_) => Failure::invalid("a field changed while it was read"),
    }
}

/// Up to 4 typed fields, converted: made empty by the caller of [`Attrs::check`], filled by it,
/// emptied by [`filled!`]. Plain slots and a count rather than an array of values, so that
/// making one writes one word and dropping an emptied one reads one.
pub(crate) struct Typed {
    kv: [MaybeUninit<(&'static str, Value)>; 4],
    /// `kv[..live]` are initialized and ours.
    live: usize,
}

impl Typed {
    #[inline(always)]
    pub(crate) fn new() -> Typed {
        Typed { kv: [const { MaybeUninit::uninit() }; 4], live: 0 }
    }

    /// How many fields it holds.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Adds a field (at most 4).
    #[inline(always)]
    pub(crate) fn push(&mut self, kv: (&'static str, Value)) {
        self.kv[self.live].write(kv);
        self.live += 1;
    }

    /// Moves all `N` fields out (`N` is how many there are).
    #[inline(always)]
    pub(crate) fn take<const N: usize>(&mut self) -> [(&'static str, Value); N] {
        assert!(self.live == N && N <= 4);
        self.live = 0;
        // SAFETY: `kv[..N]` are initialized (`live == N`), laid out as an array of `N` values
        // (`MaybeUninit<T>` has `T`'s layout), and `live = 0` hands them to us alone.
        unsafe { self.kv.as_ptr().cast::<[(&'static str, Value); N]>().read() }
    }

    /// Drops what is left: fields converted for a line that was then refused.
    #[cold]
    #[inline(never)]
    fn drop_left(&mut self) {
        for kv in &mut self.kv[..self.live] {
            // SAFETY: initialized and still ours (below `live`).
            unsafe { kv.assume_init_drop() };
        }
        self.live = 0;
    }
}

impl Drop for Typed {
    #[inline(always)]
    fn drop(&mut self) {
        // Emptied by `filled!` on every line written: one load and a branch.
        if self.live != 0 {
            self.drop_left();
        }
    }
}

/// Field `f`'s key and value, or `None` if either is bad (then [`bad_field`] says why).
///
/// # Safety
/// As [`value`].
#[inline(always)]
pub(crate) unsafe fn convert(f: &jets_field) -> Option<(&'static str, Value)> {
    let key = intern::get(f.key)?;
    // Every member of the union is plain data, valid for any bits, and jets.h's constructors
    // (`jets_field_u64()` and friends) write all 8 bytes: `kind` only says which one was meant.
    // SAFETY: as in `value`, which this mirrors without building its errors.
    let value = unsafe {
        match f.kind {
            JETS_FIELD_U64 => Value::U64(f.value.u64),
            JETS_FIELD_I64 => Value::I64(f.value.i64),
            JETS_FIELD_F64 => Value::F64(f.value.f64),
            JETS_FIELD_BOOL => Value::Bool(f.value.u64 != 0),
            JETS_FIELD_STR => Value::Str(Str::Static(intern::get(f.value.str)?)),
            JETS_FIELD_TEXT => {
                let text = cstr::required(f.value.text, "text field value").ok()?;
                Value::Str(Str::from(text.to_owned()))
            }
            _ => return None,
        }
    };
    Some((key, value))
}

/// `$emit` on the builder `$b` filled from the [`Checked`] attrs `$c`, as `|$x| $emit`.
///
/// A builder holds a line of several hundred bytes (room for 8 inline fields) and its methods
/// take it by value. Where builders of different shapes meet (a loop over the fields, a `match`
/// whose arms return a builder) the compiler copies the whole line; per call that was most of
/// the C layer's cost. So each common shape (up to 4 typed fields and nothing else, converted by
/// [`Attrs::check`]) is its own straight-line chain ending in `$emit`, as a Rust caller writes
/// it; anything else goes through [`Checked::fill`].
macro_rules! filled {
    ($c:expr, $b:expr, |$x:ident| $emit:expr) => {{
        // By reference: the values move out one by one, never the whole set (a large copy).
        let c: &mut crate::attrs::Checked<'_> = &mut $c;
        match c.typed.as_mut() {
            Some(t) => {
                crate::attrs::chain!(t, $b, |$x| $emit).map_err(crate::failure::Failure::from)
            }
            None => match c.fill($b) {
                Ok($x) => $emit.map_err(crate::failure::Failure::from),
                Err(e) => Err(e),
            },
        }
    }};
}

/// `$emit` on the builder `$b` given the converted fields `$t` (a `&mut Typed`), as
/// `|$x| $emit`: one straight-line chain per number of fields (see [`filled!`]).
macro_rules! chain {
    ($t:expr, $b:expr, |$x:ident| $emit:expr) => {{
        let t: &mut crate::attrs::Typed = $t;
        match t.len() {
            0 => {
                let $x = $b;
                $emit
            }
            1 => {
                let [a] = t.take();
                let $x = $b.typed(a);
                $emit
            }
            2 => {
                let [a, b] = t.take();
                let $x = $b.typed(a).typed(b);
                $emit
            }
            3 => {
                let [a, b, d] = t.take();
                let $x = $b.typed(a).typed(b).typed(d);
                $emit
            }
            _ => {
                let [a, b, d, e] = t.take();
                let $x = $b.typed(a).typed(b).typed(d).typed(e);
                $emit
            }
        }
    }};
}

/// `$emit` given the converted fields `$t` (a `&mut Typed`) as one array, `|$f| $emit`: for the
/// calls that take typed fields at once, with no builder (`emit_event_fields_at`,
/// `begin_child_fields_at`), whose array length is part of their type.
macro_rules! at_once {
    ($t:expr, |$f:ident| $emit:expr) => {{
        let t: &mut crate::attrs::Typed = $t;
        match t.len() {
            0 => {
                let $f: [jets::format::Field; 0] = [];
                $emit
            }
            1 => {
                let $f = t.take::<1>();
                $emit
            }
            2 => {
                let $f = t.take::<2>();
                $emit
            }
            3 => {
                let $f = t.take::<3>();
                $emit
            }
            _ => {
                let $f = t.take::<4>();
                $emit
            }
        }
    }};
}
pub(crate) use at_once;
pub(crate) use chain;
pub(crate) use filled;

/// A `jets_attrs` whose pointers have been read and whose fields have been checked.
pub(crate) struct Checked<'a> {
    description: Option<Str>,
    json: Option<&'a str>,
    pub(crate) fields: &'a [jets_field],
    /// The domain's name, written as `data.domain` on a record line.
    domain: Option<&'static str>,
    /// The fields, converted, when they are all the line carries and at most 4.
    pub(crate) typed: Option<&'a mut Typed>,
}

impl Checked<'_> {
    /// Sets everything on the builder if it holds a line, `data` assembled on its own and set
    /// once: a line capture leaves out costs no text copy and no JSON parse, and its JSON is not
    /// judged (CA-JSON-2). Fails only on JSON text that is not acceptable (CA-JSON-1); the fields
    /// were checked by [`Attrs::check`].
    pub(crate) fn fill<B: Describe>(&mut self, b: B) -> Result<B, Failure> {
        let mut failed = None;
        let b = b.when_made(|b| {
            let b = b.describe(self.description.take().unwrap_or(Str::EMPTY));
            let mut data = Data::new();
            if let Some(json) = self.json {
                if let Err(e) = parse_json(&mut data, json, "attrs->data_json") {
                    failed = Some(e);
                    return b;
                }
            }
            self.push_fields(&mut data);
            b.with_data(data)
        });
        failed.map_or(Ok(b), Err)
    }

    /// Adds the typed fields, then the domain, to `data`.
    fn push_fields(&self, data: &mut Data) {
        for (i, f) in self.fields.iter().enumerate() {
            let (key, value) = field(f, i);
            data.push(key, value);
        }
        if let Some(d) = self.domain {
            data.push("domain", Value::Str(Str::Static(d)));
        }
    }
}

/// A checked field's key and value. A field that fails now although [`Attrs::check`] accepted it
/// (its text was changed during the call, which the caller's contract forbids) is written as
/// `"": null` rather than trusted.
fn field(f: &jets_field, i: usize) -> (&'static str, Value) {
    // SAFETY: the fields were checked by `Attrs::check`, under the same contract as this call.
    match (intern::get(f.key), unsafe { value(f, i) }) {
        (Some(key), Ok(value)) => (key, value),
        _ => ("", Value::Null),
    }
}

fn required(h: jets_str, what: &'static str) -> Result<&'static str, Failure> {
    if h == 0 {
        return Err(Failure::invalid(Msg::What(what, " is 0 (required)")));
    }
    intern::lookup(h, what)
}

/// The value of field `f` (number `index`, for the message).
///
/// # Safety
/// A `JETS_FIELD_TEXT` value is NULL or a NUL-terminated string valid for the call.
#[inline(always)]
unsafe fn value(f: &jets_field, index: usize) -> Result<Value, Failure> {
    // Every member of the union is plain data, valid for any bits, and jets.h's constructors
    // (`jets_field_u64()` and friends) write all 8 bytes: `kind` only says which one was meant.
    Ok(match f.kind {
        // SAFETY: a `u64` is valid for any 8 initialized bytes (see above).
        JETS_FIELD_U64 => Value::U64(unsafe { f.value.u64 }),
        // SAFETY: an `i64` is valid for any 8 initialized bytes.
        JETS_FIELD_I64 => Value::I64(unsafe { f.value.i64 }),
        // SAFETY: an `f64` is valid for any 8 initialized bytes (NaN included).
        JETS_FIELD_F64 => Value::F64(unsafe { f.value.f64 }),
        // SAFETY: `jets_field_bool()` stores 0 or 1 in `u64`; any value is a valid `u64`.
        JETS_FIELD_BOOL => Value::Bool(unsafe { f.value.u64 } != 0),
        JETS_FIELD_STR => {
            // SAFETY: a `u32` is valid for any 4 initialized bytes; a stale or bogus handle is
            // refused by `lookup`, never used as a pointer.
            Value::Str(Str::Static(intern::lookup(unsafe { f.value.str }, "string field value")?))
        }
        JETS_FIELD_TEXT => {
            // SAFETY: the caller promises a NUL-terminated string (or NULL, refused).
            let text = unsafe { cstr::required(f.value.text, "text field value") }?;
            Value::Str(Str::from(text.to_owned()))
        }
        kind => {
            return Err(Failure::invalid(format!(
                "fields[{index}].kind {kind} is not a JETS_FIELD_*"
            )))
        }
    })
}
