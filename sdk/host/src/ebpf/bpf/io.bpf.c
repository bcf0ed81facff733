// SPDX-License-Identifier: GPL-2.0 OR MIT
// I/O collector programs (jets_host::ebpf). Tracepoints only: this project's kernels have neither
// kprobes nor fentry. Every layout below mirrors /sys/kernel/tracing/events/<group>/<name>/format;
// user space checks those offsets against the running kernel before it attaches anything
// (sdk/src/host/ebpf/tracefs.rs), so a kernel with another layout is refused, never misread.
// Self-contained on purpose: no libbpf or kernel headers, only clang.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_ANY 0

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_get_current_comm)(void *buf, __u32 size) = (void *)16;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *src) = (void *)112;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static long (*bpf_probe_read_user_str)(void *dst, __u32 size, const void *src) = (void *)114;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;

// Keep in step with sdk/src/host/ebpf/event.rs.
#define PATH_LEN 256
#define MAX_SYSCALL 512

enum kind { K_SYSCALL = 1, K_SYSCALL_PATHS = 2, K_BLOCK = 3, K_CACHE = 4, K_NET = 5, K_FAULT = 6,
            K_URING = 7, K_PROC = 8 };
// Indices of the per-stream lost-event counters.
enum stream { S_FS = 0, S_BLOCK = 1, S_CACHE = 2, S_NET = 3, S_FAULT = 4, S_URING = 5, S_PROC = 6,
              S_COUNT = 7 };
enum cache_op { C_ADD = 1, C_EVICT = 2, C_DIRTY = 3, C_FAULT = 4 };
enum proc_op { P_FORK = 1, P_EXIT = 2, P_EXEC = 3 };

struct hdr {
    __u32 kind;
    __u32 pid;
    __u32 tid;
    __u32 cpu;
    __u64 ts;
    char comm[16];
    // The simulator's cycle at `ts`, read from its SimClock when the record is made in a thread
    // of the simulator process (NO_CLK otherwise: other processes, completions, no simulator).
    __u64 clk;
};

#define NO_CLK (~0ULL)

// Where the simulator's cycle counter lives: its process and the counter's address (0 = none).
struct simclk {
    __u32 tgid;
    __u32 pad;
    __u64 addr;
};

// How user space classifies syscall numbers (arch-specific, filled from Rust): trace it or not,
// and which arguments are user-space path strings (0xff = none).
struct sysclass {
    __u8 trace;
    __u8 path_arg[2];
    __u8 stream;
};

// A syscall between entry and exit. Paths live in a separate map so the common case (no path
// argument) copies 80 bytes per syscall, not 600.
struct inflight {
    __u64 ts;
    __u64 clk;
    __s64 nr;
    __u64 args[6];
    __u32 npaths;
    __u32 pad;
};

struct inflight_paths {
    __u16 path_len[2];
    __u32 pad;
    char path[2][PATH_LEN];
};

struct scratch {
    struct inflight f;
    struct inflight_paths p;
};

struct sys_event {
    struct hdr h;
    __s64 nr;
    __s64 ret;
    __u64 args[6];
    __u64 latency_ns;
    __u16 path_len[2];
    __u32 pad;
};

struct sys_path_event {
    struct sys_event e;
    char path[2][PATH_LEN];
};

struct block_key {
    __u32 dev;
    __u32 pad;
    __u64 sector;
};

struct block_start {
    __u32 pid;
    __u32 tid;
    __u64 insert_ts;
    __u64 issue_ts;
    char comm[16];
};

struct block_event {
    struct hdr h;
    __u32 dev;
    __u32 nr_sector;
    __u64 sector;
    __u64 insert_ts;
    __u64 issue_ts;
    __s32 error;
    char rwbs[12];
};

struct cache_event {
    struct hdr h;
    __u64 ino;
    __u64 index;
    __u32 dev;
    __u32 op;
    __u32 pages;
    __u32 pad;
};

struct sock_addrs {
    __u16 family;
    __u16 sport;
    __u16 dport;
    __u16 pad;
    __u8 saddr[16];
    __u8 daddr[16];
};

struct net_event {
    struct hdr h;
    __u64 sk;
    __u16 family;
    __u16 protocol;
    __s32 size;
    __u32 dir;
    __u32 known;
    struct sock_addrs a;
};

struct fault_event {
    struct hdr h;
    __u64 address;
    __u64 ip;
    __u64 error_code;
};

struct uring_start {
    __u32 pid;
    __u32 tid;
    __u64 ts;
    __u64 user_data;
    __u32 opcode;
    __u32 pad;
    char comm[16];
};

