/* lt_interrupt.h — the process-wide "stop at the next batch boundary" request (Ctrl-C, host request).
 * Signals are process-wide, so this one flag is too; it is async-signal-safe to set. */
#ifndef LT_INTERRUPT_H
#define LT_INTERRUPT_H

void lt_interrupt_request(void);
int lt_interrupt_pending(void);
void lt_interrupt_clear(void);

#endif
