//! Parsing the options of `#[jets::record(...)]`, with a clear error for every misuse.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

/// Every option, for the "unknown option" message.
const OPTIONS: &str =
    "name, record_type, description, parent, trace, handle, clk, end_clk, fields(..), \
                       skip(..), skip_all, args(..), ret, err, color, unit_id, thread_id, \
                       subunit_id, display_label, status, criticality";

/// The record hints: option name = the spec's `data` key = the `RecordBuilder` method.
pub const HINTS: [&str; 7] = jets_vocab::RECORD_HINT_KEYS;

/// A `data` key in `fields(..)`: `a`, `a.b` or `"any text"`.
pub struct Key {
    /// The key's text.
    pub text: String,
    /// The key as `tracing` field-name tokens.
    pub tokens: TokenStream,
}

/// Which arguments go into `data`.
#[derive(Default)]
pub enum Capture {
    /// All but the listed ones (`skip(..)`; no option means all).
    #[default]
    All,
    /// All but these.
    Skip(Vec<Ident>),
    /// None.
    None,
    /// Only these (`args(..)`).
    Only(Vec<Ident>),
}

/// A hint's value.
pub enum HintValue {
    /// Checked at compile time: the expression to use natively, and the text for `tracing`.
    Literal { native: TokenStream, text: String },
    /// Any expression of the builder method's argument type.
    Expr(Expr),
}

/// The parsed options.
#[derive(Default)]
pub struct Options {
    pub name: Option<LitStr>,
    pub record_type: Option<Expr>,
    pub description: Option<Expr>,
    pub parent: Option<Expr>,
    pub trace: Option<Expr>,
    /// With `trace`: the name under which the body sees its own record.
    pub handle: Option<Ident>,
    pub clk: Option<Expr>,
    pub end_clk: Option<Expr>,
    pub fields: Vec<(Key, Expr)>,
    pub capture: Capture,
    capture_set: Option<&'static str>,
    pub ret: bool,
    pub err: bool,
    pub hints: Vec<(&'static str, HintValue)>,
    seen: Vec<String>,
}

impl Options {
    /// Parses the attribute's arguments.
    pub fn parse(args: TokenStream) -> syn::Result<Options> {
        let mut o = Options::default();
        let parser = syn::meta::parser(|meta| o.one(meta));
        syn::parse::Parser::parse2(parser, args)?;
        if let (Some(parent), Some(_)) = (&o.parent, &o.trace) {
            return Err(syn::Error::new_spanned(
                parent,
                "`parent` and `trace` cannot be combined: with `trace = ..` the record's parent is \
                 what `trace` names (a `jets::Trace` for a root, a `jets::RecordHandle` for a child)",
            ));
        }
        if let (Some(handle), None) = (&o.handle, &o.trace) {
            return Err(syn::Error::new_spanned(
                handle,
                "`handle` needs `trace = ..` (a native record); in a `tracing` span, use \
                 `tracing::Span::current()`",
            ));
        }
        Ok(o)
    }

    fn one(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let Some(ident) = meta.path.get_ident().map(Ident::to_string) else {
            return Err(meta.error(format!("unknown option; expected one of: {OPTIONS}")));
        };
        if self.seen.contains(&ident) {
            return Err(meta.error(format!("duplicate option `{ident}`")));
        }
        self.seen.push(ident.clone());
        match ident.as_str() {
            "name" => {
                let lit: Expr = meta.value()?.parse()?;
                match lit {
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => self.name = Some(s),
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`name` must be a string literal (record names are static text)",
                        ))
                    }
                }
            }
            "record_type" => self.record_type = Some(meta.value()?.parse()?),
            "description" => self.description = Some(meta.value()?.parse()?),
            "parent" => self.parent = Some(meta.value()?.parse()?),
            "trace" => self.trace = Some(meta.value()?.parse()?),
            "handle" => self.handle = Some(meta.value()?.parse()?),
            "clk" => self.clk = Some(meta.value()?.parse()?),
            "end_clk" => self.end_clk = Some(meta.value()?.parse()?),
            "ret" => self.ret = flag(&meta, "ret")?,
            "err" => self.err = flag(&meta, "err")?,
            "fields" => {
                let content;
                syn::parenthesized!(content in meta.input);
                self.fields = parse_fields(&content)?;
            }
            "skip" | "skip_all" | "args" => {
                let opt: &'static str = match ident.as_str() {
                    "skip" => "skip",
                    "skip_all" => "skip_all",
                    _ => "args",
                };
                if let Some(earlier) = self.capture_set {
                    return Err(meta.error(format!(
                        "`{opt}` cannot be combined with `{earlier}`: choose which arguments \
                         are captured in one way"
                    )));
                }
                self.capture_set = Some(opt);
                self.capture = match opt {
                    "skip_all" => {
                        flag(&meta, "skip_all")?;
                        Capture::None
                    }
                    list => {
                        let content;
                        syn::parenthesized!(content in meta.input);
                        let names: Punctuated<Ident, Token![,]> =
                            content.parse_terminated(Ident::parse_any, Token![,])?;
                        // `self` is never captured: accept it, as `tracing::instrument` does.
                        let names = names.into_iter().filter(|n| n != "self").collect();
                        if list == "skip" {
                            Capture::Skip(names)
                        } else {
                            Capture::Only(names)
                        }
                    }
                };
            }
            other => match HINTS.iter().copied().find(|h| *h == other) {
                Some(hint) => {
                    let value: Expr = meta.value()?.parse()?;
                    self.hints.push((hint, hint_value(hint, value)?));
                }
                None => {
                    return Err(
                        meta.error(format!("unknown option `{other}`; expected one of: {OPTIONS}"))
                    )
                }
            },
        }
        Ok(())
    }
}

