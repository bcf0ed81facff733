/*
 * What a simulator's process does to libjets, one mode per run (scripts/test.d/20-c-bindings.sh
 * runs each under valgrind, ASan/UBSan and TSan):
 *
 *   safety_test fork DIR      fork 40 times (SAFETY_FORK_CHILDREN) while four threads are busy
 *                             in jets_intern, jets_event_ex, record begin/end and open/close;
 *                             each child's calls on the inherited trace fail with
 *                             JETS_ERR_FORKED at once, and it opens, writes and closes a trace
 *                             of its own; the parent's file is untouched
 *   safety_test signal DIR    a SIGALRM interval timer whose handler emits events (interned
 *                             names, two typed fields) and flushes, while the main thread works
 *   safety_test drop DIR      the drop policy under pressure: dropped records get real ids on
 *                             which children, events, annotations and ends are counted
 *   safety_test badjson DIR   1e999, a lone \ud800 and 200 levels of nesting are refused
 *   safety_test closed DIR    calls after close and a second close return JETS_ERR_CLOSED
 *   safety_test parity DIR    on/off, domains, clocks, counters, push/pop, end with a status,
 *                             text fields
 *   safety_test cancel DIR    threads cancelled (pthread_cancel, deferred) while they wait in
 *                             libjets for room in a 16-line queue, and while they open, flush
 *                             and close traces of their own: every call finishes, the process
 *                             lives on, and each trace is complete
 *   safety_test full PATH     writes until the disk is full (or the file size limit is hit):
 *                             the I/O error is reported, the file keeps a valid prefix
 *   safety_test open PATH     opens over an existing file on a full disk: fails, file intact
 *   safety_test fatal PATH    jets_install_fatal_signal_flush, 1000 events never flushed, then
 *                             abort(): the process dies of SIGABRT with the events on disk
 *   safety_test exit PATH     1000 events and a record left open, a forked child that calls
 *                             exit() (it leaves its parent's trace alone), then exit() without
 *                             jets_close: the exit handler closes the trace, footer included
 *   safety_test sigterm PATH  jets_install_fatal_signal_flush before the trace is opened, 1000
 *                             events and a record left open, a forked child that raises SIGTERM
 *                             (it dies of it at once, leaving its parent's trace alone), then
 *                             SIGTERM without jets_close: the handlers flush and close the
 *                             trace, footer included, and the process dies of the signal
 *
 * Each mode that leaves a trace prints "expect ..." lines for check_trace.py.
 */
#define _GNU_SOURCE
#include <jets.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define CHECK_RC(call, code)                                                           \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != (code)) {                                                           \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n",   \
                    __FILE__, __LINE__, #call, jets_status_name(rc_),                  \
                    jets_status_name(code), jets_last_error());                        \
            failures++;                                                                \
        }                                                                              \
    } while (0)

static char path_buf[4096];
static const char *in_dir(const char *dir, const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", dir, name);
    return path_buf;
}

static jets_trace *open_or_die(const char *path, const jets_options *o) {
    jets_trace *t = NULL;
    if (jets_open_ex(path, "{\"hardware_model\":\"safety\",\"clock_frequency_mhz\":1000}", o,
                     &t) != JETS_OK) {
        fprintf(stderr, "jets_open %s: %s\n", path, jets_last_error());
        exit(1);
    }
    return t;
}

/* ---- fork ---------------------------------------------------------------------------------- */

static atomic_int stop_workers;
static jets_trace *shared_trace;
static jets_id shared_root;

static atomic_int interned_all;

static void *intern_worker(void *arg) {
    (void)arg;
    char name[32];
    unsigned n = 0;
    while (!atomic_load(&stop_workers)) {
        snprintf(name, sizeof name, "w%u", n++ % 4096);
        (void)jets_intern(name);
        if (n == 4096) atomic_store(&interned_all, 1);
    }
    return NULL;
}

static void *event_worker(void *arg) {
    (void)arg;
    jets_str tick = jets_intern("Tick"), k = jets_intern("n");
    unsigned long n = 0;
    while (!atomic_load(&stop_workers)) {
        jets_field f = jets_field_u64(k, n++);
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = tick;
        a.fields = &f;
        a.field_count = 1;
        (void)jets_event_ex(shared_trace, shared_root, JETS_CLK_NOW, &a);
    }
    return NULL;
}