struct uring_event {
    struct hdr h;
    __u64 user_data;
    __u64 submit_ts;
    __u32 opcode;
    __s32 res;
    __u32 submit_tid;
    __u32 pad;
};

struct proc_event {
    struct hdr h;
    __u32 op;
    __u32 child;
};

// The traced process tree: tgid -> 1.
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8192); __type(key, __u32); __type(value, __u8); } pids SEC(".maps");
// Threads of the collector itself, never traced.
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64); __type(key, __u32); __type(value, __u8); } ignore SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, MAX_SYSCALL); __type(key, __u32); __type(value, struct sysclass); } sysclass SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8192); __type(key, __u32); __type(value, struct inflight); } inflight SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8192); __type(key, __u32); __type(value, struct inflight_paths); } inflight_paths SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct scratch); } scratch SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 16384); __type(key, struct block_key); __type(value, struct block_start); } blocks SEC(".maps");
// Inodes the tree touched: their evictions are reported whoever evicts them (often kswapd).
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 65536); __type(key, __u64); __type(value, __u8); } inodes SEC(".maps");
// TCP socket addresses, learned from inet_sock_set_state (which runs in softirq context too).
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 16384); __type(key, __u64); __type(value, struct sock_addrs); } socks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 16384); __type(key, __u64); __type(value, struct uring_start); } urings SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, S_COUNT); __type(key, __u32); __type(value, __u64); } lost SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct simclk); } simclk SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 1 << 24); } events SEC(".maps");

static __attribute__((always_inline)) void count_lost(__u32 stream) {
    __u64 *n = bpf_map_lookup_elem(&lost, &stream);
    if (n)
        *n += 1;
}

// Whether the current task belongs to the traced tree (and is not the collector).
static __attribute__((always_inline)) int traced(__u64 pid_tgid) {
    __u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
    if (!bpf_map_lookup_elem(&pids, &tgid))
        return 0;
    return bpf_map_lookup_elem(&ignore, &tid) == 0;
}

// The simulator's cycle now, when the current task (pid_tgid) is a thread of the simulator: its
// memory is the current address space, so the counter is read where the simulator keeps it.
static __attribute__((always_inline)) __u64 read_clk(__u64 pid_tgid) {
    __u32 zero = 0;
    struct simclk *c = bpf_map_lookup_elem(&simclk, &zero);
    __u64 v = NO_CLK;
    if (!c || !c->addr || c->tgid != (__u32)(pid_tgid >> 32))
        return NO_CLK;
    if (bpf_probe_read_user(&v, sizeof(v), (const void *)c->addr) != 0)
        return NO_CLK;
    return v;
}

// `pid_tgid` is the current task's.
static __attribute__((always_inline)) void fill_hdr(struct hdr *h, __u32 kind, __u64 pid_tgid, __u64 ts) {
    h->kind = kind;
    h->pid = pid_tgid >> 32;
    h->tid = (__u32)pid_tgid;
    h->cpu = bpf_get_smp_processor_id();
    h->ts = ts;
    bpf_get_current_comm(h->comm, sizeof(h->comm));
    h->clk = read_clk(pid_tgid);
}

struct sys_enter_args { __u64 common; __s64 id; __u64 args[6]; };
struct sys_exit_args { __u64 common; __s64 id; __s64 ret; };

