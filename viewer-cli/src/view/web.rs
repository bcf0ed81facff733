//! The front-end (HTML, CSS, vanilla JavaScript, no build step), embedded in the binary from
//! `viewer-cli/src/web/`. The live viewer loads the script and style by URL; `jets gantt` inlines
//! them together with the data.

/// The page's stylesheet.
pub const CSS: &str = include_str!("../web/viewer.css");
/// The page's script.
pub const JS: &str = include_str!("../web/viewer.js");
/// The page, with `<!--STYLE-->`, `<!--DATA-->` and `<!--SCRIPT-->` to fill in.
const HTML: &str = include_str!("../web/index.html");

/// The page served by `jets view`.
pub fn page_live() -> String {
    HTML.replace("<!--STYLE-->", r#"<link rel="stylesheet" href="viewer.css">"#)
        .replace("<!--DATA-->", "")
        .replace("<!--SCRIPT-->", r#"<script src="viewer.js"></script>"#)
}

/// A self-contained page with `data` (JSON) inlined.
pub fn page_static(data: &[u8]) -> String {
    let mut json = String::with_capacity(data.len() + 64);
    // Inside <script>, only "</script" ends the element, but escaping every '<', '>' and '&' (and
    // the two line separators old parsers choke on) keeps any markup in names inert whatever the
    // parser does; JSON.parse turns the escapes back into the characters.
    for c in String::from_utf8_lossy(data).chars() {
        match c {
            '<' => json.push_str("\\u003c"),
            '>' => json.push_str("\\u003e"),
            '&' => json.push_str("\\u0026"),
            '\u{2028}' => json.push_str("\\u2028"),
            '\u{2029}' => json.push_str("\\u2029"),
            c => json.push(c),
        }
    }
    let data = format!(r#"<script type="application/json" id="jets-data">{json}</script>"#);
    HTML.replace("<!--STYLE-->", &format!("<style>{}</style>", CSS.replace("</", "<\\/")))
        .replace("<!--DATA-->", &data)
        .replace("<!--SCRIPT-->", &format!("<script>{}</script>", JS.replace("</", "<\\/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_assets_cannot_close_their_element() {
        assert!(!JS.contains("</"), "viewer.js must not contain `</`");
        assert!(!CSS.contains("</"), "viewer.css must not contain `</`");
    }

    #[test]
    fn inlined_data_is_inert() {
        let data = br#"{"name":"</script><script>alert(1)</script> & \u2028"}"#;
        let page = page_static(data);
        assert_eq!(page.matches("<script").count(), 2, "the data element and the viewer script");
        assert!(page.contains(
            r#"\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e \u0026"#
        ));
        let live = page_live();
        assert!(live.contains(r#"<script src="viewer.js"></script>"#) && !live.contains("<!--"));
    }
}
