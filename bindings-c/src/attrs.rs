//! What a line carries besides its ids and clk, from C arguments: names, description, `data` JSON
//! text and typed fields, checked before anything is queued.

use std::ffi::c_char;

use jets::format::{Str, Value};
use jets::write::{AnnotationBuilder, EventBuilder, RecordBuilder};

use crate::cstr;
use crate::failure::Failure;
use crate::intern;
use crate::types::*;

/// The builder methods shared by records, events and annotations.
pub(crate) trait Describe: Sized {
    fn describe(self, text: Str) -> Self;
    fn typed(self, key: &'static str, value: Value) -> Self;
    fn json(self, text: &str) -> Self;
}

macro_rules! describe {
    ($($builder:ident),*) => {$(
        impl Describe for $builder<'_> {
            fn describe(self, text: Str) -> Self {
                self.description(text)
            }
            fn typed(self, key: &'static str, value: Value) -> Self {
                self.field(key, value)
            }
            fn json(self, text: &str) -> Self {
                self.data_json(text)
            }
        }
    )*};
}
describe!(RecordBuilder, EventBuilder, AnnotationBuilder);

/// What a line carries besides its names: description, `data` JSON text and typed fields.
pub(crate) trait Content {
    /// Applies the content to a builder, or says what is wrong with it.
    ///
    /// # Safety
    /// The pointers inside `self` are valid as promised by the C caller.
    unsafe fn apply<B: Describe>(&self, b: B) -> Result<B, Failure>;
}

/// The plain-string arguments `description` and `data_json` (both optional).
pub(crate) struct Text {
    pub(crate) description: *const c_char,
    pub(crate) data_json: *const c_char,
}

impl Content for Text {
    unsafe fn apply<B: Describe>(&self, mut b: B) -> Result<B, Failure> {
        // SAFETY: forwarded from the caller.
        if let Some(d) = unsafe { cstr::optional(self.description, "description") }? {
            b = b.describe(Str::from(d.to_owned()));
        }
        // SAFETY: forwarded from the caller.
        if let Some(json) = unsafe { cstr::optional(self.data_json, "data_json") }? {
            b = b.json(json);
        }
        Ok(b)
    }
}

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
        let ours = std::mem::size_of::<jets_attrs>();
        if size < ours {
            return Err(Failure::invalid(format!(
                "attrs->size is {size}, expected at least {ours} (initialize with JETS_ATTRS_INIT)"
            )));
        }
        // SAFETY: the caller's struct is at least as large as ours; newer members are ignored.
        Ok(Attrs(unsafe { std::ptr::read(p) }))
    }

    pub(crate) fn name(&self) -> Result<&'static str, Failure> {
        required(self.0.name, "attrs->name")
    }

    pub(crate) fn record_type(&self) -> Result<&'static str, Failure> {
        required(self.0.record_type, "attrs->record_type")
    }
}

impl Content for Attrs {
    /// Applies description, data JSON and typed fields (`fields` points to `field_count` fields).
    unsafe fn apply<B: Describe>(&self, mut b: B) -> Result<B, Failure> {
        let a = &self.0;
        if a.description != 0 {
            b = b.describe(Str::Static(intern::lookup(a.description, "attrs->description")?));
        }
        // SAFETY: forwarded from the caller.
        if let Some(json) = unsafe { cstr::optional(a.data_json, "attrs->data_json") }? {
            b = b.json(json);
        }
        if a.field_count == 0 {
            return Ok(b);
        }
        if a.fields.is_null() {
            return Err(Failure::invalid(format!(
                "attrs->fields is NULL but field_count is {}",
                a.field_count
            )));
        }
        // SAFETY: non-NULL, and the caller promises `field_count` fields.
        let fields = unsafe { std::slice::from_raw_parts(a.fields, a.field_count) };
        for (i, f) in fields.iter().enumerate() {
            let key = intern::lookup(f.key, "field key")?;
            b = b.typed(key, value(f, i)?);
        }
        Ok(b)
    }
}

fn required(h: jets_str, what: &str) -> Result<&'static str, Failure> {
    if h == 0 {
        return Err(Failure::invalid(format!("{what} is 0 (required)")));
    }
    intern::lookup(h, what)
}

fn value(f: &jets_field, index: usize) -> Result<Value, Failure> {
    // SAFETY (all reads below): every member of the union is plain data, valid for any bits;
    // `kind` only says which one the caller meant.
    Ok(match f.kind {
        JETS_FIELD_U64 => Value::U64(unsafe { f.value.u64 }),
        JETS_FIELD_I64 => Value::I64(unsafe { f.value.i64 }),
        JETS_FIELD_F64 => Value::F64(unsafe { f.value.f64 }),
        JETS_FIELD_BOOL => Value::Bool(unsafe { f.value.u64 } != 0),
        JETS_FIELD_STR => {
            Value::Str(Str::Static(intern::lookup(unsafe { f.value.str }, "string field value")?))
        }
        kind => {
            return Err(Failure::invalid(format!(
                "fields[{index}].kind {kind} is not a JETS_FIELD_*"
            )))
        }
    })
}
