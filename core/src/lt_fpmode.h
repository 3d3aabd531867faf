/*
 * lt_fpmode.h — lutra's floating-point mode (flush denormals: FTZ/DAZ on x86) on the calling thread.
 *
 * Its own file because both the BLAS loader and the thread pool need it and neither should need the other
 * for it: the pool gives every job lutra's mode, the optimizer step and backward set it around their work.
 */
#ifndef LT_FPMODE_H
#define LT_FPMODE_H

/* Sets FTZ/DAZ on the calling thread (x86 MXCSR) until changed again; returns the previous state. */
int lt_set_flush_denormal(int on);
/* The caller's floating-point mode is the caller's: lutra flushes denormals (FTZ/DAZ, when c->flush_denormal)
 * only while it computes. lt_fp_enter sets lutra's mode on the calling thread and returns the caller's, which
 * lt_fp_leave puts back (both cost a few cycles; nothing is written when the mode is already right). Used
 * around backward and the optimizer step, and the pool's threads have lutra's mode for every job: pure C
 * work only, never around code that calls the Lua API or Lua code (core/bind/l_loop.c's with_state says why). */
unsigned lt_fp_enter(int flush_denormal);
void lt_fp_leave(unsigned saved);

#endif
