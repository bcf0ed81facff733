/*
 * A cycle-level model of an output-stationary systolic array computing C = A x B, traced with
 * libjets. Rows of processing elements (PEs) are simulated by worker threads that meet at a
 * barrier every cycle, so the trace is written from several threads at once.
 *
 * Operands enter skewed: row i of A from the left, i cycles late; column j of B from the top,
 * j cycles late. Each cycle every PE multiplies the pair it holds into its accumulator and passes
 * a to the right and b down. PE (i,j) therefore sees A[i][k] and B[k][j] at cycle i + j + k.
 *
 * Trace: a root "array" record; one record per PE (unit_id = row, thread_id = column) from its
 * first to its last MAC; a "MAC" event per multiply with typed fields k, a, b, acc (interned keys,
 * no JSON text); an annotation with the result of each PE.
 *
 * Usage: systolic OUT.jets [N] [K]    (N x N array, inner dimension K; defaults 8 and 16)
 * Prints "result ok ..." when C equals a plain triple-loop product, else exits 1.
 */
#define _POSIX_C_SOURCE 200112L
#include <jets.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_N 64
#define WORKERS 2

struct pe {
    int64_t a, b, acc;
    int valid_a, valid_b;
    jets_id record;
};

static int n, k_dim;
static int64_t A[MAX_N][4 * MAX_N], B[4 * MAX_N][MAX_N];
static struct pe grid[MAX_N][MAX_N], next[MAX_N][MAX_N];
static jets_trace *trace;
static jets_id array_record;
static jets_str s_mac, s_pe, s_k, s_a, s_b, s_acc, s_result;
static pthread_barrier_t barrier;
static int failed;

static void check(int rc, const char *what) {
    if (rc != JETS_OK) {
        fprintf(stderr, "systolic: %s: %s\n", what, jets_last_error());
        failed = 1;
    }
}

/* One cycle of PE (i,j): latch inputs from the left/top neighbours (or the skewed edges), MAC. */
static void step(int i, int j, int cycle) {
    struct pe *p = &next[i][j];
    int k_a = cycle - i - j; /* which k reaches this PE now */
    *p = grid[i][j];
    if (j == 0) {
        p->valid_a = k_a >= 0 && k_a < k_dim;
        p->a = p->valid_a ? A[i][k_a] : 0;
    } else {
        p->valid_a = grid[i][j - 1].valid_a;
        p->a = grid[i][j - 1].a;
    }
    if (i == 0) {
        p->valid_b = k_a >= 0 && k_a < k_dim;
        p->b = p->valid_b ? B[k_a][j] : 0;
    } else {
        p->valid_b = grid[i - 1][j].valid_b;
        p->b = grid[i - 1][j].b;
    }
    if (!(p->valid_a && p->valid_b)) return;
    p->acc += p->a * p->b;
    if (p->record == 0) {
        char name[32];
        jets_field hints[2];
        jets_attrs at = JETS_ATTRS_INIT;
        snprintf(name, sizeof name, "PE(%d,%d)", i, j);
        hints[0] = jets_field_u64(jets_intern("unit_id"), (uint64_t)i);
        hints[1] = jets_field_u64(jets_intern("thread_id"), (uint64_t)j);
        at.name = jets_intern(name);
        at.record_type = s_pe;
        at.fields = hints;
        at.field_count = 2;
        p->record = jets_record_begin_ex(trace, array_record, (uint64_t)cycle, &at);
        if (p->record == 0) check(jets_last_error_code(), "begin PE");
    }
    {
        jets_field f[4];
        jets_attrs ev = JETS_ATTRS_INIT;
        f[0] = jets_field_u64(s_k, (uint64_t)k_a);
        f[1] = jets_field_i64(s_a, p->a);
        f[2] = jets_field_i64(s_b, p->b);
        f[3] = jets_field_i64(s_acc, p->acc);
        ev.name = s_mac;
        ev.fields = f;
        ev.field_count = 4;
        check(jets_event_ex(trace, p->record, (uint64_t)cycle, &ev), "MAC event");
    }
    if (k_a == k_dim - 1) { /* last operand pair: this PE is done */
        jets_field r = jets_field_i64(s_acc, p->acc);
        jets_attrs an = JETS_ATTRS_INIT;
        an.name = s_result;
        an.fields = &r;
        an.field_count = 1;
        check(jets_annotation_ex(trace, p->record, &an), "result annotation");
        check(jets_record_end(trace, p->record, (uint64_t)cycle + 1), "end PE");
    }
}

