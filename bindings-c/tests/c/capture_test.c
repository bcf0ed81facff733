/*
 * C99 test of capture control through libjets. Run with JETS_CAPTURE="roi;events=Keep": jets_open
 * reads it; only events named Keep emitted inside a region of interest are written, with their
 * record as ancestor. A setting in jets_options.capture would win over the variable: a bad one
 * there is refused first. Usage: capture_test TRACE_PATH
 * Prints "expect records=R record_ends=E events=V annotations=A" for check_trace.py.
 */
#include <jets.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: capture_test TRACE_PATH\n");
        return 2;
    }
    jets_trace *t = NULL;
    /* options->capture wins over the variable: a bad setting there fails the open, naming it. */
    jets_options o = JETS_OPTIONS_INIT;
    CHECK(o.capture == NULL);
    o.capture = "clk=9..3";
    CHECK(jets_open_ex(argv[1], NULL, &o, &t) == JETS_ERR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    CHECK(strstr(jets_last_error(), "options->capture: JETS_CAPTURE clause `clk=9..3`") != NULL);
    CHECK(jets_open(argv[1], NULL, &t) == JETS_OK);
    if (!t) return 1;
    jets_id core = jets_record_begin(t, 0, 0, "core", "Core", NULL, NULL);
    CHECK(core != 0);
    CHECK(jets_event(t, core, 1, "Keep", NULL, NULL) == JETS_OK); /* outside any region */
    CHECK(jets_roi_end(t) == JETS_ERR_INVALID_ARGUMENT);          /* none open */
    CHECK(jets_roi_begin(t) == JETS_OK);
    CHECK(jets_roi_begin(t) == JETS_OK); /* nested */
    CHECK(jets_event(t, core, 2, "Keep", NULL, NULL) == JETS_OK);
    CHECK(jets_event(t, core, 3, "Drop", NULL, NULL) == JETS_OK); /* not a listed name */
    CHECK(jets_roi_end(t) == JETS_OK);
    CHECK(jets_event(t, core, 4, "Keep", NULL, NULL) == JETS_OK); /* still inside the outer */
    CHECK(jets_capture_off(t) == JETS_OK);
    CHECK(jets_event(t, core, 5, "Keep", NULL, NULL) == JETS_OK); /* capture off */
    CHECK(jets_capture_on(t) == JETS_OK);
    CHECK(jets_roi_end(t) == JETS_OK);
    CHECK(jets_event(t, core, 6, "Keep", NULL, NULL) == JETS_OK); /* after the regions */
    CHECK(jets_dump(t) == JETS_OK);
    CHECK(jets_record_end(t, core, 7) == JETS_OK);
    CHECK(jets_close(t) == JETS_OK);
    printf("expect records=1 record_ends=1 events=2 annotations=0\n");
    return failures ? 1 : 0;
}
