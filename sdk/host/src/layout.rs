//! Where a timed run's stack lies, chosen rather than left to chance.
//!
//! A simulator's speed can depend on where its stack lies relative to its heap, to within a few
//! bytes: most likely "4K aliasing", where a hot local and a hot heap word share the low twelve
//! bits of their address and the CPU takes the load of one as waiting on the store to the other
//! (the VM below has no counters to confirm it). Linux places the main thread's stack at a random
//! offset in each process, so the same untraced Tiny5 run (`pipeline_modes untraced`) took
//! 0.44–0.50 s in most processes and 0.54–0.64 s in about one in ten, the same in every run of that
//! process (2-core Intel Xeon VM, 2026-12-02; with address randomization off, moving the stack
//! through a page in steps of 32 bytes, then 16 around it, made one band of 96 bytes slow, every
//! time). In one `jets bench` process every untraced run, and so every slowdown it reported, had
//! that luck: three processes in a row measured Tiny5 untraced at 0.49, 0.62 and 0.55 s while each
//! traced mode took the same time in all three (capture off 0.549–0.554 s), so capture off read
//! 1.13×, 0.88× and 0.99×. With each round run through [`run_at`], the next three processes
//! measured it at 0.441, 0.446 and 0.450 s, and capture off at 1.10–1.13×.
//!
//! [`run_at`] runs a measurement on a thread of its own, whose stack starts at the same place in
//! every process, [`STACK_OFFSETS`]`[i]` bytes below its top: the layout is then chosen, the same
//! in every process for the same `i`, and a benchmark that gives each of its rounds another `i`
//! takes its median over several layouts instead of one drawn at random.

/// The stack offsets [`run_at`] cycles through, in bytes: eight places spread over a 4 KiB page,
/// each a different multiple of 16 modulo 256 too, so that no two share their low eight bits.
pub const STACK_OFFSETS: [usize; 8] = [0, 528, 1056, 1584, 2112, 2640, 3168, 3696];

/// The stack offset of `layout`, in bytes: [`STACK_OFFSETS`]`[layout % 8]`, where [`run_at`]
/// puts the run of that layout.
///
/// ```
/// assert_eq!(jets_host::layout::offset(1), jets_host::layout::offset(9));
/// ```
pub fn offset(layout: usize) -> usize {
    STACK_OFFSETS[layout % STACK_OFFSETS.len()]
}

/// Runs `f` on a new thread whose stack lies [`offset`]`(layout)` bytes deeper than a
/// new thread's stack starts, and returns what it returned (a panic in `f` is resumed here).
///
/// The calling thread waits; pin the new thread from inside `f` (threads inherit the CPUs of the
/// thread that starts them, so a pin made before the call holds too).
///
/// ```
/// let sums: Vec<u64> = (0..3)
///     .map(|layout| jets_host::layout::run_at(layout, || (0..1000u64).sum()))
///     .collect();
/// assert_eq!(sums, [499_500; 3]);
/// ```
pub fn run_at<R: Send>(layout: usize, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        let run = s.spawn(move || deeper(layout % STACK_OFFSETS.len(), f));
        match run.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Calls `f` below a frame of [`STACK_OFFSETS`]`[i]` bytes (and what the frame needs besides,
/// the same for every size).
fn deeper<R>(i: usize, f: impl FnOnce() -> R) -> R {
    // One monomorphized frame per size: a variable-size stack allocation does not exist in
    // Rust, and a recursion of small frames would make the offset depend on the compiler's
    // frame size.
    match i {
        0 => below::<{ STACK_OFFSETS[0] }, R>(f),
        1 => below::<{ STACK_OFFSETS[1] }, R>(f),
        2 => below::<{ STACK_OFFSETS[2] }, R>(f),
        3 => below::<{ STACK_OFFSETS[3] }, R>(f),
        4 => below::<{ STACK_OFFSETS[4] }, R>(f),
        5 => below::<{ STACK_OFFSETS[5] }, R>(f),
        6 => below::<{ STACK_OFFSETS[6] }, R>(f),
        _ => below::<{ STACK_OFFSETS[7] }, R>(f),
    }
}

/// Calls `f` below an array of `N` bytes, which the optimizer may not remove: it is handed to
/// `black_box` before and after the call.
#[inline(never)]
fn below<const N: usize, R>(f: impl FnOnce() -> R) -> R {
    let mut pad = [0u8; N];
    std::hint::black_box(&mut pad);
    let r = f();
    std::hint::black_box(&pad);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address of a local of the calling frame.
    #[inline(never)]
    fn here() -> usize {
        let x = 0u8;
        std::hint::black_box(&x) as *const u8 as usize
    }

    #[test]
    fn each_layout_moves_the_stack_by_its_offset() {
        // Each run's local lies deeper (lower) than the first layout's by its offset, give or
        // take the frame's alignment: a thread's stack starts at the same place each time.
        let at: Vec<usize> = (0..STACK_OFFSETS.len()).map(|i| run_at(i, here)).collect();
        for (i, &a) in at.iter().enumerate().skip(1) {
            let deeper_by = at[0].wrapping_sub(a) % 4096;
            let want = STACK_OFFSETS[i] % 4096;
            assert!(
                deeper_by.abs_diff(want) < 64,
                "layout {i}: the stack moved {deeper_by} bytes modulo a page, wanted {want}"
            );
        }
    }

    #[test]
    fn a_panic_in_the_run_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| run_at(1, || panic!("inside")));
        let panic = caught.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"inside"));
    }
}
