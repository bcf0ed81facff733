#[jets::record(ret = true)]
fn f() -> u64 { 1 }

fn main() {}
