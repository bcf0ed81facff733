#[jets::record(name = "a", skip_all, name = "b")]
fn f() {}

fn main() {}
