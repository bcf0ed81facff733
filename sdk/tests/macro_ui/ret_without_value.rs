#[jets::record(ret)]
fn f() {}

fn main() {}
