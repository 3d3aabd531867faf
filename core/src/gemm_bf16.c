/* gemm_bf16.c — the bf16 GEMM's driver (lt_gemm_bf16.h): CPU detection, the autocast mode of each thread,
 * blocking, the split over the pool's threads. The AVX512-BF16 code is in gemm_bf16_kernel.c.
 *
 * Blocking (Goto's): for each block of NC columns and KC k, B's block is packed once (KC/2 x NC words, in L2);
 * for each block of MC rows A's block is packed (MC x KC/2 words, in L2); then 64-column panels of B
 * (KC/2 x 64 words = 32 KiB, in L1) meet every 6-row tile of A. The first k block applies beta, later ones
 * add (beta = 1). A job splits C into row ranges (or column ranges when C is wider than tall), each part
 * packing its own blocks, so the parts share nothing but the read-only operands. */
#include "lt_gemm_bf16.h"
#include "lt_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define KC 256  /* k per block: a 64-column panel of B is 128 x 64 words = 32 KiB, L1 */
#define MC 192  /* rows per block of A: 192 x 128 words = 96 KiB, L2 */
#define NC 1024 /* columns per block of B: 128 x 1024 words = 512 KiB, L2 */

static int detect(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6) != 0xe6) return 0; /* the OS saves the AVX-512 state */
  (void)hi;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
  if (!(f && dq && bw && vl) || a < 1) return 0; /* a: the highest subleaf of leaf 7 */
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
  return (a >> 5) & 1; /* AVX512_BF16 */
#else
  return 0;
#endif
}

static struct {
  pthread_once_t once;
  int supported;
  int forced; /* LUTRA_BF16_GEMM=0, or lt_gemm_bf16_force_fp32 */
  pthread_key_t bufs;
  int have_key;
} G = { PTHREAD_ONCE_INIT, 0, 0, 0, 0 };

static void free_bufs(void *p); /* a thread's packing buffers, when it ends */

static void init_once(void) {
  G.supported = detect();
  const char *e = getenv("LUTRA_BF16_GEMM");
  if (e && strcmp(e, "0") == 0) __atomic_store_n(&G.forced, 1, __ATOMIC_RELAXED);
  G.have_key = pthread_key_create(&G.bufs, free_bufs) == 0;
}

int lt_gemm_bf16_supported(void) {
  pthread_once(&G.once, init_once);
  return G.supported;
}

int lt_gemm_bf16_active(void) { return lt_gemm_bf16_supported() && !__atomic_load_n(&G.forced, __ATOMIC_RELAXED); }

void lt_gemm_bf16_force_fp32(int on) {
  pthread_once(&G.once, init_once);
  __atomic_store_n(&G.forced, on != 0, __ATOMIC_RELAXED);
}

/* Below these the packing costs more than the kernel saves; 1-row/1-column products are GEMV (blas.c). */
int lt_gemm_bf16_wants(int m, int n, int k) { return m >= 4 && n >= 16 && k >= 16 && (double)m * n * k >= 32768.0; }

/* The calling thread's packing buffers, one pair (A's block, then B's) per part of its jobs: made on its first
 * bf16 GEMM (grown when a job has more parts), freed when the thread ends. The parts of a job run on the pool's
 * threads but each uses its own pair, so a call needs nothing from the workers that could fail. */
#define A_WORDS ((size_t)MC * (KC / 2))
#define B_WORDS ((size_t)(KC / 2) * NC)
#define PART_WORDS (A_WORDS + B_WORDS)
typedef struct bufs {
  int parts;
  uint32_t *w; /* parts * PART_WORDS, 64-byte aligned */
} bufs;
static void free_bufs(void *p) {
  bufs *b = p;
  free(b->w);
  free(b);
}
static uint32_t *thread_bufs(int parts) {
  if (!G.have_key) return NULL;
  bufs *b = pthread_getspecific(G.bufs);
  if (b && b->parts >= parts) return b->w;
  uint32_t *w = aligned_alloc(64, (size_t)parts * PART_WORDS * sizeof(uint32_t));
  if (!w) return NULL;
  if (!b) {
    b = malloc(sizeof *b);
    if (!b || pthread_setspecific(G.bufs, b) != 0) {
      free(b);
      free(w);
      return NULL;
    }
  } else {
    free(b->w);
  }
  b->parts = parts;
  b->w = w;
  return w;
}

typedef struct job {
  int ta, tb, m, n, k;
  float alpha, beta;
  const float *a, *b;
  int lda, ldb, ldc;
  float *c;
  int by_rows;   /* parts are row ranges (else column ranges) */
  uint32_t *buf; /* PART_WORDS per part */
} job;

/* C[i0:i1, j0:j1] with the buffers of part `part` */
static void block(const job *J, int part, int i0, int i1, int j0, int j1) {
  uint32_t *ap = J->buf + (size_t)part * PART_WORDS, *bp = ap + A_WORDS;
  for (int jc = j0; jc < j1; jc += NC) {
    int nc = j1 - jc < NC ? j1 - jc : NC;
    for (int pc = 0; pc < J->k; pc += KC) {
      int kc = J->k - pc < KC ? J->k - pc : KC, kp = (kc + 1) / 2;
      lt_bf16_pack_b(J->tb, J->tb ? J->b + (size_t)jc * J->ldb + pc : J->b + (size_t)pc * J->ldb + jc, J->ldb, kc, nc,
                     bp);
      float beta = pc == 0 ? J->beta : 1.0f;
      for (int ic = i0; ic < i1; ic += MC) {
        int mc = i1 - ic < MC ? i1 - ic : MC;
        lt_bf16_pack_a(J->ta, J->ta ? J->a + (size_t)pc * J->lda + ic : J->a + (size_t)ic * J->lda + pc, J->lda, mc, kc,
                       ap);
        for (int jr = 0; jr < nc; jr += LT_BF16_NR) {
          const uint32_t *panel = bp + (size_t)(jr / LT_BF16_NR) * kp * LT_BF16_NR;
          int nr = nc - jr < LT_BF16_NR ? nc - jr : LT_BF16_NR;
          for (int ir = 0; ir < mc; ir += LT_BF16_MR)
            lt_bf16_tile(kp, ap + (size_t)ir * kp, mc - ir < LT_BF16_MR ? mc - ir : LT_BF16_MR, panel, nr, J->alpha,
                         beta, J->c + (size_t)(ic + ir) * J->ldc + jc + jr, J->ldc);
        }
      }
    }
  }
}

static void part(void *arg, int i, int n) {
  const job *J = arg;
  int64_t lo, hi;
  if (J->by_rows) {
    lt_pool_range(J->m, i, n, 4 * LT_BF16_MR, &lo, &hi);
    if (lo < hi) block(J, i, (int)lo, (int)hi, 0, J->n);
  } else {
    lt_pool_range(J->n, i, n, LT_BF16_NR, &lo, &hi);
    if (lo < hi) block(J, i, 0, J->m, (int)lo, (int)hi);
  }
}

int lt_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc, int threads) {
  int parts = threads > 1 ? threads : 1;
  job J = { transa, transb, m, n, k, alpha, beta, a, b, lda, ldb, ldc, c, m >= n, thread_bufs(parts) };
  if (!J.buf) return LT_ERR;
  if (parts > 1) lt_pool_run(part, &J, parts);
  else block(&J, 0, 0, m, 0, n);
  return LT_OK;
}