struct worker { int first_row, last_row, cycles; };

static void *run_rows(void *arg) {
    const struct worker *w = (const struct worker *)arg;
    int cycle, i, j;
    for (cycle = 0; cycle < w->cycles; cycle++) {
        for (i = w->first_row; i < w->last_row; i++)
            for (j = 0; j < n; j++) step(i, j, cycle);
        /* Everyone has computed `next`; one thread publishes it, then all start the next cycle. */
        if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            for (i = 0; i < n; i++)
                for (j = 0; j < n; j++) grid[i][j] = next[i][j];
            check(jets_set_clock(trace, (uint64_t)cycle + 1), "set clock");
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int i, j, k, cycles, t;
    int64_t checksum = 0;
    pthread_t threads[WORKERS];
    struct worker workers[WORKERS];
    char meta[256];

    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s OUT.jets [N] [K]\n", argv[0]);
        return 2;
    }
    n = argc > 2 ? atoi(argv[2]) : 8;
    k_dim = argc > 3 ? atoi(argv[3]) : 16;
    if (n < WORKERS || n > MAX_N || k_dim < 1 || k_dim > 4 * MAX_N) {
        fprintf(stderr, "systolic: N must be in [%d, %d] and K in [1, %d]\n", WORKERS, MAX_N,
                4 * MAX_N);
        return 2;
    }
    for (i = 0; i < n; i++)
        for (k = 0; k < k_dim; k++) A[i][k] = (int64_t)((i * 7 + k * 3) % 11) - 5;
    for (k = 0; k < k_dim; k++)
        for (j = 0; j < n; j++) B[k][j] = (int64_t)((k * 5 + j * 2) % 13) - 6;

    snprintf(meta, sizeof meta,
             "{\"hardware_model\":\"systolic-%dx%d\",\"clock_frequency_mhz\":1000}", n, n);
    if (jets_open(argv[1], meta, &trace) != JETS_OK) {
        fprintf(stderr, "systolic: %s\n", jets_last_error());
        return 1;
    }
    s_mac = jets_intern("MAC");
    s_pe = jets_intern("PE");
    s_k = jets_intern("k");
    s_a = jets_intern("a");
    s_b = jets_intern("b");
    s_acc = jets_intern("acc");
    s_result = jets_intern("result");
    array_record = jets_record_begin(trace, 0, 0, "array", "SystolicArray", "output-stationary",
                                     "{\"color\":\"#4caf50\"}");
    if (array_record == 0) {
        fprintf(stderr, "systolic: %s\n", jets_last_error());
        return 1;
    }
    snprintf(meta, sizeof meta, "{\"rows\":%d,\"cols\":%d,\"k\":%d}", n, n, k_dim);
    check(jets_annotation(trace, array_record, "Shape", NULL, meta), "shape annotation");

    /* The last PE (n-1, n-1) sees its last pair at cycle 2(n-1) + k - 1. */
    cycles = 2 * (n - 1) + k_dim;
    pthread_barrier_init(&barrier, NULL, WORKERS);
    for (t = 0; t < WORKERS; t++) {
        workers[t].first_row = t * n / WORKERS;
        workers[t].last_row = (t + 1) * n / WORKERS;
        workers[t].cycles = cycles;
        pthread_create(&threads[t], NULL, run_rows, &workers[t]);
    }
    for (t = 0; t < WORKERS; t++) pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&barrier);
    check(jets_record_end(trace, array_record, (uint64_t)cycles), "end array");
    check(jets_close(trace), "close");

    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            int64_t want = 0;
            for (k = 0; k < k_dim; k++) want += A[i][k] * B[k][j];
            if (grid[i][j].acc != want) {
                fprintf(stderr, "systolic: C[%d][%d] = %lld, expected %lld\n", i, j,
                        (long long)grid[i][j].acc, (long long)want);
                failed = 1;
            }
            checksum += want * (i + 1) + j;
        }
    if (failed) return 1;
    printf("result ok n=%d k=%d cycles=%d checksum=%lld macs=%d\n", n, k_dim, cycles,
           (long long)checksum, n * n * k_dim);
    return 0;
}
