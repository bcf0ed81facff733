//! What the benches share: the clock timed chunks are measured by.

use std::time::{Duration, Instant};

/// The clock producer chunks are timed by: this thread's CPU time, or the wall clock.
#[derive(Clone, Copy)]
pub struct Clock {
    wall: bool,
}

impl Clock {
    pub fn from_env() -> Clock {
        Clock { wall: !cfg!(unix) || std::env::var_os("JETS_BENCH_WALL").is_some_and(|v| v == "1") }
    }

    /// A reading; only differences mean anything.
    pub fn now(self, origin: Instant) -> Duration {
        #[cfg(unix)]
        if !self.wall {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes the timespec it is given, nothing else.
            if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
                return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            }
        }
        origin.elapsed()
    }
}
