/* fpmode.c — lutra's floating-point mode on the calling thread (see lt_fpmode.h). */
#include "lt_fpmode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define LT_X86 1
#endif

#define LT_FTZ_DAZ 0x8040u /* MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6) */

unsigned lt_fp_enter(int flush_denormal) {
#ifdef LT_X86
  unsigned csr = _mm_getcsr();
  if (flush_denormal && (csr & LT_FTZ_DAZ) != LT_FTZ_DAZ) _mm_setcsr(csr | LT_FTZ_DAZ);
  return csr;
#else
  (void)flush_denormal;
  return 0;
#endif
}

void lt_fp_leave(unsigned saved) {
#ifdef LT_X86
  if (_mm_getcsr() != saved) _mm_setcsr(saved);
#else
  (void)saved;
#endif
}

int lt_set_flush_denormal(int on) {
#ifdef LT_X86
  unsigned csr = _mm_getcsr();
  int was = (csr & LT_FTZ_DAZ) == LT_FTZ_DAZ;
  _mm_setcsr(on ? (csr | LT_FTZ_DAZ) : (csr & ~LT_FTZ_DAZ));
  return was;
#else
  (void)on;
  return 0;
#endif
}
