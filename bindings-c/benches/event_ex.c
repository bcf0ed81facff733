/* Instructions per jets_event_ex as a C program pays them, through libjets.so (thread-locals go
 * through __tls_get_addr there): an event with an interned name and two typed fields, N times
 * (not a benchmark; benches/ffi.rs times the call, examples/ffi_count.rs counts it beside the
 * Rust call).
 *
 *   cargo build --release -p jets-c --lib
 *   ln -sf libjets_c.so target/release/libjets.so.0
 *   cc -O2 -std=c99 -I bindings-c/include bindings-c/benches/event_ex.c -o event_ex \
 *      -L target/release -ljets_c -Wl,-rpath,$PWD/target/release
 *   valgrind --tool=callgrind --toggle-collect=jets_event_ex ./event_ex /tmp/t.jets 20000
 *
 * Instructions per call: callgrind's total divided by N. */
#include <jets.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE [N]\n", argv[0]);
        return 2;
    }
    unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
    jets_trace *t;
    if (jets_open(argv[1], NULL, &t) != JETS_OK) {
        fprintf(stderr, "%s\n", jets_last_error());
        return 1;
    }
    jets_id root = jets_record_begin(t, 0, 0, "core0", "Core", NULL, NULL);
    jets_str pc = jets_intern("pc"), lat = jets_intern("latency");
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = jets_intern("Retire");
    for (unsigned long clk = 1; clk <= n; clk++) {
        jets_field f[2] = {jets_field_u64(pc, clk), jets_field_u64(lat, 3)};
        a.fields = f;
        a.field_count = 2;
        if (jets_event_ex(t, root, clk, &a) != JETS_OK) {
            fprintf(stderr, "%s\n", jets_last_error());
            return 1;
        }
        if (clk % 4096 == 0 && jets_flush(t) != JETS_OK) {
            return 1;
        }
    }
    return jets_close(t) == JETS_OK ? 0 : 1;
}
