/* check.h — the C tests' tally: CHECK(cond, what) prints "ok - what" or "not ok - what (file:line)" and counts;
 * a test's main ends with printf("%d passed, %d failed\n", passed, failed) (tests/run reads that line). */
#ifndef LT_TEST_CHECK_H
#define LT_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;
#define CHECK(cond, what)                                                        \
  do {                                                                           \
    if (cond) { passed++; printf("ok - %s\n", what); }                           \
    else { failed++; printf("not ok - %s (%s:%d)\n", what, __FILE__, __LINE__); } \
  } while (0)

#endif
