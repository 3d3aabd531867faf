/* interrupt.c — see lt_interrupt.h. */
#include "lt_interrupt.h"

#include <signal.h>

static volatile sig_atomic_t requested;

void lt_interrupt_request(void) { requested = 1; }
int lt_interrupt_pending(void) { return requested != 0; }
void lt_interrupt_clear(void) { requested = 0; }
