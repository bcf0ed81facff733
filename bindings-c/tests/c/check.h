/*
 * The C tests' failure counter and CHECK macro: a failed check is reported with its file, line,
 * condition and libjets' last error, and counted; main() returns non-zero when any failed.
 * Include after <jets.h> and <stdio.h>.
 */
#ifndef JETS_TEST_CHECK_H
#define JETS_TEST_CHECK_H

static int failures = 0;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,    \
                    __LINE__, #cond, jets_last_error());                               \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#endif