/* Begins, uses and ends records: the record table's slots come and go while the forks happen. */
static void *record_worker(void *arg) {
    (void)arg;
    jets_str op = jets_intern("Op"), step = jets_intern("Step");
    while (!atomic_load(&stop_workers)) {
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = op;
        a.record_type = op;
        jets_id r = jets_record_begin_ex(shared_trace, shared_root, JETS_CLK_NOW, &a);
        jets_attrs e = JETS_ATTRS_INIT;
        e.name = step;
        (void)jets_event_ex(shared_trace, r, JETS_CLK_NOW, &e);
        (void)jets_record_end(shared_trace, r, JETS_CLK_NOW);
    }
    return NULL;
}

/* Opens and closes traces of its own: the open path (writer thread start, file creation,
 * JETS_CAPTURE read, fork handlers) runs while the forks happen. */
static const char *open_worker_dir;
static void *open_worker(void *arg) {
    (void)arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/busy-open.jets", open_worker_dir);
    while (!atomic_load(&stop_workers)) {
        jets_trace *t = NULL;
        if (jets_open(path, NULL, &t) != JETS_OK) continue;
        jets_id r = jets_record_begin(t, 0, 0, "busy", "Busy", NULL, NULL);
        (void)jets_record_end(t, r, 1);
        (void)jets_close(t);
    }
    return NULL;
}

/* The child: only the forking thread exists, forked while the workers were inside libjets.
 * Every call on the inherited trace is refused at once; interning and a trace of its own work.
 * alarm() turns a hang into a failure (a lock inherited held). */
static int fork_child(const char *child_path) {
    alarm(30);
    int bad = 0;
    jets_str s = jets_intern("child-name");
    bad |= (s == 0) << 0;
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = s;
    bad |= (jets_event_ex(shared_trace, shared_root, 1, &a) != JETS_ERR_FORKED) << 1;
    bad |= (jets_event(shared_trace, shared_root, 1, "x", NULL, NULL) != JETS_ERR_FORKED) << 1;
    bad |= (jets_record_begin(shared_trace, 0, 1, "c", "C", NULL, NULL) != 0) << 1;
    bad |= (jets_last_error_code() != JETS_ERR_FORKED) << 1;
    bad |= (jets_flush(shared_trace) != JETS_ERR_FORKED) << 1;
    bad |= (jets_close(shared_trace) != JETS_ERR_FORKED) << 1;
    jets_trace *own = NULL;
    if (jets_open(child_path, NULL, &own) != JETS_OK) return 1 << 2;
    jets_id r = jets_record_begin(own, 0, 0, "child", "Process", NULL, NULL);
    bad |= (r == 0) << 3;
    bad |= (jets_event_ex(own, r, 1, &a) != JETS_OK) << 3;
    bad |= (jets_record_end(own, r, 2) != JETS_OK) << 3;
    bad |= (jets_close(own) != JETS_OK) << 4;
    return bad;
}

/* Waits for the child `pid` and returns its status. A child that has not ended after 20 s
 * (its alarm kills it at 30) is hung: where each of its threads waits is printed with gdb, when
 * there is one, so that a hang seen once (on a CI machine) says which lock it is. */
static int wait_or_show_stacks(pid_t pid) {
    int st = 0;
    for (int waited_ms = 0; waitpid(pid, &st, WNOHANG) == 0; waited_ms += 10) {
        if (waited_ms == 20000) {
            char cmd[256];
            snprintf(cmd, sizeof cmd,
                     "command -v gdb >/dev/null && gdb -batch -nx -p %d "
                     "-ex 'thread apply all bt' </dev/null >&2 2>&1 "
                     "|| echo no gdb here: the stacks of the hung child are not shown >&2",
                     (int)pid);
            fprintf(stderr, "fork child %d still running after 20 s; its stacks:\n", (int)pid);
            if (system(cmd) != 0) fprintf(stderr, "(gdb failed)\n");
        }
        struct timespec pause = {0, 10000000};
        nanosleep(&pause, NULL);
    }
    return st;
}

