/*
 * C99 test of libjets: every line type, several threads emitting under one parent, and every
 * documented error path. Usage: api_test TRACE_PATH SCRATCH_DIR
 * Prints "expect records=R record_ends=E events=V annotations=A" for check_trace.py.
 * Also writes SCRATCH_DIR/host.jets with the host monitor running.
 */
#define _POSIX_C_SOURCE 200112L
#include <jets.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* A call must fail with `code`, name the function in jets_last_error(), and set the code. */
#define EXPECT_ERR(call, code, fn)                                                    \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != (code) || jets_last_error_code() != (code) ||                      \
            strncmp(jets_last_error(), fn ": ", strlen(fn) + 2) != 0) {               \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n",  \
                    __FILE__, __LINE__, #call, jets_status_name(rc_),                 \
                    jets_status_name(code), jets_last_error());                       \
            failures++;                                                               \
        }                                                                             \
    } while (0)

/* jets_record_begin* return 0 on failure; the code is in jets_last_error_code(). */
#define EXPECT_BEGIN_ERR(call, code, fn)                                              \
    do {                                                                              \
        jets_id id_ = (call);                                                         \
        CHECK(id_ == 0);                                                              \
        EXPECT_ERR(jets_last_error_code(), code, fn);                                 \
    } while (0)

/* Lines written, counted by the test as it goes and compared with the file by the checker. */
static unsigned long records, record_ends, events, annotations;

enum { THREADS = 4, PER_THREAD = 200 };

struct worker {
    jets_trace *t;
    jets_id parent;
    int index;
    int ok;
    unsigned long records, record_ends, events;
};

static void *work(void *arg) {
    struct worker *w = (struct worker *)arg;
    jets_str op = jets_intern("op");
    jets_str lane = jets_intern("lane");
    jets_str seq = jets_intern("seq");
    jets_str issue = jets_intern("Issue");
    int i;
    char name[32];
    w->ok = op != 0 && lane != 0 && seq != 0 && issue != 0;
    /* A fresh thread has no last error of its own. */
    if (jets_last_error_code() != JETS_OK || strcmp(jets_last_error(), "") != 0) w->ok = 0;
    for (i = 0; i < PER_THREAD && w->ok; i++) {
        uint64_t clk = 100 + (uint64_t)i * 4;
        jets_field fields[2];
        jets_attrs a = JETS_ATTRS_INIT;
        jets_id r;
        snprintf(name, sizeof name, "op%d.%d", w->index, i);
        r = jets_record_begin(w->t, w->parent, clk, name, "Instruction", NULL, "{\"lane\":1}");
        if (r == 0) { w->ok = 0; break; }
        w->records++;
        fields[0] = jets_field_u64(seq, (uint64_t)i);
        fields[1] = jets_field_i64(lane, -(int64_t)w->index);
        a.name = issue;
        a.fields = fields;
        a.field_count = 2;
        if (jets_event_ex(w->t, r, clk + 1, &a) != JETS_OK) { w->ok = 0; break; }
        w->events++;
        if (jets_event(w->t, w->parent, JETS_CLK_NOW, "Tick", NULL, NULL) != JETS_OK) {
            w->ok = 0;
            break;
        }
        w->events++;
        if (jets_record_end(w->t, r, clk + 3) != JETS_OK) { w->ok = 0; break; }
        w->record_ends++;
        /* Another thread's failure never shows up here, and ours is ours. */
        if (jets_record_end(w->t, r, clk + 3) != JETS_ERR_RECORD_ENDED) { w->ok = 0; break; }
    }
    return NULL;
}

static void error_paths(jets_trace *t, jets_id root, const char *scratch) {
    char path[4096];
    jets_trace *bad = (jets_trace *)&failures; /* overwritten with NULL by a failing open */
    jets_options o = JETS_OPTIONS_INIT;
    jets_attrs a = JETS_ATTRS_INIT;
    jets_field f;
    jets_id child, ended;
    jets_str name = jets_intern("Name");
    jets_str key = jets_intern("key");

    /* jets_open */
    EXPECT_ERR(jets_open(NULL, NULL, &bad), JETS_ERR_INVALID_ARGUMENT, "jets_open");
    CHECK(bad == NULL);
    snprintf(path, sizeof path, "%s/never.jets", scratch);
    EXPECT_ERR(jets_open(path, NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_open");
    EXPECT_ERR(jets_open(path, "{\"a\":", &bad), JETS_ERR_INVALID_JSON, "jets_open");
    EXPECT_ERR(jets_open(path, "[1,2]", &bad), JETS_ERR_INVALID_JSON, "jets_open");
    EXPECT_ERR(jets_open(path, "{\"model\":\"\xff\"}", &bad), JETS_ERR_INVALID_UTF8, "jets_open");
    snprintf(path, sizeof path, "%s/no/such/dir/x.jets", scratch);
    EXPECT_ERR(jets_open(path, NULL, &bad), JETS_ERR_IO, "jets_open");
    CHECK(strstr(jets_last_error(), "no/such/dir") != NULL);
    EXPECT_ERR(jets_open("/dev/full", NULL, &bad), JETS_ERR_IO, "jets_open");
    snprintf(path, sizeof path, "%s/never.jets", scratch);
    o.size = 4;
    EXPECT_ERR(jets_open_ex(path, NULL, &o, &bad), JETS_ERR_INVALID_ARGUMENT, "jets_open");
    o.size = (uint32_t)sizeof o;
    o.policy = 7;
    EXPECT_ERR(jets_open_ex(path, NULL, &o, &bad), JETS_ERR_INVALID_ARGUMENT, "jets_open");
    CHECK(bad == NULL);

    /* jets_record_begin */
    EXPECT_BEGIN_ERR(jets_record_begin(NULL, 0, 0, "n", "T", NULL, NULL),
                     JETS_ERR_INVALID_ARGUMENT, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, NULL, "T", NULL, NULL),
                     JETS_ERR_INVALID_ARGUMENT, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, "n", NULL, NULL, NULL),
                     JETS_ERR_INVALID_ARGUMENT, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, "bad\xc3", "T", NULL, NULL),
                     JETS_ERR_INVALID_UTF8, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, "n", "T", "\xfe", NULL),
                     JETS_ERR_INVALID_UTF8, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, "n", "T", NULL, "{oops"),
                     JETS_ERR_INVALID_JSON, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 10, "n", "T", NULL, "[1]"),
                     JETS_ERR_INVALID_JSON, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, 999999, 10, "n", "T", NULL, NULL),
                     JETS_ERR_UNKNOWN_RECORD, "jets_record_begin");
    EXPECT_BEGIN_ERR(jets_record_begin(t, root, 0, "n", "T", NULL, NULL),
                     JETS_ERR_CLK_BEFORE_START, "jets_record_begin");

    ended = jets_record_begin(t, root, 20, "ended", "Scratch", NULL, NULL);
    CHECK(ended != 0);
    records++;
    CHECK(jets_record_end(t, ended, 21) == JETS_OK);
    record_ends++;
    EXPECT_BEGIN_ERR(jets_record_begin(t, ended, 22, "n", "T", NULL, NULL),
                     JETS_ERR_RECORD_ENDED, "jets_record_begin");

    /* jets_record_end */
    EXPECT_ERR(jets_record_end(NULL, ended, 30), JETS_ERR_INVALID_ARGUMENT, "jets_record_end");
    EXPECT_ERR(jets_record_end(t, 0, 30), JETS_ERR_INVALID_ARGUMENT, "jets_record_end");
    EXPECT_ERR(jets_record_end(t, 999999, 30), JETS_ERR_UNKNOWN_RECORD, "jets_record_end");
    EXPECT_ERR(jets_record_end(t, ended, 30), JETS_ERR_RECORD_ENDED, "jets_record_end");
    child = jets_record_begin(t, root, 40, "late", "Scratch", NULL, NULL);
    CHECK(child != 0);
    records++;
    EXPECT_ERR(jets_record_end(t, child, 39), JETS_ERR_CLK_BEFORE_START, "jets_record_end");
    CHECK(strstr(jets_last_error(), "clk 39") != NULL);

    /* jets_event (the record `child` stays open after the refused end) */
    EXPECT_ERR(jets_event(NULL, child, 41, "e", NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_event");
    EXPECT_ERR(jets_event(t, child, 41, NULL, NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_event");
    EXPECT_ERR(jets_event(t, child, 41, "\x80", NULL, NULL), JETS_ERR_INVALID_UTF8, "jets_event");
    EXPECT_ERR(jets_event(t, child, 41, "e", "\x80", NULL), JETS_ERR_INVALID_UTF8, "jets_event");
    EXPECT_ERR(jets_event(t, child, 41, "e", NULL, "{\"a\":1,}"), JETS_ERR_INVALID_JSON, "jets_event");
    EXPECT_ERR(jets_event(t, child, 41, "e", NULL, "\"\xff\""), JETS_ERR_INVALID_UTF8, "jets_event");
    EXPECT_ERR(jets_event(t, child, 39, "e", NULL, NULL), JETS_ERR_CLK_BEFORE_START, "jets_event");
    EXPECT_ERR(jets_event(t, 0, 41, "e", NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_event");
    EXPECT_ERR(jets_event(t, 999999, 41, "e", NULL, NULL), JETS_ERR_UNKNOWN_RECORD, "jets_event");
    EXPECT_ERR(jets_event(t, ended, 41, "e", NULL, NULL), JETS_ERR_RECORD_ENDED, "jets_event");

    /* jets_annotation */
    EXPECT_ERR(jets_annotation(NULL, child, "a", NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_annotation");
    EXPECT_ERR(jets_annotation(t, child, NULL, NULL, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_annotation");
    EXPECT_ERR(jets_annotation(t, child, "a", NULL, "nul"), JETS_ERR_INVALID_JSON, "jets_annotation");
    EXPECT_ERR(jets_annotation(t, child, "\xc0", NULL, NULL), JETS_ERR_INVALID_UTF8, "jets_annotation");
    EXPECT_ERR(jets_annotation(t, 999999, "a", NULL, NULL), JETS_ERR_UNKNOWN_RECORD, "jets_annotation");
    EXPECT_ERR(jets_annotation(t, ended, "a", NULL, NULL), JETS_ERR_RECORD_ENDED, "jets_annotation");

    /* the _ex calls: struct size, handles, fields */
    EXPECT_ERR(jets_event_ex(t, child, 41, NULL), JETS_ERR_INVALID_ARGUMENT, "jets_event_ex");
    a.size = 0;
    a.name = name;
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_INVALID_ARGUMENT, "jets_event_ex");
    CHECK(strstr(jets_last_error(), "JETS_ATTRS_INIT") != NULL);
    a.size = (uint32_t)sizeof a;
    a.name = 0;
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_INVALID_ARGUMENT, "jets_event_ex");
    a.name = 0x7fffffff;
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_UNKNOWN_STRING, "jets_event_ex");
    a.name = name;
    a.description = 0x7ffffffe;
    EXPECT_ERR(jets_annotation_ex(t, child, &a), JETS_ERR_UNKNOWN_STRING, "jets_annotation_ex");
    a.description = 0;
    f = jets_field_u64(key, 1);
    f.kind = 99;
    a.fields = &f;
    a.field_count = 1;
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_INVALID_ARGUMENT, "jets_event_ex");
    f = jets_field_u64(0x7ffffffd, 1);
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_UNKNOWN_STRING, "jets_event_ex");
    f = jets_field_str(key, 0x7ffffffc);
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_UNKNOWN_STRING, "jets_event_ex");
    f = jets_field_u64(key, 1);
    a.data_json = "[1]"; /* typed fields merge only into an object */
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_INVALID_JSON, "jets_event_ex");
    a.data_json = NULL;
    a.fields = NULL;
    EXPECT_ERR(jets_event_ex(t, child, 41, &a), JETS_ERR_INVALID_ARGUMENT, "jets_event_ex");
    a.field_count = 0;
    EXPECT_BEGIN_ERR(jets_record_begin_ex(t, root, 50, &a), JETS_ERR_INVALID_ARGUMENT,
                     "jets_record_begin_ex"); /* record_type is 0 */
    a.record_type = name;
    EXPECT_BEGIN_ERR(jets_record_begin_ex(t, ended, 50, &a), JETS_ERR_RECORD_ENDED,
                     "jets_record_begin_ex");

    /* jets_intern, clock, flush, close */
    CHECK(jets_intern(NULL) == 0);
    EXPECT_ERR(jets_last_error_code(), JETS_ERR_INVALID_ARGUMENT, "jets_intern");
    CHECK(jets_intern("\xff") == 0);
    EXPECT_ERR(jets_last_error_code(), JETS_ERR_INVALID_UTF8, "jets_intern");
    EXPECT_ERR(jets_set_clock(NULL, 1), JETS_ERR_INVALID_ARGUMENT, "jets_set_clock");
    EXPECT_ERR(jets_set_clock(t, JETS_CLK_NOW), JETS_ERR_INVALID_ARGUMENT, "jets_set_clock");
    EXPECT_ERR(jets_flush(NULL), JETS_ERR_INVALID_ARGUMENT, "jets_flush");
    EXPECT_ERR(jets_close(NULL), JETS_ERR_INVALID_ARGUMENT, "jets_close");
    EXPECT_ERR(jets_close_at(NULL, 5), JETS_ERR_INVALID_ARGUMENT, "jets_close_at");

    /* After all that, the refused record still works and ends once. */
    CHECK(jets_event(t, child, 41, "after-errors", NULL, NULL) == JETS_OK);
    events++;
    CHECK(jets_record_end(t, child, 42) == JETS_OK);
    record_ends++;

    CHECK(strcmp(jets_status_name(JETS_ERR_RECORD_ENDED), "JETS_ERR_RECORD_ENDED") == 0);
    CHECK(strcmp(jets_status_name(12345), "JETS_ERR_UNRECOGNIZED") == 0);
    CHECK(strcmp(jets_status_name(JETS_ERR_HOST), "JETS_ERR_HOST") == 0);
}

/* The host monitor samples this process into its own trace, twice (start, stop, start, close). */
static void host_monitor(const char *scratch) {
    char path[4096];
    jets_trace *h = NULL;
    jets_id r;
    struct timespec nap;
    nap.tv_sec = 0;
    nap.tv_nsec = 30L * 1000 * 1000;
    snprintf(path, sizeof path, "%s/host.jets", scratch);
    CHECK(jets_open(path, "{\"hardware_model\":\"host-test\"}", &h) == JETS_OK);
    if (h == NULL) return;
    EXPECT_ERR(jets_host_monitor_stop(h), JETS_ERR_INVALID_ARGUMENT, "jets_host_monitor_stop");
    EXPECT_ERR(jets_host_monitor_start(NULL, 5), JETS_ERR_INVALID_ARGUMENT,
               "jets_host_monitor_start");
    CHECK(jets_host_monitor_start(h, 5) == JETS_OK);
    EXPECT_ERR(jets_host_monitor_start(h, 5), JETS_ERR_INVALID_ARGUMENT, "jets_host_monitor_start");
    r = jets_record_begin(h, 0, 0, "work", "Work", NULL, NULL);
    CHECK(r != 0);
    CHECK(jets_set_clock(h, 1000) == JETS_OK);
    nanosleep(&nap, NULL);
    CHECK(jets_record_end(h, r, 1000) == JETS_OK);
    CHECK(jets_host_monitor_stop(h) == JETS_OK);
    CHECK(jets_host_monitor_start(h, 5) == JETS_OK); /* jets_close stops this one */
    nanosleep(&nap, NULL);
    CHECK(jets_close(h) == JETS_OK);
}

/*
 * A write failure in the middle of a run (a file size limit, in a child process so the limit
 * stays there): flush reports JETS_ERR_IO naming the file, every later call refuses with it, and
 * SCRATCH_DIR/full.jets keeps a valid prefix of whole lines (checked by the suite).
 */
static void io_failure(const char *scratch) {
    int status = 0;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        char path[4096];
        jets_trace *t = NULL;
        jets_id r;
        int i, rc = JETS_OK;
        signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead of killing us */
        if (getrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(10);
        rl.rlim_cur = 8192;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(11);
        snprintf(path, sizeof path, "%s/full.jets", scratch);
        if (jets_open(path, NULL, &t) != JETS_OK) _exit(12);
        r = jets_record_begin(t, 0, 0, "r", "R", NULL, NULL);
        for (i = 0; i < 100000 && rc == JETS_OK; i++) {
            rc = jets_event(t, r, (uint64_t)i, "e", NULL, "{\"payload\":\"0123456789\"}");
            if (rc == JETS_OK && i % 100 == 99) rc = jets_flush(t);
        }
        if (rc != JETS_ERR_IO) _exit(13);
        if (strstr(jets_last_error(), "full.jets") == NULL) _exit(14);
        if (jets_event(t, r, 5, "e", NULL, NULL) != JETS_ERR_IO) _exit(15);
        if (jets_record_begin(t, r, 5, "c", "C", NULL, NULL) != 0) _exit(16);
        if (jets_close(t) != JETS_ERR_IO) _exit(17);
        _exit(0);
    }
    CHECK(pid > 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "io_failure child: status %d\n", status);
        failures++;
    }
}

int main(int argc, char **argv) {
    jets_trace *t = NULL;
    jets_id root, core, insn, open_forever;
    jets_str pc, lat, hit, unit, name, kind, desc, ratio;
    jets_field fields[5];
    jets_attrs a = JETS_ATTRS_INIT;
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    int i;

    if (argc != 3) {
        fprintf(stderr, "usage: %s TRACE SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    CHECK(strlen(jets_version()) > 0);
    CHECK(jets_open(argv[1], "{\"hardware_model\":\"c-test\",\"clock_frequency_mhz\":1000}",
                    &t) == JETS_OK);
    if (t == NULL) return 1;

    /* Every line type through the plain string API. */
    root = jets_record_begin(t, 0, 0, "soc", "SoC", "the whole chip", "{\"cores\":1}");
    CHECK(root != 0);
    records++;
    core = jets_record_begin(t, root, 1, "core0", "Core", NULL, NULL);
    CHECK(core != 0);
    records++;
    CHECK(jets_annotation(t, core, "Config", "core setup", "{\"rob\":64}") == JETS_OK);
    CHECK(jets_annotation(t, core, "Empty", NULL, NULL) == JETS_OK);
    annotations += 2;
    CHECK(jets_event(t, core, 2, "Wake", "quote \" and \\ and \n newline", "[1,2,3]") == JETS_OK);
    CHECK(jets_event(t, core, 3, "Plain", NULL, NULL) == JETS_OK);
    events += 2;

    /* Interned names and typed fields of every kind. */
    pc = jets_intern("pc");
    lat = jets_intern("latency");
    hit = jets_intern("hit");
    unit = jets_intern("unit");
    ratio = jets_intern("ratio");
    name = jets_intern("add x1, x2, x3");
    kind = jets_intern("Instruction");
    desc = jets_intern("an add");
    CHECK(pc && lat && hit && unit && ratio && name && kind && desc);
    CHECK(jets_intern("pc") == pc);
    fields[0] = jets_field_u64(pc, 0x1000);
    fields[1] = jets_field_i64(lat, -3);
    fields[2] = jets_field_bool(hit, true);
    fields[3] = jets_field_str(unit, kind);
    fields[4] = jets_field_f64(ratio, 0.25);
    a.name = name;
    a.record_type = kind;
    a.description = desc;
    a.fields = fields;
    a.field_count = 5;
    a.data_json = "{\"extra\":\"json\"}";
    insn = jets_record_begin_ex(t, core, 4, &a);
    CHECK(insn != 0);
    records++;
    a.data_json = NULL;
    CHECK(jets_event_ex(t, insn, 5, &a) == JETS_OK);
    events++;
    CHECK(jets_annotation_ex(t, insn, &a) == JETS_OK);
    annotations++;

    /* The trace clock. */
    CHECK(jets_set_clock(t, 7) == JETS_OK);
    CHECK(jets_event(t, insn, JETS_CLK_NOW, "Execute", NULL, NULL) == JETS_OK);
    events++;
    CHECK(jets_record_end(t, insn, JETS_CLK_NOW) == JETS_OK);
    record_ends++;
    CHECK(jets_flush(t) == JETS_OK);

    error_paths(t, core, argv[2]);

    /* Several threads emitting children and events under one parent. */
    for (i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].t = t;
        workers[i].parent = core;
        workers[i].index = i;
        CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (i = 0; i < THREADS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(workers[i].ok);
        records += workers[i].records;
        record_ends += workers[i].record_ends;
        events += workers[i].events;
    }

    open_forever = jets_record_begin(t, core, 5000, "left-open", "Scratch", NULL, NULL);
    CHECK(open_forever != 0);
    records++;
    CHECK(jets_record_end(t, core, 5001) == JETS_OK);
    CHECK(jets_record_end(t, root, 5002) == JETS_OK);
    record_ends += 2;
    CHECK(jets_close_at(t, 6000) == JETS_OK);

    host_monitor(argv[2]);
    io_failure(argv[2]);

    printf("expect records=%lu record_ends=%lu events=%lu annotations=%lu open=1 end_clk=6000\n",
           records, record_ends, events, annotations);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
