/*
 * With JETS_DISABLE defined, every call compiles to an inline no-op: this program builds and
 * links WITHOUT libjets (the suite also checks that it references no jets_ symbol), still
 * evaluates arguments, and every call succeeds. Compiled as C99 and as C++17.
 */
#define JETS_DISABLE 1
#include <jets.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    jets_trace *t = (jets_trace *)&t;
    jets_options o = JETS_OPTIONS_INIT;
    jets_attrs a = JETS_ATTRS_INIT;
    jets_field f;
    jets_id r;
    uint64_t clk = 0;
    int bad = 0;

    bad |= jets_open("never-created.jets", NULL, &t) != JETS_OK || t != NULL;
    bad |= jets_open_ex("never-created.jets", NULL, &o, &t) != JETS_OK;
    r = jets_record_begin(t, 0, clk++, "r", "T", NULL, NULL);
    bad |= r == 0;
    a.name = jets_intern("n");
    f = jets_field_u64(a.name, 1);
    a.fields = &f;
    a.field_count = 1;
    bad |= jets_record_begin_ex(t, r, clk++, &a) == 0;
    bad |= jets_event(t, r, clk++, "e", NULL, NULL) != JETS_OK;
    bad |= jets_event_ex(t, r, clk++, &a) != JETS_OK;
    bad |= jets_annotation(t, r, "a", NULL, NULL) != JETS_OK;
    bad |= jets_annotation_ex(t, r, &a) != JETS_OK;
    bad |= jets_set_clock(t, clk++) != JETS_OK;
    bad |= jets_record_end(t, r, clk++) != JETS_OK;
    bad |= jets_capture_off(t) != JETS_OK || jets_capture_on(t) != JETS_OK;
    bad |= jets_roi_begin(t) != JETS_OK || jets_roi_end(t) != JETS_OK;
    bad |= jets_dump(t) != JETS_OK || jets_limit_reached(t) != 0;
    bad |= jets_flush(t) != JETS_OK;
    bad |= jets_last_error_code() != JETS_OK || strcmp(jets_last_error(), "") != 0;
    bad |= jets_close(t) != JETS_OK;
    bad |= jets_close_at(t, 1) != JETS_OK;
    bad |= clk != 6; /* arguments were evaluated */
    if (bad) {
        fprintf(stderr, "disabled calls did not all succeed\n");
        return 1;
    }
    printf("JETS_DISABLE: ok (%s)\n", jets_version());
    return 0;
}
