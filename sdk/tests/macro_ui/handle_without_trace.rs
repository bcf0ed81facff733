#[jets::record(handle = me)]
fn f() {}

fn main() {}
