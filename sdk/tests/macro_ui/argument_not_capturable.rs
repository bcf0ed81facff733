struct Cpu;

#[jets::record]
fn step(cpu: &mut Cpu, cycles: u64) {}

fn main() {}
