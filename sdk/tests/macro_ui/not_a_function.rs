#[jets::record]
struct S;

fn main() {}
