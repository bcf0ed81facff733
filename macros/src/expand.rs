//! The code `#[jets::record]` generates: a `tracing` span (default) or a native record
//! (`trace = ..`). Generated paths start with `::jets::` so the macro never depends on the SDK.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Ident, ItemFn, LitStr, Pat, ReturnType};

use crate::options::{Capture, HintValue, Options};

/// Expands the attribute on `item`.
pub fn expand(o: Options, mut item: ItemFn) -> syn::Result<TokenStream> {
    let sig = &item.sig;
    if o.ret && matches!(sig.output, ReturnType::Default) {
        return Err(syn::Error::new(
            sig.ident.span(),
            "`ret` needs a function that returns a value",
        ));
    }
    if o.err && matches!(sig.output, ReturnType::Default) {
        return Err(syn::Error::new(
            sig.ident.span(),
            "`err` needs a function that returns a Result",
        ));
    }
    let args = captured_args(&o.capture, sig)?;
    let name =
        o.name.clone().unwrap_or_else(|| LitStr::new(&sig.ident.to_string(), sig.ident.span()));
    let is_async = sig.asyncness.is_some();
    let block = &item.block;
    // Wrapping the body is needed only to act after it (ret, err, end_clk).
    let after = o.ret || o.err || o.end_clk.is_some();
    let ret_ty = match &sig.output {
        ReturnType::Default => Some(quote!(())),
        ReturnType::Type(_, ty) if !mentions_impl(&quote!(#ty)) => Some(quote!(#ty)),
        ReturnType::Type(..) => None,
    };
    let body = if !cfg!(feature = "enabled") {
        compiled_out(&o, &args, block)
    } else if o.trace.is_some() {
        native(&o, &name, &args, block, is_async, after, ret_ty.as_ref())
    } else {
        via_tracing(&o, &name, &args, block, is_async, after, ret_ty.as_ref())
    };
    item.block = syn::parse2(quote!({ #body }))?;
    Ok(quote!(#item))
}

/// Built without `jets-sdk`'s `enabled` feature: the body as it is, and `handle` bound to `None`.
/// The captured arguments and the expressions the options name sit in a closure that never runs,
/// so a variable used only there does not become unused, and nothing is computed.
fn compiled_out(o: &Options, args: &[Ident], block: &syn::Block) -> TokenStream {
    let hints = o.hints.iter().filter_map(|(_, v)| match v {
        HintValue::Expr(e) => Some(e),
        HintValue::Literal { .. } => None,
    });
    let fields = o.fields.iter().map(|(_, v)| v).filter(|v| !is_empty_marker(v));
    let options = [&o.record_type, &o.description, &o.parent, &o.trace, &o.clk, &o.end_clk];
    let exprs = options.into_iter().flatten().chain(fields).chain(hints);
    let named: Vec<TokenStream> =
        args.iter().map(|a| quote!(&#a)).chain(exprs.map(|e| quote!(&(#e)))).collect();
    let bind = o.handle.as_ref().map(|h| {
        quote!(let #h: ::core::option::Option<&::jets::RecordHandle> = ::core::option::Option::None;)
    });
    let stmts = &block.stmts;
    quote! {
        let _ = || {
            let _ = ( #( #named, )* );
        };
        #bind
        #(#stmts)*
    }
}

/// `(&Capture(&x)).__jets_capture()`: the typed value when there is one, else the Debug text.
/// Spanned at the value, so a type that is neither is reported at the argument or field.
fn capture(value: TokenStream, span: Span) -> TokenStream {
    quote_spanned!(span=> {
        #[allow(unused_imports)]
        use ::jets::__private::{CaptureDebug as _, CaptureTyped as _};
        (&::jets::__private::Capture(&#value)).__jets_capture()
    })
}

/// `(&&&Capture(x)).__jets_tracing()` on a reference `x`: the value itself when `tracing` takes
/// it as it is, else typed, else its Debug text (a `TracingArg` borrowing `*x`).
fn capture_for_tracing(reference: TokenStream, span: Span) -> TokenStream {
    quote_spanned!(span=> {
        #[allow(unused_imports)]
        use ::jets::__private::{TracingAsIs as _, TracingDebug as _, TracingTyped as _};
        (&&&::jets::__private::Capture(#reference)).__jets_tracing()
    })
}

/// The arguments captured into `data`, by name.
fn captured_args(capture: &Capture, sig: &syn::Signature) -> syn::Result<Vec<Ident>> {
    let all: Vec<Ident> = sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(t) => match &*t.pat {
                Pat::Ident(p) => Some(p.ident.clone()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    let check = |names: &[Ident], what: &str| {
        for n in names {
            if !all.contains(n) {
                return Err(syn::Error::new(
                    n.span(),
                    format!("{what}: the function has no argument named `{n}`"),
                ));
            }
        }
        Ok(())
    };
    Ok(match capture {
        Capture::All => all.clone(),
        Capture::None => Vec::new(),
        Capture::Skip(names) => {
            check(names, "skip")?;
            all.iter().filter(|a| !names.contains(a)).cloned().collect()
        }
        Capture::Only(names) => {
            check(names, "args")?;
            names.clone()
        }
    })
}

fn mentions_impl(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == "impl",
        TokenTree::Group(g) => mentions_impl(&g.stream()),
        _ => false,
    })
}

/// The body run inside a closure or async block whose value is `__jets_ret`.
fn wrapped(block: &syn::Block, is_async: bool, ret_ty: Option<&TokenStream>) -> TokenStream {
    let annot = ret_ty.map(|t| quote!(: #t));
    if is_async {
        quote!(let __jets_ret #annot = async move #block.await;)
    } else {
        let arrow = ret_ty.map(|t| quote!(-> #t));
        quote! {
            #[allow(clippy::redundant_closure_call)]
            let __jets_ret #annot = (|| #arrow #block)();
        }
    }
}

fn native(
    o: &Options,
    name: &LitStr,
    args: &[Ident],
    block: &syn::Block,
    is_async: bool,
    after: bool,
    ret_ty: Option<&TokenStream>,
) -> TokenStream {
    let trace = o.trace.as_ref().map(|t| quote_spanned!(t.span()=> (#t)));
    let record_type = match &o.record_type {
        Some(t) => quote!(::core::convert::Into::into(#t)),
        None => quote!(::jets::format::Str::Static(::core::module_path!())),
    };
    let description = match &o.description {
        Some(d) => quote!(#d),
        None => quote!(::core::concat!(::core::file!(), ":", ::core::line!())),
    };
    let mut setters = TokenStream::new();
    for a in args {
        let key = a.to_string();
        let v = capture(quote!(#a), a.span());
        setters.extend(quote!(.field(#key, #v)));
    }
    // A field to be recorded later has no meaning without `tracing`: nothing to write.
    for (k, v) in o.fields.iter().filter(|(_, v)| !is_empty_marker(v)) {
        let key = &k.text;
        let v = capture(quote!((#v)), v.span());
        setters.extend(quote!(.field(#key, #v)));
    }
    for (hint, value) in &o.hints {
        let method = Ident::new(hint, Span::call_site());
        let v = match value {
            HintValue::Literal { native, .. } => native.clone(),
            HintValue::Expr(e) => quote!(#e),
        };
        setters.extend(quote!(.#method(#v)));
    }
    let clk = option_u64(o.clk.as_ref());
    let bind = o.handle.as_ref().map(
        |h| quote!(let #h: ::core::option::Option<&::jets::RecordHandle> = __jets_guard.handle();),
    );
    let begin = quote! {
        let __jets_guard = {
            #[allow(unused_imports)]
            use ::jets::__private::RecordParent as _;
            let __jets_b = #trace
                .__jets_record(::jets::format::Str::Static(#name), #record_type)
                // In `with`: the fields' values (a Debug text is formatted) are worked out
                // only when the record line is made, never while capture leaves it out.
                .map(|__jets_b| __jets_b.with(|__jets_b| __jets_b.description(#description) #setters));
            ::jets::__private::RecordGuard::begin(__jets_b, #clk)
        };
        #bind
    };
    let stmts = &block.stmts;
    if !after {
        return quote!(#begin #(#stmts)*);
    }
    let run = wrapped(block, is_async, ret_ty);
    let end = option_u64(o.end_clk.as_ref());
    let report = report_result(
        o,
        |value| {
            let v = capture(value, Span::call_site());
            quote!(__jets_guard.ret(#v, __jets_end);)
        },
        |error| quote!(__jets_guard.err(#error, __jets_end);),
    );
    quote! {
        #begin
        #run
        let __jets_end: ::core::option::Option<u64> = #end;
        #report
        __jets_guard.end(__jets_end);
        __jets_ret
    }
}

/// `ret` and `err`: what to do with the body's value.
fn report_result(
    o: &Options,
    on_value: impl Fn(TokenStream) -> TokenStream,
    on_error: impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    match (o.ret, o.err) {
        (false, false) => TokenStream::new(),
        (true, false) => on_value(quote!(__jets_ret)),
        (false, true) => {
            let e = on_error(quote!(__jets_e));
            quote!(if let ::core::result::Result::Err(__jets_e) = &__jets_ret { #e })
        }
        (true, true) => {
            let v = on_value(quote!(__jets_v));
            let e = on_error(quote!(__jets_e));
            quote! {
                match &__jets_ret {
                    ::core::result::Result::Ok(__jets_v) => { #v }
                    ::core::result::Result::Err(__jets_e) => { #e }
                }
            }
        }
    }
}

fn option_u64(e: Option<&Expr>) -> TokenStream {
    match e {
        Some(e) => quote!(::core::option::Option::Some::<u64>(#e)),
        None => quote!(::core::option::Option::None::<u64>),
    }
}

fn via_tracing(
    o: &Options,
    name: &LitStr,
    args: &[Ident],
    block: &syn::Block,
    is_async: bool,
    after: bool,
    ret_ty: Option<&TokenStream>,
) -> TokenStream {
    let t = quote!(::jets::__private::tracing);
    let mut f = SpanFields::default();
    if let Some(rt) = &o.record_type {
        f.add(quote!(record_type), rt);
    }
    if let Some(d) = &o.description {
        f.add(quote!(description), d);
    }
    for (hint, value) in &o.hints {
        let key = Ident::new(hint, Span::call_site());
        match value {
            HintValue::Literal { text, .. } => f.fields.push(quote!(jets.#key = #text)),
            HintValue::Expr(e) => f.add(quote!(jets.#key), e),
        }
    }
    for a in args {
        f.add(quote!(#a), &syn::parse_quote!(#a));
    }
    for (k, v) in &o.fields {
        f.add(k.tokens.clone(), v);
    }
    let SpanFields { lets, mut fields, .. } = f;
    if let Some(c) = &o.clk {
        fields.push(quote!(clk = { let __jets_c: u64 = #c; __jets_c }));
    }
    if o.end_clk.is_some() {
        fields.push(quote!(end_clk = #t::field::Empty));
    }
    let parent = o.parent.as_ref().map(|p| quote!(parent: #p,));
    let span = quote! {
        let __jets_span = {
            #lets
            #t::span!(#parent #t::Level::INFO, #name #(, #fields)*)
        };
    };
    let report = report_result(
        o,
        |value| {
            let v = capture(value, Span::call_site());
            quote! {
                let __jets_v = ::jets::__private::TracingField::new(#v);
                match __jets_end {
                    ::core::option::Option::Some(c) => #t::event!(#t::Level::INFO, clk = c, value = __jets_v.as_dyn(), "return"),
                    ::core::option::Option::None => #t::event!(#t::Level::INFO, value = __jets_v.as_dyn(), "return"),
                }
            }
        },
        |error| {
            quote! {
                match __jets_end {
                    ::core::option::Option::Some(c) => #t::event!(#t::Level::ERROR, clk = c, error = %#error, "error"),
                    ::core::option::Option::None => #t::event!(#t::Level::ERROR, error = %#error, "error"),
                }
            }
        },
    );
    let end = option_u64(o.end_clk.as_ref());
    let finish = |span: TokenStream| {
        if !after {
            return TokenStream::new();
        }
        let record_end = o.end_clk.as_ref().map(|_| {
            quote!(if let ::core::option::Option::Some(c) = __jets_end { #span.record("end_clk", c); })
        });
        quote! {
            let __jets_end: ::core::option::Option<u64> = #end;
            #report
            #record_end
        }
    };
    let stmts = &block.stmts;
    if is_async {
        let inner = if after {
            let run = wrapped(block, true, ret_ty);
            let fin = finish(quote!(#t::Span::current()));
            quote!(async move { #run #fin __jets_ret })
        } else {
            quote!(async move #block)
        };
        quote! {
            #span
            #t::Instrument::instrument(#inner, __jets_span).await
        }
    } else if after {
        let run = wrapped(block, false, ret_ty);
        let fin = finish(quote!(__jets_span));
        quote! {
            #span
            let __jets_enter = __jets_span.enter();
            #run
            #fin
            __jets_ret
        }
    } else {
        quote! {
            #span
            let __jets_enter = __jets_span.enter();
            #(#stmts)*
        }
    }
}

/// The fields of the span: values are bound first, as the span macro takes references to them.
#[derive(Default)]
struct SpanFields {
    lets: TokenStream,
    fields: Vec<TokenStream>,
    n: usize,
}

impl SpanFields {
    fn add(&mut self, key: TokenStream, value: &Expr) {
        // Literals are `tracing` values already: no capture, no allocation.
        if let Expr::Lit(lit) = value {
            if matches!(
                lit.lit,
                syn::Lit::Str(_) | syn::Lit::Int(_) | syn::Lit::Float(_) | syn::Lit::Bool(_)
            ) {
                self.fields.push(quote!(#key = #lit));
                return;
            }
        }
        if is_empty_marker(value) {
            self.fields.push(quote!(#key = #value));
            return;
        }
        let (val, var) = (format_ident!("__jets_v{}", self.n), format_ident!("__jets_f{}", self.n));
        self.n += 1;
        let v = capture_for_tracing(quote!(#val), value.span());
        // `let x = &(expr);` keeps a temporary alive to the end of the block, where the span
        // macro reads it.
        self.lets.extend(quote_spanned!(value.span()=> let #val = &(#value);));
        self.lets.extend(quote!(let #var = #v;));
        self.fields.push(quote!(#key = #var.as_dyn()));
    }
}

/// `tracing::field::Empty` (a field recorded later): passed to `tracing` as it is.
fn is_empty_marker(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Empty"))
}
