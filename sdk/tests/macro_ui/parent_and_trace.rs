fn f(parent: &jets::RecordHandle) {
    #[jets::record(trace = _parent, parent = None)]
    fn g(_parent: &jets::RecordHandle) {}
    g(parent)
}

fn main() {}
