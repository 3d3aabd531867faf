/*
 * ops_stream.c — the rows of large float32 results of add, sub, mul and div, written with non-temporal stores.
 *
 * A plain store to a line that is not in the cache first reads the line from memory, then overwrites it: a
 * result written into a cold buffer costs a read more than it needs. lutra's results often land in cold
 * buffers: a dead tensor's buffer comes back to the allocator only when the garbage collector has swept it,
 * several results later (core/bind/l_util.c's pacing), so a loop of `b + bias` over 4 MB tensors cycles through
 * four buffers and finds none in the cache. Streaming stores (MOVNTPS) skip that read. Measured on an AMD EPYC
 * Zen 4 with a 4 MB result: plain stores 245 us into four rotating buffers, streamed 100-105 us whatever the
 * rotation; into a buffer just written (in the cache) plain stores take 110 us and streamed ones 95 us, but
 * the next op that reads the result then finds it in memory instead of the cache (~15% more for the pair), so
 * only results much larger than a core's L2 cache are streamed (ops_binary.c decides).
 *
 * The stores have to be full vectors from the computation itself: computing a chunk into a buffer on the stack
 * and streaming that out ran at 200-240 us. Hence one loop per instruction set (AVX-512, AVX2, SSE2, which
 * every x86-64 has), chosen once at run time; the arithmetic is GCC's vector extensions, so every element is
 * the same IEEE operation as in the plain kernels and results are bitwise the same. Elsewhere than x86-64 there
 * is no streamed path (lt_stream_binary_row returns 0).
 */
#include <stdint.h>
#include <string.h>

#include "ops_stream.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static inline float scalar_op(lt_binop op, float x, float y) {
  switch (op) {
    case LT_ADD: return x + y;
    case LT_SUB: return x - y;
    case LT_MUL: return x * y;
    default: return x / y;
  }
}

/* One op's vector loop over o[i] = x[i sx] OPER y[i sy] for sx, sy in {0, 1} (not both 0); i from *pi while a
 * whole vector fits. VT is the vector type, STREAM its non-temporal store. */
// clang-format off
#define STREAM_LOOP(VT, STREAM, OPER)                                                                  \
  if (sx && sy) {                                                                                    \
    for (; i + W <= n; i += W) { VT a, b; memcpy(&a, x + i, sizeof a); memcpy(&b, y + i, sizeof b); \
                                 STREAM(o + i, a OPER b); }                                          \
  } else if (sx) {                                                                                   \
    const float b = y[0];                                                                            \
    for (; i + W <= n; i += W) { VT a; memcpy(&a, x + i, sizeof a); STREAM(o + i, a OPER b); }       \
  } else {                                                                                           \
    const float a = x[0];                                                                            \
    for (; i + W <= n; i += W) { VT b; memcpy(&b, y + i, sizeof b); STREAM(o + i, a OPER b); }       \
  }

#define STREAM_ROW_FN(NAME, TARGET, VT, WIDTH, STREAM)                                                 \
  __attribute__((target(TARGET))) static void NAME(lt_binop op, float *o, const float *x, int64_t sx,  \
                                                   const float *y, int64_t sy, int64_t n) {            \
    enum { W = WIDTH };                                                                              \
    int64_t i = 0;                                                                                   \
    for (; i < n && ((uintptr_t)(o + i) & (sizeof(VT) - 1)); i++) o[i] = scalar_op(op, x[i * sx], y[i * sy]); \
    switch (op) {                                                                                    \
      case LT_ADD: STREAM_LOOP(VT, STREAM, +) break;                                                 \
      case LT_SUB: STREAM_LOOP(VT, STREAM, -) break;                                                 \
      case LT_MUL: STREAM_LOOP(VT, STREAM, *) break;                                                 \
      default: STREAM_LOOP(VT, STREAM, /) break;                                                     \
    }                                                                                                \
    for (; i < n; i++) o[i] = scalar_op(op, x[i * sx], y[i * sy]);                                  \
  }
// clang-format on

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

#define STREAM_SSE(p, v) _mm_stream_ps((p), (__m128)(v))
#define STREAM_AVX(p, v) _mm256_stream_ps((p), (__m256)(v))
#define STREAM_AVX512(p, v) _mm512_stream_ps((p), (__m512)(v))

STREAM_ROW_FN(row_sse2, "sse2", v4f, 4, STREAM_SSE)
STREAM_ROW_FN(row_avx2, "avx2", v8f, 8, STREAM_AVX)
STREAM_ROW_FN(row_avx512, "avx512f", v16f, 16, STREAM_AVX512)

typedef void (*row_fn)(lt_binop, float *, const float *, int64_t, const float *, int64_t, int64_t);

static row_fn pick_row(void) {
  static row_fn chosen;
  row_fn f = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (!f) {
    __builtin_cpu_init();
    f = __builtin_cpu_supports("avx512f") ? row_avx512 : __builtin_cpu_supports("avx2") ? row_avx2 : row_sse2;
    __atomic_store_n(&chosen, f, __ATOMIC_RELEASE);
  }
  return f;
}

int lt_stream_binary_row(lt_binop op, float *o, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n) {
  if (op > LT_DIV || (sx != 0 && sx != 1) || (sy != 0 && sy != 1) || (sx == 0 && sy == 0)) return 0;
  pick_row()(op, o, x, sx, y, sy, n);
  return 1;
}

void lt_stream_fence(void) { _mm_sfence(); }

#else

int lt_stream_binary_row(lt_binop op, float *o, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n) {
  (void)op, (void)o, (void)x, (void)sx, (void)y, (void)sy, (void)n;
  return 0;
}

void lt_stream_fence(void) {}

#endif
