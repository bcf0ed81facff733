//! One-line instrumentation: [`event!`](crate::event) and [`annotate!`](crate::annotate), and the
//! run-time support of `#[jets::record]` (in [`__private`], not a public API).

/// Emits an event with typed fields on a record: `event!(record, name, key = value, ...)`.
///
/// * `record` is a [`RecordHandle`](crate::RecordHandle) (or a reference to one).
/// * Values keep their type when they convert into [`format::Value`](crate::format::Value)
///   (integers, floats, bools, strings, hints); `key = ?value` writes the `Debug` text and
///   `key = %value` the `Display` text.
/// * `clk = cycle` emits at that cycle instead of the trace clock's; `description = text` sets the
///   description. Both are reserved: they never become `data` fields.
/// * A key may be a string literal, for names that are not identifiers.
///
/// Evaluates to `Result<(), jets::Error>`.
///
/// ```
/// # fn main() -> Result<(), jets::Error> {
/// use jets::format::Severity;
/// let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new())?;
/// let insn = trace.root("add", "Instruction").begin_at(4)?;
/// jets::event!(insn, "Decode", clk = 5, stage = 1, pc = 0x1000u64)?;
/// jets::event!(&insn, "Stall", description = "RAW hazard", severity = Severity::Warning, cause = ?("x2", 3))?;
/// jets::event!(insn, "Retire")?; // at the trace clock's cycle
/// insn.end_at(9)?;
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! event {
    ($record:expr, $name:expr $(, $($fields:tt)*)?) => {{
        let __jets_b = $crate::RecordHandle::event(&$record, $name);
        let mut __jets_clk: ::core::option::Option<u64> = ::core::option::Option::None;
        $crate::__jets_fields!(__jets_b, __jets_clk; $($($fields)*)?);
        match __jets_clk {
            ::core::option::Option::Some(c) => __jets_b.emit_at(c),
            ::core::option::Option::None => __jets_b.emit(),
        }
    }};
}

/// Emits an annotation with typed fields on a record: `annotate!(record, name, key = value, ...)`.
///
/// Fields as in [`event!`](crate::event); annotations are not timed, so a `clk` key is an ordinary
/// `data` field here.
/// Evaluates to `Result<(), jets::Error>`.
///
/// ```
/// # fn main() -> Result<(), jets::Error> {
/// let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new())?;
/// let dispatch = trace.root("dispatch", "Kernel").begin_at(0)?;
/// jets::annotate!(dispatch, "GridDimensions", description = "launch grid", x = 1024, y = 1024, z = 1)?;
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! annotate {
    ($record:expr, $name:expr $(, $($fields:tt)*)?) => {{
        let __jets_b = $crate::RecordHandle::annotation(&$record, $name);
        $crate::__jets_fields!(__jets_b; $($($fields)*)?);
        __jets_b.emit()
    }};
}