static int mode_fork(const char *dir) {
    char parent_path[4096], child_path[4096];
    snprintf(parent_path, sizeof parent_path, "%s", in_dir(dir, "parent.jets"));
    snprintf(child_path, sizeof child_path, "%s", in_dir(dir, "child.jets"));
    /* SAFETY_FORK_CHILDREN lowers the count where every child is slow (valgrind). */
    const char *env = getenv("SAFETY_FORK_CHILDREN");
    int children = env ? atoi(env) : 40;
    if (children < 1 || children > 1000) children = 40;
    shared_trace = open_or_die(parent_path, NULL);
    shared_root = jets_record_begin(shared_trace, 0, 0, "parent", "Process", NULL, NULL);
    CHECK(shared_root != 0);
    open_worker_dir = dir;
    void *(*workers[])(void *) = {intern_worker, event_worker, record_worker, open_worker};
    enum { nworkers = sizeof workers / sizeof workers[0] };
    pthread_t th[nworkers];
    for (int w = 0; w < nworkers; w++) pthread_create(&th[w], NULL, workers[w], NULL);
    /* Fork once the intern worker has registered its names; it keeps looking them up under the
     * lock. */
    while (!atomic_load(&interned_all)) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    int ok_children = 0;
    for (int i = 0; i < children; i++) {
        /* Let the workers get well inside their calls between forks. */
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(fork_child(child_path));
        int st = wait_or_show_stacks(pid);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            ok_children++;
        } else if (WIFSIGNALED(st)) {
            fprintf(stderr, "fork child %d: killed by signal %d%s\n", i, WTERMSIG(st),
                    WTERMSIG(st) == SIGALRM ? " (hung for 30 s)" : "");
        } else {
            fprintf(stderr, "fork child %d: exit status %d (bits: 1 intern, 2 not FORKED, "
                    "4 open, 8 own record, 16 own close)\n", i, WEXITSTATUS(st));
        }
    }
    atomic_store(&stop_workers, 1);
    for (int w = 0; w < nworkers; w++) pthread_join(th[w], NULL);
    CHECK(ok_children == children);
    CHECK_RC(jets_record_end(shared_trace, shared_root, JETS_CLK_NOW), JETS_OK);
    CHECK_RC(jets_close(shared_trace), JETS_OK);
    printf("fork: %d of %d children, forked while %d threads were inside libjets (intern, events, "
           "records, open/close), got JETS_ERR_FORKED promptly and traced on their own\n",
           ok_children, children, (int)nworkers);
    return failures ? 1 : 0;
}

/* ---- signals ------------------------------------------------------------------------------- */

static jets_trace *sig_trace;
static jets_id sig_record;
static jets_str sig_name, sig_key_a, sig_key_b;
static atomic_ulong sig_ok, sig_refused, sig_other, sig_flushes;

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    static unsigned long n;
    n++;
    jets_field f[2] = {jets_field_u64(sig_key_a, n), jets_field_f64(sig_key_b, 0.5)};
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = sig_name;
    a.fields = f;
    a.field_count = 2;
    int rc = jets_event_ex(sig_trace, sig_record, JETS_CLK_NOW, &a);
    if (rc == JETS_OK) {
        atomic_fetch_add(&sig_ok, 1);
    } else if (rc == JETS_ERR_REENTRANT) {
        atomic_fetch_add(&sig_refused, 1);
    } else {
        atomic_fetch_add(&sig_other, 1);
    }
    if (n % 64 == 0 && jets_flush(sig_trace) == JETS_OK) atomic_fetch_add(&sig_flushes, 1);
    errno = saved;
}