/// A bare flag such as `ret`: no value allowed.
fn flag(meta: &ParseNestedMeta<'_>, name: &str) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        return Err(meta.error(format!("`{name}` takes no value: write just `{name}`")));
    }
    Ok(true)
}

/// `k = expr, a.b = expr, "text" = expr`.
fn parse_fields(input: ParseStream<'_>) -> syn::Result<Vec<(Key, Expr)>> {
    let mut out: Vec<(Key, Expr)> = Vec::new();
    while !input.is_empty() {
        let key = if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            Key { text: lit.value(), tokens: lit.to_token_stream() }
        } else {
            let first: Ident = input.parse()?;
            let mut text = first.to_string();
            let mut tokens = first.to_token_stream();
            while input.peek(Token![.]) {
                let dot: Token![.] = input.parse()?;
                let next: Ident = input.parse()?;
                text.push('.');
                text.push_str(&next.to_string());
                tokens.extend(quote!(#dot #next));
            }
            Key { text, tokens }
        };
        if out.iter().any(|(k, _)| k.text == key.text) {
            return Err(syn::Error::new_spanned(
                &key.tokens,
                format!("duplicate field `{}`", key.text),
            ));
        }
        input.parse::<Token![=]>().map_err(|e| {
            syn::Error::new(e.span(), format!("expected `{} = <value>` in fields(..)", key.text))
        })?;
        // `?x` and `%x` as in `tracing`: the Debug or Display text.
        let value: Expr = if input.peek(Token![?]) {
            input.parse::<Token![?]>()?;
            let e: Expr = input.parse()?;
            syn::parse_quote!(::std::format!("{:?}", #e))
        } else if input.peek(Token![%]) {
            input.parse::<Token![%]>()?;
            let e: Expr = input.parse()?;
            syn::parse_quote!(::std::format!("{}", #e))
        } else {
            input.parse()?
        };
        out.push((key, value));
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(out)
}

/// Checks literal colors and statuses now, so a typo fails the build rather than the trace.
fn hint_value(hint: &str, value: Expr) -> syn::Result<HintValue> {
    let Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(lit), .. }) = &value else {
        return Ok(HintValue::Expr(value));
    };
    let text = lit.value();
    match hint {
        "color" => {
            let hex = text
                .strip_prefix('#')
                .filter(|h| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            let Some(rgb) = hex.and_then(|h| u32::from_str_radix(h, 16).ok()) else {
                return Err(syn::Error::new_spanned(
                    lit,
                    format!("color {text:?} is not of the form \"#rrggbb\""),
                ));
            };
            let rgb = syn::LitInt::new(&format!("{rgb:#08x}"), Span::call_site());
            Ok(HintValue::Literal {
                native: quote!(::jets::format::Color::rgb(#rgb)),
                text: format!("#{}", text[1..].to_ascii_lowercase()),
            })
        }
        "status" => {
            let status = match text.parse::<jets_vocab::Status>() {
                Ok(status) => status,
                Err(e) => {
                    let expected = e.expected().split_whitespace().collect::<Vec<_>>().join(", ");
                    return Err(syn::Error::new_spanned(
                        lit,
                        format!("status {text:?} is not one of {expected}"),
                    ));
                }
            };
            // The variant's name is its Debug spelling (`Flushed`), the same enum the SDK uses.
            let variant = Ident::new(&format!("{status:?}"), lit.span());
            Ok(HintValue::Literal { native: quote!(::jets::format::Status::#variant), text })
        }
        _ => Ok(HintValue::Expr(value)),
    }
}
