//! Misuses of `#[jets::record]` are compile errors with clear messages (the expected compiler
//! output is committed next to each case in tests/macro_ui/).

#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/macro_ui/*.rs");
}