static int mode_signal(const char *dir) {
    sig_trace = open_or_die(in_dir(dir, "signal.jets"), NULL);
    sig_name = jets_intern("Tick");
    sig_key_a = jets_intern("n");
    sig_key_b = jets_intern("load");
    sig_record = jets_record_begin(sig_trace, 0, 0, "sim", "Simulator", NULL, NULL);
    /* The handler's thread emits once outside the handler: its queue then exists. */
    CHECK_RC(jets_event(sig_trace, sig_record, 0, "Start", NULL, NULL), JETS_OK);
    unsigned long records = 1, ends = 0, events = 1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}}; /* every 200 us */
    setitimer(ITIMER_REAL, &it, NULL);

    /* The main thread makes every kind of call, allocating ones included, while ticks land. */
    jets_str insn = jets_intern("Insn"), type = jets_intern("Instruction"), pc = jets_intern("pc");
    for (unsigned long i = 0; i < 20000; i++) {
        jets_set_clock(sig_trace, i + 1);
        jets_field f = jets_field_u64(pc, 0x1000 + 4 * i);
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = insn;
        a.record_type = type;
        a.fields = &f;
        a.field_count = 1;
        jets_id r = jets_record_begin_ex(sig_trace, sig_record, JETS_CLK_NOW, &a);
        if (r == 0) {
            fprintf(stderr, "begin %lu: %s\n", i, jets_last_error());
            failures++;
            break;
        }
        records++;
        if (jets_event(sig_trace, r, JETS_CLK_NOW, "Decode", NULL, "{\"op\":\"addi\"}") == JETS_OK)
            events++;
        else
            failures++;
        if (jets_record_end(sig_trace, r, JETS_CLK_NOW) == JETS_OK)
            ends++;
        else
            failures++;
        if (i % 1000 == 0) (void)jets_intern(i % 2000 ? "odd" : "even");
        /* Other work, outside libjets, as a simulator does: the handler then also lands outside
         * a libjets call (TSan delivers a signal only at a call it intercepts, otherwise always
         * inside libjets, where the handler's calls are refused as re-entrant). */
        if (i % 100 == 0) {
            struct timespec work = {0, 50000};
            nanosleep(&work, NULL);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    CHECK(atomic_load(&sig_other) == 0);
    CHECK(atomic_load(&sig_ok) > 0);
    CHECK_RC(jets_record_end(sig_trace, sig_record, JETS_CLK_NOW), JETS_OK);
    ends++;
    CHECK_RC(jets_close(sig_trace), JETS_OK);
    events += atomic_load(&sig_ok);
    printf("signal: %lu handler events written, %lu refused (re-entrant), %lu handler flushes\n",
           atomic_load(&sig_ok), atomic_load(&sig_refused), atomic_load(&sig_flushes));
    printf("expect records=%lu record_ends=%lu events=%lu annotations=0 open=0\n", records, ends,
           events);
    return failures ? 1 : 0;
}

/* ---- thread cancellation ------------------------------------------------------------------ */

/* No libjets call is a cancellation point: a cancel request reaches a thread only outside them
 * (here at pthread_testcancel), never while libjets holds a lock, a queue slot or a batch, and
 * never unwinds through its frames. Emitters wait for room in a tiny queue (the thread waits
 * inside libjets most of the time); openers open, write, flush and close traces of their own
 * (file creation, the writer thread's join). */
static jets_trace *cancel_trace;
static jets_str cancel_tick;
static const char *cancel_dir;
static atomic_ulong cancel_events;
static atomic_ulong cancel_closed;
static atomic_ulong cancel_failed; /* calls that failed, on any thread */

static void *cancel_emitter(void *arg) {
    jets_id r = (jets_id)(uintptr_t)arg;
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = cancel_tick;
    for (;;) {
        /* jets_event_ex only waits for room; jets_event may encode the writer's batches. */
        if (jets_event_ex(cancel_trace, r, JETS_CLK_NOW, &a) == JETS_OK)
            atomic_fetch_add(&cancel_events, 1);
        else
            atomic_fetch_add(&cancel_failed, 1);
        if (jets_event(cancel_trace, r, JETS_CLK_NOW, "Tock", NULL, NULL) == JETS_OK)
            atomic_fetch_add(&cancel_events, 1);
        else
            atomic_fetch_add(&cancel_failed, 1);
        pthread_testcancel();
    }
    return NULL;
}

static void *cancel_opener(void *arg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cancel-own-%u.jets", cancel_dir, (unsigned)(uintptr_t)arg);
    for (;;) {
        jets_trace *own = NULL;
        if (jets_open(path, NULL, &own) != JETS_OK) {
            atomic_fetch_add(&cancel_failed, 1);
            return NULL;
        }
        jets_id r = jets_record_begin(own, 0, 0, "own", "Thread", NULL, NULL);
        if (r == 0 || jets_event(own, r, 1, "Tick", NULL, NULL) != JETS_OK ||
            jets_flush(own) != JETS_OK || jets_record_end(own, r, 2) != JETS_OK ||
            jets_close(own) != JETS_OK)
            atomic_fetch_add(&cancel_failed, 1);
        else
            atomic_fetch_add(&cancel_closed, 1);
        pthread_testcancel();
    }
    return NULL;
}

static int mode_cancel(const char *dir) {
    jets_options o = JETS_OPTIONS_INIT;
    o.queue_capacity = 16; /* tiny: emitters wait for room most of the time */
    cancel_trace = open_or_die(in_dir(dir, "cancel.jets"), &o);
    cancel_tick = jets_intern("Tick");
    cancel_dir = dir;
    enum { emitters = 3, rounds = 60 };
    jets_id root = jets_record_begin(cancel_trace, 0, 0, "sim", "Simulator", NULL, NULL);
    CHECK(root != 0);
    jets_id lane[emitters];
    pthread_t th[emitters + 1];
    for (int w = 0; w < emitters; w++) {
        lane[w] = jets_record_begin(cancel_trace, root, 0, "lane", "Thread", NULL, NULL);
        CHECK(lane[w] != 0);
        pthread_create(&th[w], NULL, cancel_emitter, (void *)(uintptr_t)lane[w]);
    }
    unsigned opened = 0;
    pthread_create(&th[emitters], NULL, cancel_opener, (void *)(uintptr_t)opened++);
    unsigned cancelled = 0;
    for (int i = 0; i < rounds; i++) {
        struct timespec pause = {0, 1000000 + (i % 7) * 300000};
        nanosleep(&pause, NULL);
        int w = i % (emitters + 1);
        CHECK(pthread_cancel(th[w]) == 0);
        void *res = NULL;
        CHECK(pthread_join(th[w], &res) == 0);
        CHECK(res == PTHREAD_CANCELED);
        cancelled += res == PTHREAD_CANCELED;
        if (w < emitters)
            pthread_create(&th[w], NULL, cancel_emitter, (void *)(uintptr_t)lane[w]);
        else
            pthread_create(&th[w], NULL, cancel_opener, (void *)(uintptr_t)opened++);
    }
    for (int w = 0; w <= emitters; w++) {
        pthread_cancel(th[w]);
        pthread_join(th[w], NULL);
    }
    for (int w = 0; w < emitters; w++) CHECK_RC(jets_record_end(cancel_trace, lane[w], JETS_CLK_NOW), JETS_OK);
    CHECK_RC(jets_record_end(cancel_trace, root, JETS_CLK_NOW), JETS_OK);
    CHECK_RC(jets_close(cancel_trace), JETS_OK);
    CHECK(atomic_load(&cancel_closed) > 0);
    CHECK(atomic_load(&cancel_failed) == 0);
    printf("cancel: %u threads cancelled inside or between libjets calls, %lu events written, "
           "%lu own traces opened, written and closed\n",
           cancelled, atomic_load(&cancel_events), atomic_load(&cancel_closed));
    printf("expect records=%d record_ends=%d events=%lu annotations=0 open=0\n", emitters + 1,
           emitters + 1, atomic_load(&cancel_events));
    return failures ? 1 : 0;
}

/* ---- drop policy --------------------------------------------------------------------------- */

static int mode_drop(const char *dir) {
    jets_options o = JETS_OPTIONS_INIT;
    o.policy = JETS_POLICY_DROP;
    o.queue_capacity = 16; /* tiny: most lines are dropped */
    jets_trace *t = open_or_die(in_dir(dir, "drop.jets"), &o);
    jets_str name = jets_intern("Op"), type = jets_intern("Op"), ev = jets_intern("Step");
    unsigned long begun = 0, dropped_ids = 0, zero = 0;
    for (unsigned long i = 0; i < 50000; i++) {
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = name;
        a.record_type = type;
        jets_id r = jets_record_begin_ex(t, 0, i, &a);
        if (r == 0) {
            zero++;
            continue;
        }
        begun++;
        if (r >= ((jets_id)1 << 63)) dropped_ids++;
        /* Children, events, annotations and the end on a dropped record all succeed. */
        jets_id c = jets_record_begin_ex(t, r, i, &a);
        CHECK(c != 0);
        jets_attrs e = JETS_ATTRS_INIT;
        e.name = ev;
        CHECK_RC(jets_event_ex(t, r, i, &e), JETS_OK);
        CHECK_RC(jets_annotation(t, r, "Note", NULL, NULL), JETS_OK);
        CHECK_RC(jets_record_end(t, c, i), JETS_OK);
        CHECK_RC(jets_record_end(t, r, i), JETS_OK);
        /* An ended dropped record is refused like any ended record. */
        CHECK_RC(jets_record_end(t, r, i), JETS_ERR_RECORD_ENDED);
    }
    CHECK(zero == 0);
    CHECK(jets_record_begin(t, 0, 0, "x", "X", NULL, NULL) != 0);
    /* 0 is never a record. */
    CHECK_RC(jets_event(t, 0, 0, "x", NULL, NULL), JETS_ERR_INVALID_ARGUMENT);
    CHECK_RC(jets_close(t), JETS_OK);
    printf("drop: %lu records begun, %lu of them dropped (ids above 2^63), none returned 0\n",
           begun, dropped_ids);
    /* The checker reads the footer's dropped_* counts: every line is either written or counted. */
    printf("expect-dropped lines=%lu\n", begun * 6 + 1);
    return failures ? 1 : 0;
}

/* ---- bad JSON ------------------------------------------------------------------------------ */

static int mode_badjson(const char *dir) {
    jets_trace *t = open_or_die(in_dir(dir, "badjson.jets"), NULL);
    jets_id r = jets_record_begin(t, 0, 0, "r", "R", NULL, NULL);
    CHECK(r != 0);
    char deep[512];
    size_t n = 0;
    for (int i = 0; i < 200; i++) deep[n++] = '[';
    for (int i = 0; i < 200; i++) deep[n++] = ']';
    deep[n] = 0;
    const char *bad[] = {"{\"x\":1e999}", "{\"x\":\"\\ud800\"}", deep, "{\"x\":-1e400}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_RC(jets_event(t, r, 1, "e", NULL, bad[i]), JETS_ERR_INVALID_JSON);
        CHECK_RC(jets_annotation(t, r, "a", NULL, bad[i]), JETS_ERR_INVALID_JSON);
        CHECK(jets_record_begin(t, r, 1, "c", "C", NULL, bad[i]) == 0);
        CHECK(jets_last_error_code() == JETS_ERR_INVALID_JSON);
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = jets_intern("e");
        a.data_json = bad[i];
        CHECK_RC(jets_event_ex(t, r, 1, &a), JETS_ERR_INVALID_JSON);
    }
    jets_trace *t2 = NULL;
    CHECK_RC(jets_open(in_dir(dir, "badmeta.jets"), "{\"m\":1e999}", &t2), JETS_ERR_INVALID_JSON);
    CHECK(t2 == NULL);
    /* Good JSON still works: 1e300, a surrogate pair, 100 levels. */
    CHECK_RC(jets_event(t, r, 2, "ok", NULL, "{\"x\":1e300,\"s\":\"\\ud83d\\ude00\"}"), JETS_OK);
    n = 0;
    for (int i = 0; i < 100; i++) deep[n++] = '[';
    for (int i = 0; i < 100; i++) deep[n++] = ']';
    deep[n] = 0;
    CHECK_RC(jets_event(t, r, 2, "ok", NULL, deep), JETS_OK);
    CHECK_RC(jets_record_end(t, r, 3), JETS_OK);
    CHECK_RC(jets_close(t), JETS_OK);
    printf("expect records=1 record_ends=1 events=2 annotations=0 open=0\n");
    return failures ? 1 : 0;
}

/* ---- closed traces ------------------------------------------------------------------------- */

static int mode_closed(const char *dir) {
    jets_trace *t = open_or_die(in_dir(dir, "closed.jets"), NULL);
    jets_id r = jets_record_begin(t, 0, 0, "r", "R", NULL, NULL);
    CHECK_RC(jets_close(t), JETS_OK);
    CHECK_RC(jets_close(t), JETS_ERR_CLOSED);
    CHECK_RC(jets_close_at(t, 5), JETS_ERR_CLOSED);
    CHECK_RC(jets_event(t, r, 1, "e", NULL, NULL), JETS_ERR_CLOSED);
    CHECK_RC(jets_record_end(t, r, 1), JETS_ERR_CLOSED);
    CHECK_RC(jets_flush(t), JETS_ERR_CLOSED);
    CHECK_RC(jets_set_clock(t, 3), JETS_ERR_CLOSED);
    CHECK(jets_record_begin(t, 0, 0, "r", "R", NULL, NULL) == 0);
    CHECK(jets_last_error_code() == JETS_ERR_CLOSED);
    CHECK_RC(jets_host_monitor_start(t, 10), JETS_ERR_CLOSED);
    /* Many open/close cycles: each keeps only its small handle. */
    for (int i = 0; i < 50; i++) {
        jets_trace *u = open_or_die(in_dir(dir, "cycle.jets"), NULL);
        CHECK_RC(jets_close(u), JETS_OK);
        CHECK_RC(jets_close(u), JETS_ERR_CLOSED);
    }
    printf("expect records=1 record_ends=0 events=0 annotations=0 open=1\n");
    return failures ? 1 : 0;
}

/* ---- parity with NVTX/ITT ------------------------------------------------------------------ */

static int mode_parity(const char *dir) {
    jets_trace *t = open_or_die(in_dir(dir, "parity.jets"), NULL);
    jets_str name = jets_intern("Op"), type = jets_intern("Op"), k = jets_intern("who");
    unsigned long records = 0, ends = 0, events = 0;
    /* Off: nothing written, no id 0, everything succeeds. */
    CHECK_RC(jets_set_enabled(t, false), JETS_OK);
    jets_id off = jets_record_begin(t, 0, 0, "off", "Off", NULL, NULL);
    CHECK(off == JETS_ID_OFF);
    CHECK_RC(jets_event(t, off, 1, "e", NULL, NULL), JETS_OK);
    CHECK_RC(jets_record_end(t, off, 1), JETS_OK);
    CHECK_RC(jets_set_enabled(t, true), JETS_OK);
    /* Domains. */
    jets_domain dram = jets_domain_create(t, "dram"), noc = jets_domain_create(t, "noc");
    CHECK(dram != 0 && noc != 0 && dram != noc && jets_domain_create(t, "dram") == dram);
    CHECK_RC(jets_domain_set_enabled(t, noc, false), JETS_OK);
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = name;
    a.record_type = type;
    a.domain = dram;
    jets_id d = jets_record_begin_ex(t, 0, 0, &a);
    CHECK(d != 0 && d != JETS_ID_OFF);
    records++;
    a.domain = noc;
    CHECK(jets_record_begin_ex(t, 0, 0, &a) == JETS_ID_OFF);
    CHECK_RC(jets_domain_set_enabled(t, 99, true), JETS_ERR_INVALID_ARGUMENT);
    /* Clocks: the trace runs at 1000 MHz; a 250 MHz DRAM clock's cycle 10 is trace cycle 40. */
    jets_clock dclk = jets_clock_create(t, "dram", 250.0);
    CHECK(dclk != 0);
    jets_attrs e = JETS_ATTRS_INIT;
    e.name = jets_intern("Burst");
    e.clock = dclk;
    CHECK_RC(jets_event_ex(t, d, 10, &e), JETS_OK); /* at trace clk 40 */
    events++;
    CHECK_RC(jets_clock_set(t, dclk, 20), JETS_OK); /* trace clock 80 */
    /* Counters. */
    CHECK_RC(jets_counter(t, d, JETS_CLK_NOW, jets_intern("queue_depth"), 3.0), JETS_OK);
    events++;
    /* Push/pop nesting. */
    a = JETS_ATTRS_INIT;
    a.name = name;
    a.record_type = type;
    jets_id outer = jets_push(t, 80, &a);
    jets_id inner = jets_push(t, 81, &a);
    CHECK(outer != 0 && inner != 0 && outer != inner);
    records += 2;
    CHECK_RC(jets_pop(t, 82), JETS_OK);
    CHECK_RC(jets_pop(t, 83), JETS_OK);
    ends += 2;
    CHECK_RC(jets_pop(t, 84), JETS_ERR_INVALID_ARGUMENT);
    /* End with a status; a status not in the vocabulary is refused. */
    jets_id s = jets_record_begin(t, 0, 90, "squashed", "Instruction", NULL, NULL);
    records++;
    CHECK_RC(jets_record_end_status(t, s, 91, "sideways"), JETS_ERR_INVALID_ARGUMENT);
    CHECK_RC(jets_record_end_status(t, s, 91, "flushed"), JETS_OK);
    ends++;
    /* Text fields: copied, escaped by the library. */
    char text[32];
    snprintf(text, sizeof text, "core \"%d\"\n", 7);
    jets_field f = jets_field_text(k, text);
    e = JETS_ATTRS_INIT;
    e.name = jets_intern("Owner");
    e.fields = &f;
    e.field_count = 1;
    CHECK_RC(jets_event_ex(t, d, 95, &e), JETS_OK);
    events++;
    CHECK_RC(jets_record_end(t, d, 100), JETS_OK);
    ends++;
    /* The attrs initializer as an assignment. */
    a = JETS_ATTRS_INIT;
    CHECK(a.size == sizeof(jets_attrs) && a.name == 0 && a.domain == 0);
    CHECK_RC(jets_close(t), JETS_OK);
    printf("expect records=%lu record_ends=%lu events=%lu annotations=0 open=0\n", records, ends,
           events);
    return failures ? 1 : 0;
}

/* ---- full disk ----------------------------------------------------------------------------- */

static int mode_full(const char *path) {
    signal(SIGXFSZ, SIG_IGN); /* a file size limit then fails the write with EFBIG */
    jets_trace *t = open_or_die(path, NULL);
    jets_id r = jets_record_begin(t, 0, 0, "sim", "Simulator", NULL, NULL);
    char data[200];
    int rc = JETS_OK;
    unsigned long i;
    for (i = 0; i < 2000000 && rc == JETS_OK; i++) {
        /* Poorly compressible data, so that compressed files fill up too. */
        snprintf(data, sizeof data, "{\"x\":%lu,\"h\":\"%08lx%08lx\"}", i, (i * 2654435761u) ^ i,
                 (i * 40503u) * 2246822519u);
        rc = jets_event(t, r, i, "Tick", NULL, data);
        if (rc == JETS_OK && i % 5000 == 0) rc = jets_flush(t);
    }
    CHECK(rc == JETS_ERR_IO);
    CHECK_RC(jets_close(t), JETS_ERR_IO);
    printf("full: JETS_ERR_IO after %lu events: %s\n", i, jets_last_error());
    return failures ? 1 : 0;
}

static int mode_open(const char *path) {
    signal(SIGXFSZ, SIG_IGN);
    jets_trace *t = NULL;
    int rc = jets_open(path, NULL, &t);
    CHECK(rc == JETS_ERR_IO);
    CHECK(t == NULL);
    printf("open on a full disk: %s\n", jets_last_error());
    return failures ? 1 : 0;
}

static int mode_fatal(const char *path) {
    jets_trace *t = open_or_die(path, NULL);
    CHECK_RC(jets_install_fatal_signal_flush(), JETS_OK);
    CHECK_RC(jets_install_fatal_signal_flush(), JETS_OK); /* idempotent */
    jets_id r = jets_record_begin(t, 0, 0, "sim", "Simulator", NULL, NULL);
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = jets_intern("Tick");
    for (uint64_t i = 0; i < 1000; i++) CHECK_RC(jets_event_ex(t, r, i, &a), JETS_OK);
    if (failures) return 1;
    abort(); /* the handler flushes, then SIGABRT kills the process as it would have */
}

/* The exit and sigterm modes' trace: a record left open with 1000 events on it, none written
 * yet (the writer would not write on its own before the process ends). */
static void open_and_leave_open(const char *path) {
    jets_options o = JETS_OPTIONS_INIT;
    o.flush_interval_us = 60 * 1000 * 1000;
    jets_trace *t = open_or_die(path, &o);
    jets_id r = jets_record_begin(t, 0, 0, "sim", "Simulator", NULL, NULL);
    CHECK(r != 0);
    for (uint64_t i = 0; i < 1000; i++) CHECK_RC(jets_event(t, r, i, "Tick", NULL, NULL), JETS_OK);
}

/* Set in a forked child that leaves by exit(): LeakSanitizer, which checks at exit, then stands
   down. The child has only the thread that forked; memory the parent's other threads (its JETS
   writer) held only in their registers and stacks looks leaked there, though nothing leaked.
   The parent's own check at its exit is unaffected. */
static volatile int forked_child_exiting = 0;

/* Called by LeakSanitizer (when the test is built with it) before its check at exit. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return forked_child_exiting; }

static int mode_exit(const char *path) {
    open_and_leave_open(path);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a child that waited for its parent's writer would hang: fail instead */
        forked_child_exiting = 1;
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (failures) return 1;
    printf("expect records=1 record_ends=0 events=1000 annotations=0 open=1\n");
    fflush(stdout);
    exit(0); /* no jets_close: the exit handler closes the trace */
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int mode_sigterm(const char *path) {
    /* Installed first: libjets' own SIGTERM handler, which closes the trace, still runs after it. */
    CHECK_RC(jets_install_fatal_signal_flush(), JETS_OK);
    open_and_leave_open(path);
    double forked = seconds();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a child that waited for its parent's writer would hang: fail instead */
        raise(SIGTERM);
        _exit(0); /* not reached: SIGTERM ends the child */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    /* It had no trace of its own to close: it did not wait for the parent's (3 s; the margin
       is for valgrind and sanitizers on a loaded machine). */
    CHECK(seconds() - forked < 2.8);
    if (failures) return 1;
    printf("expect records=1 record_ends=0 events=1000 annotations=0 open=1\n");
    fflush(stdout);
    raise(SIGTERM); /* no jets_close: the handler closes the trace, then the process dies */
    fprintf(stderr, "survived SIGTERM\n");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s fork|signal|drop|badjson|closed|parity|cancel|full|open|fatal|exit|sigterm DIR|PATH\n",
                argv[0]);
        return 2;
    }
    const char *m = argv[1];
    int rc = !strcmp(m, "fork")      ? mode_fork(argv[2])
             : !strcmp(m, "signal")  ? mode_signal(argv[2])
             : !strcmp(m, "drop")    ? mode_drop(argv[2])
             : !strcmp(m, "badjson") ? mode_badjson(argv[2])
             : !strcmp(m, "closed")  ? mode_closed(argv[2])
             : !strcmp(m, "parity")  ? mode_parity(argv[2])
             : !strcmp(m, "cancel")  ? mode_cancel(argv[2])
             : !strcmp(m, "full")    ? mode_full(argv[2])
             : !strcmp(m, "open")    ? mode_open(argv[2])
             : !strcmp(m, "fatal")   ? mode_fatal(argv[2])
             : !strcmp(m, "exit")    ? mode_exit(argv[2])
             : !strcmp(m, "sigterm") ? mode_sigterm(argv[2])
                                     : 2;
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return rc;
}
