#[jets::record(fields(slot = 1, slot = 2))]
fn f() {}

fn main() {}
