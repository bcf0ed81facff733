#[jets::record(color = "red")]
fn f() {}

fn main() {}
