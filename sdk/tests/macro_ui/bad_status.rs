#[jets::record(status = "done")]
fn f() {}

fn main() {}
