#[jets::record(skip(_a), args(_b))]
fn f(_a: u64, _b: u64) {}

fn main() {}
