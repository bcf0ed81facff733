#[jets::record(skip(cycles))]
fn f(_cycle: u64) {}

fn main() {}
