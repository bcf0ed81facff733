//! Which syscalls the collector traces, and what each one means, for this architecture.
//!
//! The BPF side knows no syscall numbers: user space fills its `sysclass` map from [`TABLE`], so
//! adding an architecture is adding a table here.

/// What a traced syscall is, for the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sys {
    /// `open`-like: returns an fd for the path argument; `flags_arg` holds the `O_*` flags.
    Open {
        /// Argument holding the open flags.
        flags_arg: u8,
    },
    /// Sequential read from an fd.
    Read,
    /// Sequential write to an fd.
    Write,
    /// Positioned read (`offset_arg`).
    PRead {
        /// Argument holding the offset.
        offset_arg: u8,
    },
    /// Positioned write.
    PWrite {
        /// Argument holding the offset.
        offset_arg: u8,
    },
    /// `close`.
    Close,
    /// `fsync`.
    Fsync,
    /// `fdatasync`.
    Fdatasync,
    /// `mmap`.
    Mmap,
    /// `munmap`.
    Munmap,
    /// `msync`.
    Msync,
    /// `madvise`.
    Madvise,
    /// A rename of path 0 to path 1.
    Rename,
    /// `unlink`/`unlinkat` (`flags_arg` may hold `AT_REMOVEDIR`).
    Unlink {
        /// Argument holding the `AT_*` flags, if any.
        flags_arg: Option<u8>,
    },
    /// `rmdir`.
    Rmdir,
    /// `mkdir`-like; `mode_arg` holds the mode.
    Mkdir {
        /// Argument holding the mode.
        mode_arg: u8,
    },
    /// `truncate` (by path) or `ftruncate` (by fd): `len_arg` is the new length.
    Truncate {
        /// Argument holding the length.
        len_arg: u8,
    },
    /// `fallocate(fd, mode, offset, len)`.
    Fallocate,
    /// `sendfile(out, in, offset, count)`.
    Sendfile,
    /// `sync`/`syncfs`.
    Sync,
    /// `lseek`: not reported, keeps the decoder's file offsets right.
    Lseek,
    /// `dup`-like: not reported, keeps the decoder's fd table right.
    Dup,
    /// `fcntl`: not reported; `F_DUPFD`/`F_DUPFD_CLOEXEC` duplicate like `dup`.
    Fcntl,
    /// `io_uring_enter(fd, to_submit, ...)`.
    UringEnter,
}

/// One row of the table: number, name, meaning, path arguments (indices into the 6 arguments).
pub type Entry = (u32, &'static str, Sys, &'static [u8]);

/// The x86-64 syscalls the collector traces.
#[cfg(target_arch = "x86_64")]
pub const TABLE: &[Entry] = &[
    (0, "read", Sys::Read, &[]),
    (1, "write", Sys::Write, &[]),
    (2, "open", Sys::Open { flags_arg: 1 }, &[0]),
    (3, "close", Sys::Close, &[]),
    (8, "lseek", Sys::Lseek, &[]),
    (9, "mmap", Sys::Mmap, &[]),
    (11, "munmap", Sys::Munmap, &[]),
    (17, "pread64", Sys::PRead { offset_arg: 3 }, &[]),
    (18, "pwrite64", Sys::PWrite { offset_arg: 3 }, &[]),
    (19, "readv", Sys::Read, &[]),
    (20, "writev", Sys::Write, &[]),
    (26, "msync", Sys::Msync, &[]),
    (28, "madvise", Sys::Madvise, &[]),
    (32, "dup", Sys::Dup, &[]),
    (33, "dup2", Sys::Dup, &[]),
    (72, "fcntl", Sys::Fcntl, &[]),
    (40, "sendfile", Sys::Sendfile, &[]),
    (74, "fsync", Sys::Fsync, &[]),
    (75, "fdatasync", Sys::Fdatasync, &[]),
    (76, "truncate", Sys::Truncate { len_arg: 1 }, &[0]),
    (77, "ftruncate", Sys::Truncate { len_arg: 1 }, &[]),
    (82, "rename", Sys::Rename, &[0, 1]),
    (83, "mkdir", Sys::Mkdir { mode_arg: 1 }, &[0]),
    (84, "rmdir", Sys::Rmdir, &[0]),
    (85, "creat", Sys::Open { flags_arg: 0xff }, &[0]),
    (87, "unlink", Sys::Unlink { flags_arg: None }, &[0]),
    (162, "sync", Sys::Sync, &[]),
    (257, "openat", Sys::Open { flags_arg: 2 }, &[1]),
    (258, "mkdirat", Sys::Mkdir { mode_arg: 2 }, &[1]),
    (263, "unlinkat", Sys::Unlink { flags_arg: Some(2) }, &[1]),
    (264, "renameat", Sys::Rename, &[1, 3]),
    (285, "fallocate", Sys::Fallocate, &[]),
    (292, "dup3", Sys::Dup, &[]),
    (295, "preadv", Sys::PRead { offset_arg: 3 }, &[]),
    (296, "pwritev", Sys::PWrite { offset_arg: 3 }, &[]),
    (306, "syncfs", Sys::Sync, &[]),
    (316, "renameat2", Sys::Rename, &[1, 3]),
    (426, "io_uring_enter", Sys::UringEnter, &[]),
    (437, "openat2", Sys::Open { flags_arg: 0xfe }, &[1]),
];

