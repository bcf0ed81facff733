//! Numbers as people read them in the commands' text output.

/// A duration in seconds with a unit that keeps it readable: `1.250 s`, `3.000 ms`, `12.500 µs`,
/// `8.0 ns`.
pub fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn picks_the_unit() {
        assert_eq!(super::seconds(1.25), "1.250 s");
        assert_eq!(super::seconds(0.003), "3.000 ms");
        assert_eq!(super::seconds(12.5e-6), "12.500 µs");
        assert_eq!(super::seconds(8e-9), "8.0 ns");
    }
}
