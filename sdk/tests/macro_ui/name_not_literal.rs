const NAME: &str = "x";

#[jets::record(name = NAME)]
fn f() {}

fn main() {}
