#[jets::record(colour = "#ff0000")]
fn f() {}

fn main() {}
