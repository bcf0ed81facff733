//! Numbers as people read them in the commands' text output.
//!
//! A header's `clock_frequency_mhz` may be any positive double (the spec leaves it free-form and
//! the validator accepts 1e-300, 1e300 or a subnormal 5e-324), so durations and the clock itself
//! are printed so that they stay short for any of them (CV-TIME-3): Rust's `{}` never writes an
//! exponent (1e300 is 301 digits), and seconds worked out as `cycles / (mhz * 1e6)` overflow to
//! infinity or round to 0 at such clocks.

/// A duration in seconds with a unit that keeps it readable: `1.250 s`, `3.000 ms`, `12.500 µs`,
/// `8.0 ns`, `250.0 ps`; in scientific notation from a million seconds up (`1.500e7 s`) and below
/// a picosecond (`4.000e-305 s`).
pub fn seconds(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        // Not a duration (no caller passes one): shown as it is rather than as a wrong one.
        format!("{s} s")
    } else if s >= 1e6 {
        format!("{s:.3e} s")
    } else if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else if s >= 1e-9 || s == 0.0 {
        format!("{:.1} ns", s * 1e9)
    } else if s >= 1e-12 {
        format!("{:.1} ps", s * 1e12)
    } else {
        format!("{s:.3e} s")
    }
}

/// `cycles` at a clock of `mhz` (finite and positive, as `Header::clock_frequency_mhz` gives it)
/// as a duration for people ([`seconds`]). Where the seconds are no normal double (past 1.8e308,
/// or below 2.2e-308 where a double loses digits, down to 0), they are worked out in base-10
/// logarithms and printed in scientific notation: four significant digits, never `inf` or 0.
pub fn cycles_time(cycles: u64, mhz: f64) -> String {
    if cycles == 0 {
        return seconds(0.0);
    }
    let s = cycles as f64 / mhz / 1e6;
    if s.is_normal() {
        return seconds(s);
    }
    let log = (cycles as f64).log10() - mhz.log10() - 6.0;
    if !log.is_finite() {
        // Only for a clock that is not finite and positive, which the header reader refuses.
        return format!("{s} s");
    }
    let mut exponent = log.floor();
    let mut mantissa = format!("{:.3}", 10f64.powf(log - exponent));
    if mantissa.starts_with("10") {
        exponent += 1.0;
        mantissa = "1.000".to_owned();
    }
    format!("{mantissa}e{exponent} s")
}

/// A number as `{}` prints it where that is short (zero, and magnitudes from 1e-5 to below
/// 1e16), else in scientific notation (`1e300`, `5e-324`), with the digits that read it back.
pub fn number(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || !a.is_finite() || (1e-5..1e16).contains(&a) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::{cycles_time, number, seconds};

    #[test]
    fn picks_the_unit() {
        assert_eq!(seconds(1.25), "1.250 s");
        assert_eq!(seconds(0.003), "3.000 ms");
        assert_eq!(seconds(12.5e-6), "12.500 µs");
        assert_eq!(seconds(8e-9), "8.0 ns");
        assert_eq!(seconds(0.0), "0.0 ns");
        assert_eq!(seconds(2.5e-10), "250.0 ps");
        assert_eq!(seconds(1.5e7), "1.500e7 s");
        assert_eq!(seconds(4e-305), "4.000e-305 s");
    }

    #[test]
    fn cycles_at_any_clock_read_short() {
        assert_eq!(cycles_time(40, 1000.0), "40.0 ns");
        assert_eq!(cycles_time(0, 1e-300), "0.0 ns");
        assert_eq!(cycles_time(40, 1e300), "4.000e-305 s");
        assert_eq!(cycles_time(40, 1e-300), "4.000e295 s");
        // Past a double's range, and below its normal numbers.
        assert_eq!(cycles_time(40, 5e-324), "8.096e318 s");
        assert_eq!(cycles_time(u64::MAX, 5e-324), "3.734e336 s");
        assert_eq!(cycles_time(1, f64::MAX), "5.563e-315 s");
        assert_eq!(cycles_time(40, 1e305), "4.000e-310 s");
        assert_eq!(cycles_time(1, 1e-6), "1.000 s");
    }

    #[test]
    fn numbers_read_short() {
        assert_eq!(number(1000.0), "1000");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(1e300), "1e300");
        assert_eq!(number(5e-324), "5e-324");
        assert_eq!(number(1e-300), "1e-300");
    }
}