static __attribute__((always_inline)) __u16 read_path(char *dst, __u64 src) {
    long n = bpf_probe_read_user_str(dst, PATH_LEN, (const void *)src);
    if (n < 0) {
        dst[0] = 0;
        return 0xffff; // unreadable: user space reports "[decode_error]"
    }
    return (__u16)n;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int sys_enter(struct sys_enter_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    __s64 id = ctx->id;
    if (id < 0 || id >= MAX_SYSCALL)
        return 0;
    __u32 nr = (__u32)id, zero = 0;
    struct sysclass *c = bpf_map_lookup_elem(&sysclass, &nr);
    if (!c || !c->trace)
        return 0;
    struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
    if (!s)
        return 0;
    struct inflight *f = &s->f;
    f->nr = id;
    for (int i = 0; i < 6; i++)
        f->args[i] = ctx->args[i];
    f->npaths = 0;
    f->pad = 0;
    __u8 a0 = c->path_arg[0], a1 = c->path_arg[1];
    __u32 tid = (__u32)pt;
    if (a0 < 6) {
        struct inflight_paths *p = &s->p;
        p->path_len[1] = 0;
        p->path_len[0] = read_path(p->path[0], f->args[a0 & 7]);
        f->npaths = 1;
        if (a1 < 6) {
            p->path_len[1] = read_path(p->path[1], f->args[a1 & 7]);
            f->npaths = 2;
        }
        bpf_map_update_elem(&inflight_paths, &tid, p, BPF_ANY);
    }
    f->ts = bpf_ktime_get_ns();
    f->clk = read_clk(pt);
    bpf_map_update_elem(&inflight, &tid, f, BPF_ANY);
    return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int sys_exit(struct sys_exit_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tid = (__u32)pt;
    struct inflight *f = bpf_map_lookup_elem(&inflight, &tid);
    if (!f)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    struct inflight_paths *p = 0;
    if (f->npaths)
        p = bpf_map_lookup_elem(&inflight_paths, &tid);
    struct sys_event *e;
    struct sys_path_event *pe = 0;
    if (p) {
        pe = bpf_ringbuf_reserve(&events, sizeof(struct sys_path_event), 0);
        e = pe ? &pe->e : 0;
    } else {
        e = bpf_ringbuf_reserve(&events, sizeof(struct sys_event), 0);
    }
    if (!e) {
        count_lost(S_FS);
        goto done;
    }
    fill_hdr(&e->h, pe ? K_SYSCALL_PATHS : K_SYSCALL, pt, f->ts);
    e->h.clk = f->clk; // the cycle at the entry, with `ts`
    e->nr = f->nr;
    e->ret = ctx->ret;
    for (int i = 0; i < 6; i++)
        e->args[i] = f->args[i];
    e->latency_ns = now - f->ts;
    e->path_len[0] = 0;
    e->path_len[1] = 0;
    e->pad = 0;
    if (pe && p) {
        e->path_len[0] = p->path_len[0];
        e->path_len[1] = p->path_len[1];
        bpf_probe_read_kernel(pe->path[0], PATH_LEN, p->path[0]);
        bpf_probe_read_kernel(pe->path[1], PATH_LEN, p->path[1]);
        bpf_ringbuf_submit(pe, 0);
    } else {
        bpf_ringbuf_submit(e, 0);
    }
done:
    if (f->npaths)
        bpf_map_delete_elem(&inflight_paths, &tid);
    bpf_map_delete_elem(&inflight, &tid);
    return 0;
}

struct fork_args { __u64 common; __u32 parent_comm_loc; __s32 parent_pid; __u32 child_comm_loc; __s32 child_pid; };
struct exit_args { __u64 common; char comm[16]; __s32 pid; __s32 prio; __u8 group_dead; };
struct exec_args { __u64 common; __u32 filename_loc; __s32 pid; __s32 old_pid; };

static __attribute__((always_inline)) void proc_event(__u32 op, __u32 child, __u64 pt) {
    struct proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_PROC);
        return;
    }
    fill_hdr(&e->h, K_PROC, pt, bpf_ktime_get_ns());
    e->op = op;
    e->child = child;
    bpf_ringbuf_submit(e, 0);
}

