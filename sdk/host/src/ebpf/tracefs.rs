//! tracefs: mounted when missing, and the tracepoint layouts the BPF programs assume, checked
//! against the running kernel's `format` files.

use std::path::{Path, PathBuf};

/// Where tracefs lives.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// One tracepoint field the BPF programs read: (group/event, field name, offset).
type Field = (&'static str, &'static str, usize);

/// Every field read by `bpf/io.bpf.c`, with the offset its C struct gives it.
pub const FIELDS: &[Field] = &[
    ("raw_syscalls/sys_enter", "id", 8),
    ("raw_syscalls/sys_enter", "args", 16),
    ("raw_syscalls/sys_exit", "id", 8),
    ("raw_syscalls/sys_exit", "ret", 16),
    ("sched/sched_process_fork", "child_pid", 20),
    ("sched/sched_process_exit", "group_dead", 32),
    ("block/block_rq_insert", "dev", 8),
    ("block/block_rq_insert", "sector", 16),
    ("block/block_rq_issue", "dev", 8),
    ("block/block_rq_issue", "sector", 16),
    ("block/block_rq_complete", "dev", 8),
    ("block/block_rq_complete", "sector", 16),
    ("block/block_rq_complete", "nr_sector", 24),
    ("block/block_rq_complete", "error", 28),
    ("block/block_rq_complete", "rwbs", 34),
    ("filemap/mm_filemap_add_to_page_cache", "i_ino", 16),
    ("filemap/mm_filemap_add_to_page_cache", "index", 24),
    ("filemap/mm_filemap_add_to_page_cache", "s_dev", 32),
    ("filemap/mm_filemap_add_to_page_cache", "order", 36),
    ("filemap/mm_filemap_delete_from_page_cache", "i_ino", 16),
    ("filemap/mm_filemap_delete_from_page_cache", "index", 24),
    ("filemap/mm_filemap_delete_from_page_cache", "s_dev", 32),
    ("filemap/mm_filemap_delete_from_page_cache", "order", 36),
    ("filemap/mm_filemap_fault", "i_ino", 8),
    ("filemap/mm_filemap_fault", "s_dev", 16),
    ("filemap/mm_filemap_fault", "index", 24),
    ("writeback/writeback_dirty_folio", "ino", 40),
    ("writeback/writeback_dirty_folio", "index", 48),
    ("sock/inet_sock_set_state", "skaddr", 8),
    ("sock/inet_sock_set_state", "newstate", 20),
    ("sock/inet_sock_set_state", "sport", 24),
    ("sock/inet_sock_set_state", "dport", 26),
    ("sock/inet_sock_set_state", "family", 28),
    ("sock/inet_sock_set_state", "saddr", 32),
    ("sock/inet_sock_set_state", "daddr", 36),
    ("sock/inet_sock_set_state", "saddr_v6", 40),
    ("sock/inet_sock_set_state", "daddr_v6", 56),
    ("sock/sock_send_length", "sk", 8),
    ("sock/sock_send_length", "family", 16),
    ("sock/sock_send_length", "protocol", 18),
    ("sock/sock_send_length", "ret", 20),
    ("sock/sock_recv_length", "sk", 8),
    ("sock/sock_recv_length", "ret", 20),
    ("exceptions/page_fault_user", "address", 8),
    ("exceptions/page_fault_user", "error_code", 24),
    ("io_uring/io_uring_submit_req", "req", 16),
    ("io_uring/io_uring_submit_req", "user_data", 24),
    ("io_uring/io_uring_submit_req", "opcode", 32),
    ("io_uring/io_uring_complete", "req", 16),
    ("io_uring/io_uring_complete", "res", 32),
];

/// Mounts tracefs at [`TRACEFS`] when its `events` directory is missing or empty. Returns whether
/// it mounted it.
pub fn ensure_mounted() -> Result<bool, String> {
    let events = Path::new(TRACEFS).join("events");
    match std::fs::read_dir(&events).map(|mut d| d.next().is_some()) {
        Ok(true) => return Ok(false),
        // Without tracefs, the mount point is an empty sysfs directory anyone may enter: being
        // refused means something is mounted there that this process may not read.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(unreadable(&e));
        }
        _ => {}
    }
    let c = |s: &str| std::ffi::CString::new(s).map_err(|e| e.to_string());
    let (src, target, fstype) = (c("nodev")?, c(TRACEFS)?, c("tracefs")?);
    // SAFETY: all pointers are valid NUL-terminated strings for the call; data may be null.
    let rc =
        unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(format!(
            "tracefs is not mounted at {TRACEFS} and mounting it failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(true)
}

/// The reason given when tracefs is there but refuses this process.
fn unreadable(e: &std::io::Error) -> String {
    const TRACEFS_MAGIC: i64 = 0x7472_6163;
    let c = std::ffi::CString::new(TRACEFS).unwrap_or_default();
    // SAFETY: statfs is plain data; `c` is a valid C string. statfs needs no permission on the
    // directory itself, only on the path to it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let is_tracefs =
        unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0 && st.f_type as i64 == TRACEFS_MAGIC;
    let what = if is_tracefs { "tracefs is mounted" } else { "a file system is mounted" };
    format!(
        "{what} at {TRACEFS} but this process may not read it ({e}): it is root's (mode 0700 \
         unless mounted otherwise), which CAP_BPF + CAP_PERFMON do not get past; run as root, \
         or give this user access (for example `mount -o remount,mode=0755 {TRACEFS}`, or a \
         group with `gid=` and `mode=0750`)"
    )
}

/// The `format` file of a tracepoint.
pub fn format_path(tracepoint: &str) -> PathBuf {
    Path::new(TRACEFS).join("events").join(tracepoint).join("format")
}

/// The offset of `field` in a `format` file's text.
pub fn field_offset(format: &str, field: &str) -> Option<usize> {
    format.lines().find_map(|l| {
        let decl = l.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        let name = decl.rsplit(' ').next()?;
        let name = name.split('[').next()?;
        if name != field {
            return None;
        }
        rest.trim().strip_prefix("offset:")?.split(';').next()?.parse().ok()
    })
}

/// Checks a tracepoint's fields against [`FIELDS`]: `Err` says which field moved or why the
/// format could not be read.
pub fn check(tracepoint: &str) -> Result<(), String> {
    let path = format_path(tracepoint);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("tracepoint {tracepoint}: {}: {e}", path.display()))?;
    for &(_, field, want) in FIELDS.iter().filter(|f| f.0 == tracepoint) {
        match field_offset(&text, field) {
            Some(got) if got == want => {}
            Some(got) => {
                return Err(format!(
                    "tracepoint {tracepoint}: field `{field}` is at offset {got}, the BPF \
                     program expects {want}"
                ))
            }
            None => return Err(format!("tracepoint {tracepoint}: no field `{field}`")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_offsets_from_a_format_file() {
        let f = "name: x\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                 \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\
                 \tfield:__u8 saddr_v6[16];\toffset:40;\tsize:16;\tsigned:0;\n";
        assert_eq!(field_offset(f, "args"), Some(16));
        assert_eq!(field_offset(f, "saddr_v6"), Some(40));
        assert_eq!(field_offset(f, "saddr"), None);
    }
}
