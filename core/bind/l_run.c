/* l_run.c — the process-wide count of runs in progress (l_run.h): what a host or a signal handler may ask. */
#include "l_run.h"
#include "lutra.h"

static int run_depth; /* runs in progress, nested or in several states; atomic */

void l_run_enter(void) { __atomic_add_fetch(&run_depth, 1, __ATOMIC_SEQ_CST); }
void l_run_leave(void) { __atomic_sub_fetch(&run_depth, 1, __ATOMIC_SEQ_CST); }
int lutra_run_active(void) { return __atomic_load_n(&run_depth, __ATOMIC_SEQ_CST) > 0; }