SEC("tracepoint/sched/sched_process_fork")
int process_fork(struct fork_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    __u32 child = ctx->child_pid;
    __u8 one = 1;
    // Threads share the tgid, which is already traced; a new process gets its own entry.
    bpf_map_update_elem(&pids, &child, &one, BPF_ANY);
    proc_event(P_FORK, child, pt);
    return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int process_exec(struct exec_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    proc_event(P_EXEC, 0, pt);
    return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int process_exit(struct exit_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tid = (__u32)pt, tgid = pt >> 32;
    // exit() never returns, so its syscall is still in flight.
    bpf_map_delete_elem(&inflight, &tid);
    bpf_map_delete_elem(&inflight_paths, &tid);
    if (!traced(pt))
        return 0;
    if (ctx->group_dead) {
        proc_event(P_EXIT, 0, pt);
        bpf_map_delete_elem(&pids, &tgid);
    } else if (tid != tgid) {
        // A thread of a traced process: its tid may have been added by fork.
        bpf_map_delete_elem(&pids, &tid);
    }
    return 0;
}

struct block_rq_args { __u64 common; __u32 dev; __u32 pad; __u64 sector; __u32 nr_sector; __u32 bytes; __u16 ioprio; char rwbs[10]; };
struct block_rq_complete_args { __u64 common; __u32 dev; __u32 pad; __u64 sector; __u32 nr_sector; __s32 error; __u16 ioprio; char rwbs[10]; };

static __attribute__((always_inline)) int block_start(struct block_rq_args *ctx, int issue) {
    struct block_key k = {};
    k.dev = ctx->dev;
    k.sector = ctx->sector;
    __u64 now = bpf_ktime_get_ns();
    struct block_start *s = bpf_map_lookup_elem(&blocks, &k);
    if (s) {
        if (issue)
            s->issue_ts = now;
        return 0;
    }
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    struct block_start n = {};
    n.pid = pt >> 32;
    n.tid = (__u32)pt;
    if (issue)
        n.issue_ts = now;
    else
        n.insert_ts = now;
    bpf_get_current_comm(n.comm, sizeof(n.comm));
    bpf_map_update_elem(&blocks, &k, &n, BPF_ANY);
    return 0;
}

SEC("tracepoint/block/block_rq_insert")
int block_insert(struct block_rq_args *ctx) { return block_start(ctx, 0); }

SEC("tracepoint/block/block_rq_issue")
int block_issue(struct block_rq_args *ctx) { return block_start(ctx, 1); }

SEC("tracepoint/block/block_rq_complete")
int block_complete(struct block_rq_complete_args *ctx) {
    struct block_key k = {};
    k.dev = ctx->dev;
    k.sector = ctx->sector;
    struct block_start *s = bpf_map_lookup_elem(&blocks, &k);
    if (!s)
        return 0;
    struct block_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_BLOCK);
        bpf_map_delete_elem(&blocks, &k);
        return 0;
    }
    e->h.kind = K_BLOCK;
    e->h.pid = s->pid;
    e->h.tid = s->tid;
    e->h.cpu = bpf_get_smp_processor_id();
    e->h.ts = bpf_ktime_get_ns();
    e->h.clk = NO_CLK; // a completion: not in the submitter's context
    bpf_probe_read_kernel(e->h.comm, 16, s->comm);
    e->dev = ctx->dev;
    e->nr_sector = ctx->nr_sector;
    e->sector = ctx->sector;
    e->insert_ts = s->insert_ts;
    e->issue_ts = s->issue_ts;
    e->error = ctx->error;
    bpf_probe_read_kernel(e->rwbs, 10, ctx->rwbs);
    e->rwbs[10] = 0;
    e->rwbs[11] = 0;
    bpf_ringbuf_submit(e, 0);
    bpf_map_delete_elem(&blocks, &k);
    return 0;
}

struct filemap_args { __u64 common; __u64 pfn; __u64 i_ino; __u64 index; __u32 s_dev; __u8 order; };
struct filemap_fault_args { __u64 common; __u64 i_ino; __u32 s_dev; __u32 pad; __u64 index; };
struct dirty_folio_args { __u64 common; char name[32]; __u64 ino; __u64 index; };

static __attribute__((always_inline)) void cache_event(__u64 pt, __u32 op, __u64 ino, __u64 index, __u32 dev, __u32 pages) {
    struct cache_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_CACHE);
        return;
    }
    fill_hdr(&e->h, K_CACHE, pt, bpf_ktime_get_ns());
    e->ino = ino;
    e->index = index;
    e->dev = dev;
    e->op = op;
    e->pages = pages;
    e->pad = 0;
    bpf_ringbuf_submit(e, 0);
}

SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int cache_add(struct filemap_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    __u64 ino = ctx->i_ino;
    __u8 one = 1;
    bpf_map_update_elem(&inodes, &ino, &one, BPF_ANY);
    cache_event(pt, C_ADD, ino, ctx->index, ctx->s_dev, 1u << (ctx->order & 15));
    return 0;
}

SEC("tracepoint/filemap/mm_filemap_delete_from_page_cache")
int cache_delete(struct filemap_args *ctx) {
    __u64 ino = ctx->i_ino;
    if (!bpf_map_lookup_elem(&inodes, &ino))
        return 0;
    cache_event(bpf_get_current_pid_tgid(), C_EVICT, ino, ctx->index, ctx->s_dev, 1u << (ctx->order & 15));
    return 0;
}

SEC("tracepoint/filemap/mm_filemap_fault")
int cache_fault(struct filemap_fault_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    cache_event(pt, C_FAULT, ctx->i_ino, ctx->index, ctx->s_dev, 1);
    return 0;
}

SEC("tracepoint/writeback/writeback_dirty_folio")
int cache_dirty(struct dirty_folio_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    __u64 ino = ctx->ino;
    __u8 one = 1;
    bpf_map_update_elem(&inodes, &ino, &one, BPF_ANY);
    cache_event(pt, C_DIRTY, ino, ctx->index, 0, 1);
    return 0;
}

struct set_state_args { __u64 common; __u64 skaddr; __s32 oldstate; __s32 newstate; __u16 sport; __u16 dport; __u16 family; __u16 protocol; __u8 saddr[4]; __u8 daddr[4]; __u8 saddr_v6[16]; __u8 daddr_v6[16]; };
struct sock_length_args { __u64 common; __u64 sk; __u16 family; __u16 protocol; __s32 ret; __s32 flags; };

