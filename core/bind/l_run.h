/*
 * l_run.h — the process-wide count of runs of the C loops in progress, behind lutra_run_active() (lutra.h).
 * Its own file so that the loops binding (l_loop.c) counts its runs without depending on l_module.c, which
 * registers the loops binding: the arrow runs l_module.c -> l_loop.c -> l_run.c.
 */
#ifndef L_RUN_H
#define L_RUN_H

/* Called by the loops binding around every run of the C loops (nested, or in several states at once). */
void l_run_enter(void);
void l_run_leave(void);

#endif
