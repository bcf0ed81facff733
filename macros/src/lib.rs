//! `#[jets::record]`: mark a function as a JETS record. Use it through the `jets-sdk` crate
//! (`jets::record`), whose documentation describes the options; this crate only generates code,
//! and the code it generates refers to `::jets::...`.

mod expand;
mod options;

use proc_macro::TokenStream;

/// Makes every call of the function one JETS record, from entry to return.
///
/// By default the record is a `tracing` span (INFO level) that `jets::JetsLayer` writes; with
/// `trace = <Trace or RecordHandle>` it is written straight to a native trace, without `tracing`.
///
/// Options (each at most once):
/// * `name = "text"`: the record's name (default: the function's name);
/// * `record_type = expr`, `description = expr`: the line's fields (defaults: the module path and
///   the function's `file:line`);
/// * `parent = expr`: the parent span (`tracing` mode; default: the current span);
/// * `trace = expr`: native mode; a `jets::Trace` makes a root record, a `jets::RecordHandle` a
///   child, an `Option` of either (or of a reference) a record only when `Some`; `handle = name`
///   then binds the record as `name: Option<&jets::RecordHandle>` in the body (`None` if it could
///   not begin or was not asked for), for children and events;
/// * `clk = expr`: the start cycle; `end_clk = expr`: the end cycle, evaluated after the body
///   (defaults: the trace's clock);
/// * `fields(key = expr, ...)`: more `data` fields (keys may be dotted or string literals);
/// * arguments go into `data`, typed when they convert to `jets::format::Value` and as `Debug`
///   text otherwise: all of them by default, `skip(a, b)` leaves some out, `skip_all` all,
///   `args(a, b)` takes only these;
/// * `ret`: an event `return` with the value; `err`: an event `error` (severity `error`) with the
///   `Display` text of an `Err`; both together report `Ok` values and errors;
/// * the record hints `color` (`"#rrggbb"` or a `Color`), `unit_id`, `thread_id`, `subunit_id`,
///   `display_label`, `status` (`"running"`, `"stalled"`, `"complete"` or a `Status`),
///   `criticality`.
///
/// An `async fn` is one record for the future's life: from its first poll to its completion (or
/// its drop).
#[proc_macro_attribute]
pub fn record(args: TokenStream, item: TokenStream) -> TokenStream {
    let options = match options::Options::parse(args.into()) {
        Ok(o) => o,
        Err(e) => return error_with_item(e, item),
    };
    let func: syn::ItemFn = match syn::parse(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new(
                proc_macro2::Span::call_site(),
                "#[jets::record] goes on a function or method with a body",
            );
            return error_with_item(e, item);
        }
    };
    match expand::expand(options, func) {
        Ok(tokens) => tokens.into(),
        Err(e) => error_with_item(e, item),
    }
}

/// The error, and the item unchanged: the function still exists, so the error is the only one.
fn error_with_item(e: syn::Error, item: TokenStream) -> TokenStream {
    let mut out: TokenStream = e.to_compile_error().into();
    out.extend(item);
    out
}