#define AF_INET 2
#define AF_INET6 10

SEC("tracepoint/sock/inet_sock_set_state")
int sock_state(struct set_state_args *ctx) {
    __u64 sk = ctx->skaddr;
    struct sock_addrs a = {};
    a.family = ctx->family;
    a.sport = ctx->sport;
    a.dport = ctx->dport;
    if (a.family == AF_INET) {
        bpf_probe_read_kernel(a.saddr, 4, ctx->saddr);
        bpf_probe_read_kernel(a.daddr, 4, ctx->daddr);
    } else {
        bpf_probe_read_kernel(a.saddr, 16, ctx->saddr_v6);
        bpf_probe_read_kernel(a.daddr, 16, ctx->daddr_v6);
    }
    if (ctx->newstate == 7 /* TCP_CLOSE */)
        bpf_map_delete_elem(&socks, &sk);
    else
        bpf_map_update_elem(&socks, &sk, &a, BPF_ANY);
    return 0;
}

static __attribute__((always_inline)) int sock_io(struct sock_length_args *ctx, __u32 dir) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt) || ctx->ret <= 0)
        return 0;
    struct net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_NET);
        return 0;
    }
    fill_hdr(&e->h, K_NET, pt, bpf_ktime_get_ns());
    __u64 sk = ctx->sk;
    e->sk = sk;
    e->family = ctx->family;
    e->protocol = ctx->protocol;
    e->size = ctx->ret;
    e->dir = dir;
    struct sock_addrs *a = bpf_map_lookup_elem(&socks, &sk);
    if (a) {
        e->known = 1;
        bpf_probe_read_kernel(&e->a, sizeof(e->a), a);
    } else {
        e->known = 0;
        __builtin_memset(&e->a, 0, sizeof(e->a));
    }
    bpf_ringbuf_submit(e, 0);
    return 0;
}

SEC("tracepoint/sock/sock_send_length")
int sock_send(struct sock_length_args *ctx) { return sock_io(ctx, 0); }

SEC("tracepoint/sock/sock_recv_length")
int sock_recv(struct sock_length_args *ctx) { return sock_io(ctx, 1); }

struct fault_args { __u64 common; __u64 address; __u64 ip; __u64 error_code; };

SEC("tracepoint/exceptions/page_fault_user")
int fault_user(struct fault_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    struct fault_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_FAULT);
        return 0;
    }
    fill_hdr(&e->h, K_FAULT, pt, bpf_ktime_get_ns());
    e->address = ctx->address;
    e->ip = ctx->ip;
    e->error_code = ctx->error_code;
    bpf_ringbuf_submit(e, 0);
    return 0;
}

struct uring_submit_args { __u64 common; __u64 ctx; __u64 req; __u64 user_data; __u8 opcode; __u8 pad[7]; __u64 flags; };
struct uring_complete_args { __u64 common; __u64 ctx; __u64 req; __u64 user_data; __s32 res; __u32 cflags; };

SEC("tracepoint/io_uring/io_uring_submit_req")
int uring_submit(struct uring_submit_args *ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    if (!traced(pt))
        return 0;
    __u64 req = ctx->req;
    struct uring_start s = {};
    s.pid = pt >> 32;
    s.tid = (__u32)pt;
    s.ts = bpf_ktime_get_ns();
    s.user_data = ctx->user_data;
    s.opcode = ctx->opcode;
    bpf_get_current_comm(s.comm, sizeof(s.comm));
    bpf_map_update_elem(&urings, &req, &s, BPF_ANY);
    return 0;
}

SEC("tracepoint/io_uring/io_uring_complete")
int uring_complete(struct uring_complete_args *ctx) {
    __u64 req = ctx->req;
    struct uring_start *s = bpf_map_lookup_elem(&urings, &req);
    if (!s)
        return 0;
    struct uring_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost(S_URING);
        bpf_map_delete_elem(&urings, &req);
        return 0;
    }
    e->h.kind = K_URING;
    e->h.pid = s->pid;
    e->h.tid = s->tid;
    e->h.cpu = bpf_get_smp_processor_id();
    e->h.ts = bpf_ktime_get_ns();
    e->h.clk = NO_CLK; // a completion: not in the submitter's context
    bpf_probe_read_kernel(e->h.comm, 16, s->comm);
    e->user_data = s->user_data;
    e->submit_ts = s->ts;
    e->opcode = s->opcode;
    e->res = ctx->res;
    e->submit_tid = s->tid;
    e->pad = 0;
    bpf_ringbuf_submit(e, 0);
    bpf_map_delete_elem(&urings, &req);
    return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
