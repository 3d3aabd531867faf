/* gemm_bf16_mode.c — each thread's GEMM precision (lt_gemm_bf16.h: lt_gemm_bf16_mode), apart from the GEMM so that
 * the pool (which carries it to its workers) and the GEMM (which runs on the pool) both read it without calling
 * each other. */
#include "lt_gemm_bf16.h"

static __thread int thread_mode;

int lt_gemm_bf16_mode(void) { return thread_mode; }
void lt_gemm_bf16_set_mode(int mode) { thread_mode = mode; }