/// Applies `key = value` fields to a builder bound to `$b` (and `clk` to `$clk` for events).
#[doc(hidden)]
#[macro_export]
macro_rules! __jets_fields {
    ($b:ident $(, $clk:ident)?; ) => {};
    ($b:ident, $clk:ident; clk = $v:expr $(, $($rest:tt)*)?) => {
        $clk = ::core::option::Option::Some($v);
        $crate::__jets_fields!($b, $clk; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; description = $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.description($v);
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:ident = ? $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field(stringify!($k), ::std::format!("{:?}", $v));
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:ident = % $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field(stringify!($k), ::std::format!("{}", $v));
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:ident = $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field(stringify!($k), $v);
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:literal = ? $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field($k, ::std::format!("{:?}", $v));
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:literal = % $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field($k, ::std::format!("{}", $v));
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
    ($b:ident $(, $clk:ident)?; $k:literal = $v:expr $(, $($rest:tt)*)?) => {
        let $b = $b.field($k, $v);
        $crate::__jets_fields!($b $(, $clk)?; $($($rest)*)?);
    };
}

/// Run-time support for the code `#[jets::record]` generates. Not a public API: it changes with
/// the macro.
pub mod __private {
    use std::fmt;
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::error::Error;
    use crate::format::{Color, MarkerStyle, Severity, Status, Str, Value};
    use crate::write::{RecordBuilder, RecordHandle, Trace};

    #[cfg(feature = "tracing")]
    pub use tracing;

    /// A value the macro captures with its type kept (see [`Capture`]).
    pub trait ToValue {
        /// The typed value.
        fn to_value(&self) -> Value;
    }

    macro_rules! to_value_copy {
        ($($t:ty),*) => {$(
            impl ToValue for $t {
                #[inline]
                fn to_value(&self) -> Value { Value::from(*self) }
            }
        )*};
    }
    to_value_copy!(
        u8,
        u16,
        u32,
        u64,
        usize,
        i8,
        i16,
        i32,
        i64,
        isize,
        f32,
        f64,
        bool,
        Color,
        Status,
        Severity,
        MarkerStyle
    );
    impl ToValue for str {
        fn to_value(&self) -> Value {
            Value::Str(self.to_owned().into())
        }
    }
    impl ToValue for String {
        fn to_value(&self) -> Value {
            Value::Str(self.clone().into())
        }
    }
    impl ToValue for Str {
        fn to_value(&self) -> Value {
            Value::Str(self.clone())
        }
    }
    impl ToValue for Value {
        fn to_value(&self) -> Value {
            self.clone()
        }
    }
    impl<T: ToValue> ToValue for Option<T> {
        fn to_value(&self) -> Value {
            self.as_ref().map_or(Value::Null, ToValue::to_value)
        }
    }
    impl<T: ToValue + ?Sized> ToValue for &T {
        #[inline]
        fn to_value(&self) -> Value {
            (**self).to_value()
        }
    }
    impl<T: ToValue + ?Sized> ToValue for &mut T {
        #[inline]
        fn to_value(&self) -> Value {
            (**self).to_value()
        }
    }

    /// Captures a value for `data`: typed when it is [`ToValue`], else its `Debug` text. The
    /// choice is made at compile time by method resolution (autoref): the generated code calls
    /// `(&Capture(&x)).__jets_capture()` with both [`CaptureTyped`] and [`CaptureDebug`] in scope.
    pub struct Capture<'a, T: ?Sized>(pub &'a T);

    /// The typed capture, found first.
    pub trait CaptureTyped {
        /// The value.
        fn __jets_capture(&self) -> Value;
    }
    impl<T: ToValue + ?Sized> CaptureTyped for Capture<'_, T> {
        #[inline]
        fn __jets_capture(&self) -> Value {
            self.0.to_value()
        }
    }

    /// The `Debug` capture, the fallback.
    pub trait CaptureDebug {
        /// The value.
        fn __jets_capture(&self) -> Value;
    }
    impl<T: fmt::Debug + ?Sized> CaptureDebug for &Capture<'_, T> {
        fn __jets_capture(&self) -> Value {
            Value::Str(format!("{:?}", self.0).into())
        }
    }

    /// What `trace = expr` may name: a [`Trace`] (the record is a root), a [`RecordHandle`] (the
    /// record is its child), a reference to either, or an `Option` of any of these (`None`: no
    /// record, and the field values are not even computed).
    pub trait RecordParent {
        /// Starts describing the record, or `None` for no record.
        fn __jets_record(&self, name: Str, record_type: Str) -> Option<RecordBuilder<'_>>;
    }
    impl RecordParent for Trace {
        #[inline]
        fn __jets_record(&self, name: Str, record_type: Str) -> Option<RecordBuilder<'_>> {
            Some(self.root(name, record_type))
        }
    }
    impl RecordParent for RecordHandle {
        #[inline]
        fn __jets_record(&self, name: Str, record_type: Str) -> Option<RecordBuilder<'_>> {
            Some(self.child(name, record_type))
        }
    }
    impl<T: RecordParent + ?Sized> RecordParent for &T {
        #[inline]
        fn __jets_record(&self, name: Str, record_type: Str) -> Option<RecordBuilder<'_>> {
            (**self).__jets_record(name, record_type)
        }
    }
    impl<T: RecordParent> RecordParent for Option<T> {
        #[inline]
        fn __jets_record(&self, name: Str, record_type: Str) -> Option<RecordBuilder<'_>> {
            self.as_ref()?.__jets_record(name, record_type)
        }
    }

    static ERRORS: AtomicU64 = AtomicU64::new(0);

    /// Errors met by `#[jets::record(trace = ..)]` code, which cannot return them: the first is
    /// printed on stderr, all are counted. [`Error::Closed`] is not an error here (a record that
    /// ends after its trace was closed stays open, and the footer counts it).
    pub fn check<T>(result: Result<T, Error>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(Error::Closed) => None,
            Err(e) => {
                if ERRORS.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("jets: #[jets::record]: {e} (further errors are only counted)");
                }
                None
            }
        }
    }

    /// How many errors `#[jets::record(trace = ..)]` code has met in this process.
    pub fn error_count() -> u64 {
        ERRORS.load(Ordering::Relaxed)
    }

    /// A native record that ends when the function returns, or when it unwinds or its future is
    /// dropped (then at the trace clock's cycle).
    pub struct RecordGuard(Option<RecordHandle>);

    impl RecordGuard {
        /// Begins the record at `clk`, or at the trace clock's cycle; no record without a
        /// builder (`trace = None`).
        #[inline]
        pub fn begin(builder: Option<RecordBuilder<'_>>, clk: Option<u64>) -> Self {
            RecordGuard(builder.and_then(|b| {
                check(match clk {
                    Some(c) => b.begin_at(c),
                    None => b.begin(),
                })
            }))
        }

        /// The record, unless beginning it failed.
        pub fn handle(&self) -> Option<&RecordHandle> {
            self.0.as_ref()
        }

        /// Emits the `return` event (field `value`) at `clk`, or at the clock's cycle.
        pub fn ret(&self, value: Value, clk: Option<u64>) {
            if let Some(h) = &self.0 {
                let e = h.event("return").field("value", value);
                check(match clk {
                    Some(c) => e.emit_at(c),
                    None => e.emit(),
                });
            }
        }

        /// Emits the `error` event (field `error`, severity `error`) at `clk`, or at the clock's.
        pub fn err(&self, error: &dyn fmt::Display, clk: Option<u64>) {
            if let Some(h) = &self.0 {
                let e =
                    h.event("error").field("error", error.to_string()).severity(Severity::Error);
                check(match clk {
                    Some(c) => e.emit_at(c),
                    None => e.emit(),
                });
            }
        }

        /// Ends the record at `clk`, or at the trace clock's cycle.
        #[inline]
        pub fn end(mut self, clk: Option<u64>) {
            if let Some(h) = self.0.take() {
                check(match clk {
                    Some(c) => h.end_at(c),
                    None => h.end(),
                });
            }
        }
    }

    impl Drop for RecordGuard {
        #[inline]
        fn drop(&mut self) {
            if let Some(h) = self.0.take() {
                check(h.end());
            }
        }
    }

    /// Captures an argument for a `tracing` span: as it is when it is a `tracing::Value` already
    /// (no conversion, no allocation: `&str`, `String`, integers, floats, bools, options of them),
    /// else as [`ToValue`], else as its `Debug` text. Chosen at compile time by method resolution:
    /// the generated code calls `(&&&Capture(&x)).__jets_tracing()` with [`TracingAsIs`],
    /// [`TracingTyped`] and [`TracingDebug`] in scope.
    #[cfg(feature = "tracing")]
    pub enum TracingArg<'a> {
        /// The argument itself.
        AsIs(&'a dyn tracing::Value),
        /// A converted value.
        Converted(TracingField),
    }

    #[cfg(feature = "tracing")]
    impl TracingArg<'_> {
        /// The value for `tracing`'s span and event macros.
        pub fn as_dyn(&self) -> &dyn tracing::Value {
            match self {
                TracingArg::AsIs(v) => *v,
                TracingArg::Converted(f) => f.as_dyn(),
            }
        }
    }

    /// The first choice: the argument is a `tracing::Value`.
    #[cfg(feature = "tracing")]
    pub trait TracingAsIs<'a> {
        /// The value.
        fn __jets_tracing(&self) -> TracingArg<'a>;
    }
    #[cfg(feature = "tracing")]
    impl<'a, T: tracing::Value> TracingAsIs<'a> for &&Capture<'a, T> {
        #[inline]
        fn __jets_tracing(&self) -> TracingArg<'a> {
            TracingArg::AsIs(self.0)
        }
    }

    /// The second choice: the argument converts to a JETS value.
    #[cfg(feature = "tracing")]
    pub trait TracingTyped<'a> {
        /// The value.
        fn __jets_tracing(&self) -> TracingArg<'a>;
    }
    #[cfg(feature = "tracing")]
    impl<'a, T: ToValue + ?Sized> TracingTyped<'a> for &Capture<'a, T> {
        fn __jets_tracing(&self) -> TracingArg<'a> {
            TracingArg::Converted(TracingField::new(self.0.to_value()))
        }
    }

    /// The last choice: the argument's `Debug` text.
    #[cfg(feature = "tracing")]
    pub trait TracingDebug<'a> {
        /// The value.
        fn __jets_tracing(&self) -> TracingArg<'a>;
    }
    #[cfg(feature = "tracing")]
    impl<'a, T: fmt::Debug + ?Sized> TracingDebug<'a> for Capture<'a, T> {
        fn __jets_tracing(&self) -> TracingArg<'a> {
            let text = format!("{:?}", self.0);
            TracingArg::Converted(TracingField::Text(tracing::field::display(Text(text.into()))))
        }
    }

    /// A captured value as a `tracing` field value (`tracing::Value` is sealed, so the macro
    /// hands `tracing` one of its own value types).
    #[cfg(feature = "tracing")]
    pub enum TracingField {
        /// Nothing: the field is left out.
        Null,
        /// An unsigned integer.
        U64(u64),
        /// A signed integer.
        I64(i64),
        /// A float.
        F64(f64),
        /// A bool.
        Bool(bool),
        /// Text (strings and colors), passed as `Display`.
        Text(tracing::field::DisplayValue<Text>),
    }

    /// Text given to `tracing` as `Display`.
    #[cfg(feature = "tracing")]
    pub struct Text(Str);

    #[cfg(feature = "tracing")]
    impl fmt::Display for Text {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    #[cfg(feature = "tracing")]
    impl TracingField {
        /// Converts a captured value.
        pub fn new(value: Value) -> Self {
            match value {
                Value::Null => TracingField::Null,
                Value::Bool(b) => TracingField::Bool(b),
                Value::U64(v) => TracingField::U64(v),
                Value::I64(v) => TracingField::I64(v),
                Value::F64(v) => TracingField::F64(v),
                Value::Str(s) => TracingField::Text(tracing::field::display(Text(s))),
                Value::Color(c) => TracingField::Text(tracing::field::display(Text(Str::Owned(
                    c.to_hex().as_str().into(),
                )))),
            }
        }

        /// The value for `tracing`'s span and event macros.
        pub fn as_dyn(&self) -> &dyn tracing::Value {
            const NONE: Option<u64> = None;
            match self {
                TracingField::Null => &NONE,
                TracingField::U64(v) => v,
                TracingField::I64(v) => v,
                TracingField::F64(v) => v,
                TracingField::Bool(v) => v,
                TracingField::Text(v) => v,
            }
        }
    }
}