/// The aarch64 syscalls the collector traces (the generic syscall table: no legacy path calls).
#[cfg(target_arch = "aarch64")]
pub const TABLE: &[Entry] = &[
    (63, "read", Sys::Read, &[]),
    (64, "write", Sys::Write, &[]),
    (57, "close", Sys::Close, &[]),
    (62, "lseek", Sys::Lseek, &[]),
    (222, "mmap", Sys::Mmap, &[]),
    (215, "munmap", Sys::Munmap, &[]),
    (67, "pread64", Sys::PRead { offset_arg: 3 }, &[]),
    (68, "pwrite64", Sys::PWrite { offset_arg: 3 }, &[]),
    (65, "readv", Sys::Read, &[]),
    (66, "writev", Sys::Write, &[]),
    (227, "msync", Sys::Msync, &[]),
    (233, "madvise", Sys::Madvise, &[]),
    (23, "dup", Sys::Dup, &[]),
    (24, "dup3", Sys::Dup, &[]),
    (25, "fcntl", Sys::Fcntl, &[]),
    (71, "sendfile", Sys::Sendfile, &[]),
    (82, "fsync", Sys::Fsync, &[]),
    (83, "fdatasync", Sys::Fdatasync, &[]),
    (45, "truncate", Sys::Truncate { len_arg: 1 }, &[0]),
    (46, "ftruncate", Sys::Truncate { len_arg: 1 }, &[]),
    (81, "sync", Sys::Sync, &[]),
    (267, "syncfs", Sys::Sync, &[]),
    (56, "openat", Sys::Open { flags_arg: 2 }, &[1]),
    (34, "mkdirat", Sys::Mkdir { mode_arg: 2 }, &[1]),
    (35, "unlinkat", Sys::Unlink { flags_arg: Some(2) }, &[1]),
    (38, "renameat", Sys::Rename, &[1, 3]),
    (47, "fallocate", Sys::Fallocate, &[]),
    (69, "preadv", Sys::PRead { offset_arg: 3 }, &[]),
    (70, "pwritev", Sys::PWrite { offset_arg: 3 }, &[]),
    (276, "renameat2", Sys::Rename, &[1, 3]),
    (426, "io_uring_enter", Sys::UringEnter, &[]),
    (437, "openat2", Sys::Open { flags_arg: 0xfe }, &[1]),
];

/// The table entry of syscall `nr`.
pub fn lookup(nr: i64) -> Option<&'static Entry> {
    TABLE.iter().find(|e| i64::from(e.0) == nr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_in_the_bpf_map() {
        let mut seen = std::collections::HashSet::new();
        for e in TABLE {
            assert!(seen.insert(e.0), "{} twice", e.0);
            assert!((e.0 as usize) < super::super::event::MAX_SYSCALL);
            assert!(e.3.len() <= 2 && e.3.iter().all(|&a| a < 6));
        }
        assert_eq!(lookup(TABLE[0].0.into()).map(|e| e.1), Some(TABLE[0].1));
    }
}
