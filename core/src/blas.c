/* blas.c — CPU feature detection, the OpenBLAS kernel-family choice, dlopen, and a fallback GEMM. */
#include "lt_blas.h"
#include "lt_cpus.h"
#include "lt_errors.h"
#include "lt_gemm_bf16.h"
#include "lt_gemm_small_m.h"
#include "lt_pool.h"
#include "lt_simd.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LT_X86 1
#endif

enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);

/* Process-wide by nature: the BLAS library is loaded once per process. */
static struct {
  pthread_once_t once;
  lt_blas_info info;
  sgemm_fn sgemm;
  sgemv_fn sgemv; /* NULL without a BLAS: GEMM serves every product */
  int openblas;   /* the library is OpenBLAS (its per-thread buffers: lt_blas_ready) */
  int serial;     /* > 0: a job's parts call GEMMs each on its own thread (lt_blas_serial_begin) */
  int ws_threads; /* lt_blas_ready found room for this many OpenBLAS buffers (0: not yet) */
} B = { PTHREAD_ONCE_INIT, { 0 }, NULL, NULL, 0, 0, 0 };

typedef struct cpu_feats {
  int avx, avx2, fma, avx512f, avx512bw, avx512dq, avx512vl, avx512cd;
} cpu_feats;

static cpu_feats detect(void) {
  cpu_feats f = { 0 };
#ifdef LT_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = ((unsigned long long)hi << 32) | lo;
  }
  int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6;
  f.avx = avx && os_avx;
  f.fma = fma && f.avx;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ((b >> 5) & 1) && f.avx;
    f.avx512f = ((b >> 16) & 1) && os_avx512;
    f.avx512dq = ((b >> 17) & 1) && os_avx512;
    f.avx512cd = ((b >> 28) & 1) && os_avx512;
    f.avx512bw = ((b >> 30) & 1) && os_avx512;
    f.avx512vl = ((b >> 31) & 1) && os_avx512;
  }
#endif
  return f;
}

static const char *choose_family(cpu_feats f) {
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512cd) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  if (f.avx) return "Sandybridge";
  return NULL;
}

/* The plain C GEMM used when no BLAS library loads, written once for float32 and float64. */
#define NAIVE_GEMM(NAME, T)                                                                                           \
  static void NAME(int order, int ta, int tb, int m, int n, int k, T alpha, const T *a, int lda, const T *b, int ldb, \
                   T beta, T *c, int ldc) {                                                                           \
    (void)order;                                                                                                      \
    for (int i = 0; i < m; i++)                                                                                       \
      for (int j = 0; j < n; j++) {                                                                                   \
        T s = 0;                                                                                                      \
        for (int p = 0; p < k; p++) {                                                                                 \
          T x = ta == CblasTrans ? a[p * lda + i] : a[i * lda + p];                                                   \
          T y = tb == CblasTrans ? b[j * ldb + p] : b[p * ldb + j];                                                   \
          s += x * y;                                                                                                 \
        }                                                                                                             \
        c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);                                         \
      }                                                                                                               \
  }
NAIVE_GEMM(naive_sgemm, float)
NAIVE_GEMM(naive_dgemm, double)

int lt_blas_cpu_count(void) { return lt_cpus_available(NULL); }

static void init_once(void) {
  lt_blas_info *I = &B.info;
  cpu_feats f = detect();
  snprintf(I->cpu_features, sizeof I->cpu_features, "%s%s%s%s%s%s%s%s", f.avx ? "avx " : "", f.avx2 ? "avx2 " : "",
           f.fma ? "fma " : "", f.avx512f ? "avx512f " : "", f.avx512cd ? "avx512cd " : "",
           f.avx512bw ? "avx512bw " : "", f.avx512dq ? "avx512dq " : "", f.avx512vl ? "avx512vl" : "");
  const char *user = getenv("OPENBLAS_CORETYPE");
  if (user && *user) {
    snprintf(I->coretype, sizeof I->coretype, "%s", user);
    I->reason = "user: OPENBLAS_CORETYPE was set in the environment";
  } else {
    const char *fam = choose_family(f);
    if (fam) {
      setenv("OPENBLAS_CORETYPE", fam, 0);
      snprintf(I->coretype, sizeof I->coretype, "%s", fam);
      I->reason = "cpu features: the best OpenBLAS kernel family this CPU and OS support "
                  "(Debian's OpenBLAS 0.3.21 misdetects AVX-512 Xeons as Prescott)";
    } else {
      I->reason = "cpu features: no AVX; OpenBLAS chooses by itself";
    }
  }
  /* One owner of the threads: OpenBLAS runs every GEMM on the thread that calls it, and lutra splits the large
   * ones over its own pool (split_sgemm below). OpenBLAS's threads, when it has any, wait for work by calling
   * sched_yield for up to 2^28 cycles (OPENBLAS_THREAD_TIMEOUT) after each GEMM: beside lutra's pool, and
   * beside any other process, they took the cores the work needed (21,109 sched_yield calls in 200 MLP steps;
   * 18,000+ with the shortest timeout). With one thread it starts none. */
  if (!getenv("OPENBLAS_NUM_THREADS")) setenv("OPENBLAS_NUM_THREADS", "1", 0);
  static const char *const libs[] = { "libopenblas.so.0", "libopenblas.so", "libblas.so.3" };
  for (size_t i = 0; i < sizeof libs / sizeof *libs && !B.sgemm; i++) {
    sigset_t old; /* OpenBLAS starts its threads as it loads */
    lt_spawn_mask(&old);
    void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    lt_spawn_unmask(&old);
    if (!h) continue;
    B.sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    if (!B.sgemm) {
      dlclose(h);
      continue;
    }
    I->library = libs[i];
    B.sgemv = (sgemv_fn)dlsym(h, "cblas_sgemv");
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (set_threads) set_threads(1); /* (OPENBLAS_NUM_THREADS was the user's) */
    B.openblas = set_threads != NULL;
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))dlsym(h, "openblas_get_config");
    if (corename) snprintf(I->corename, sizeof I->corename, "%s", corename());
    if (config) snprintf(I->config, sizeof I->config, "%s", config());
  }
  if (!B.sgemm) {
    B.sgemm = naive_sgemm;
    I->library = "builtin";
    I->reason = "no BLAS library found (install libopenblas0): using lutra's plain C GEMM, which is slow";
  }
  I->threads = lt_cpus_available(&I->threads_reason);
  lt_pool_set_threads(0); /* every CPU available, following changes to the mask or quota (lt_pool.h) */
}

void lt_blas_init(void) { pthread_once(&B.once, init_once); }

/* OpenBLAS 0.3.21's BUFFER_SIZE on x86-64 (common_x86_64.h: 32 << 22), what blas_memory_alloc maps per thread
 * (mmap of BUFFER_SIZE, or malloc of BUFFER_SIZE + FIXED_PAGESIZE when the map fails; measured with strace) */
#define OPENBLAS_BUFFER ((size_t)128 << 20)
#define OPENBLAS_PAGE ((size_t)4096)

int lt_blas_ready(lt_ctx *c) {
  int want = B.info.threads > 0 ? B.info.threads : 1;
  if (__atomic_load_n(&B.ws_threads, __ATOMIC_ACQUIRE) >= want) return LT_OK;
  lt_blas_init();
  want = B.info.threads > 0 ? B.info.threads : 1;
  if (!B.openblas) { /* not OpenBLAS (lutra's own GEMM, or another BLAS): no such buffers */
    __atomic_store_n(&B.ws_threads, 1 << 30, __ATOMIC_RELEASE);
    return LT_OK;
  }
  /* the same kind of map OpenBLAS makes, held all at once (its threads' buffers live together), never touched */
  void *maps[256];
  int n = want < 256 ? want : 256, got = 0, err = 0;
  for (; got < n; got++) {
    maps[got] = mmap(NULL, OPENBLAS_BUFFER + OPENBLAS_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (maps[got] == MAP_FAILED) {
      err = errno;
      break;
    }
  }
  for (int i = 0; i < got; i++) munmap(maps[i], OPENBLAS_BUFFER + OPENBLAS_PAGE);
  if (got < n)
    return lt_fail(c,
                   "out of memory: GEMM workspace: OpenBLAS needs %d buffer%s of %zu MiB (one per thread) and the "
                   "process could map %d (%s; a `ulimit -v`?): raise the limit, or use fewer threads "
                   "(lt.set_num_threads(1) needs one buffer)",
                   n, n == 1 ? "" : "s", (OPENBLAS_BUFFER + OPENBLAS_PAGE) >> 20, got, strerror(err));
  __atomic_store_n(&B.ws_threads, want, __ATOMIC_RELEASE);
  return LT_OK;
}

const lt_blas_info *lt_blas_get_info(void) {
  lt_blas_init();
  return &B.info;
}

void lt_blas_set_threads(int n) {
  lt_blas_init();
  if (n < 1) n = 1;
  B.info.threads = n;
  lt_pool_set_threads(n); /* OpenBLAS stays at one thread: the pool runs the split GEMMs */
}

/* When a GEMM is split over the pool. OpenBLAS 0.3.21, threaded, cut C among its threads and each thread
 * packed its own copy of the shared operand: when C is thin (a conv layer's 6 or 16 output channels, a
 * 120-wide layer) two threads ran slower than one (measured on LeNet's shapes: every conv GEMM 1.3-2.5x slower
 * on 2 threads), and the pool's split has the same cost. So GEMMs are split only where that pays: every size
 * >= 32 and >= 6M multiply-adds (the MLP's 64x512x784 runs ~2x faster on 2 threads). */
#define GEMM_THREADS_MIN_DIM 32
#define GEMM_THREADS_MIN_MACS 6e6
/* A thin C over a long k (a conv's weight gradient: [6 x 25] summed over 50,176 positions) runs ~6x faster
 * cut into k-chunks accumulated with beta = 1. */
#define GEMM_THIN_MN 4096
#define GEMM_KCHUNK 8192
/* The pool's parts of a GEMM start at multiples of this many rows or columns: whole 64-byte lines of C, and
 * whole register blocks of OpenBLAS's kernels (16 wide). */
#define GEMM_SPLIT_ALIGN 16

int lt_blas_threads_pay(int64_t m, int64_t n, int64_t k) {
  return m >= GEMM_THREADS_MIN_DIM && n >= GEMM_THREADS_MIN_DIM && k >= GEMM_THREADS_MIN_DIM &&
         (double)m * (double)n * (double)k >= GEMM_THREADS_MIN_MACS;
}

void lt_blas_serial_begin(void) {
  lt_blas_init();
  __atomic_add_fetch(&B.serial, 1, __ATOMIC_RELEASE);
}

void lt_blas_serial_end(void) { __atomic_sub_fetch(&B.serial, 1, __ATOMIC_RELEASE); }

/* One GEMM as the pool's parts: C's columns (or rows, when C is taller than wide) in GEMM_SPLIT_ALIGN-aligned
 * ranges, each part a GEMM on the thread that claims it. A worker that is late (its core taken by another
 * process) leaves its part to the caller instead of holding it up. */
typedef struct gemm_job {
  int transa, transb, m, n, k, lda, ldb, ldc, by_rows;
  float alpha, beta;
  const float *a, *b;
  float *c;
} gemm_job;

static void gemm_part(void *arg, int i, int nparts) {
  const gemm_job *j = arg;
  int64_t lo, hi;
  if (j->by_rows) {
    lt_pool_range(j->m, i, nparts, GEMM_SPLIT_ALIGN, &lo, &hi);
    if (lo >= hi) return;
    const float *a = j->transa ? j->a + lo : j->a + lo * j->lda;
    B.sgemm(CblasRowMajor, j->transa ? CblasTrans : CblasNoTrans, j->transb ? CblasTrans : CblasNoTrans, (int)(hi - lo),
            j->n, j->k, j->alpha, a, j->lda, j->b, j->ldb, j->beta, j->c + lo * j->ldc, j->ldc);
  } else {
    lt_pool_range(j->n, i, nparts, GEMM_SPLIT_ALIGN, &lo, &hi);
    if (lo >= hi) return;
    const float *b = j->transb ? j->b + lo * j->ldb : j->b + lo;
    B.sgemm(CblasRowMajor, j->transa ? CblasTrans : CblasNoTrans, j->transb ? CblasTrans : CblasNoTrans, j->m,
            (int)(hi - lo), j->k, j->alpha, j->a, j->lda, b, j->ldb, j->beta, j->c + lo, j->ldc);
  }
}

/* B's size (floats) up to which the tile reads it again per block of C's rows: 8 MB, a quarter of this machine's L3 */
#define TILE_B_MAX_FLOATS (2.0 * 1024 * 1024)

/* Where lutra's AVX-512 tile (core/src/gemm_small_m.c) runs a GEMM instead of OpenBLAS: B used as stored (its rows
 * along C's columns, read in place: OpenBLAS packs it on every call) and A as stored or transposed, C = A B or
 * C += A B. Measured on an AMD EPYC Zen 4 against OpenBLAS 0.3.21's SkylakeX kernels (GEMM alone, warm): per core
 * 5-15% faster from m = 16, n = 128, k = 32 (an MLP's weight and input gradients, GPT's, a conv's im2col product);
 * on 2 threads 10-35% (C's column panels split evenly, nothing packed); slower below those sizes (OpenBLAS's small
 * kernels), for a transposed A over k > 512 (A's strided columns: 3-8% slower at k = 1024), and when B is larger
 * than the caches and C has more than one block of rows (the tile reads B again for each block of 128 rows:
 * 256x4096x1024, a 16 MB B, 4-5% slower). */
static int tile_pays(int transa, int m, int n, int k) {
  return m >= 16 && n >= 128 && k >= 32 && (!transa || k <= 512) && (m <= 128 || (double)k * n <= TILE_B_MAX_FLOATS);
}

/* C = A B^T with B stored [n x k] (a Linear layer's forward, x W^T) runs on the tile as C^T = B A^T when A (the
 * batch) is the smaller thing to pack: m (k + n) < n k floats packed and transposed back, against OpenBLAS packing
 * all of B (room 1). Zen 4, 2 threads: MLP 784-512 at batch 64 280 -> ~240 us, batch 256 ~1000 -> ~930 us. */
static int tile_pays_nt(int m, int n, int k, double room) {
  return m >= 32 && n >= 64 && k >= 64 && (double)m * (k + n) < room * n * k;
}
/* A Linear layer's forward with a bias takes the tile up to twice that packing (room 2): there the bias (and a ReLU)
 * cost nothing more, applied as C^T is transposed into C, while beside OpenBLAS the bias is a pass over C before the
 * product (and the ReLU one after), on one thread. Zen 4, 2 threads, x [m x k] W [n x k], bias and ReLU (m x k x n):
 * 384 x 512 x 512 1.24 -> 1.14 ms, 512 x 512 x 512 1.56 -> 1.42 ms, 256 x 512 x 256 ~5% less; past twice (768 x 512
 * x 512, 1024 x 384 x 1152) no gain or 3% more. Only with a bias: a bias-free forward is a plain product
 * (lt_blas_sgemm), and its fused ReLU must have the bits of that product's ReLU. */
#define TILE_LINEAR_BIAS_ROOM 2.0

/* The GEMM on the tile when it pays (1), else 0 for OpenBLAS: the tile sums C = op(A) op(B) or C += it (alpha 1,
 * beta 0 or 1) on AVX-512 CPUs, B as stored (tile_pays) or, with A as stored, transposed (tile_pays_nt). */
static int tile_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc, int threads) {
  if (alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || !lt_gemm_small_m_ok()) return 0;
  const int add = beta == 1.0f;
  if (!transb)
    return tile_pays(transa, m, n, k) && lt_gemm_small_m_gemm(transa, m, n, k, a, lda, b, ldb, c, ldc, add, threads);
  if (!transa)
    return tile_pays_nt(m, n, k, 1.0) &&
           lt_gemm_small_m_gemm_nt(m, n, k, a, lda, b, ldb, c, ldc, add, NULL, 0, threads);
  return 0;
}

/* The threads a GEMM of this size runs on: the pool's, when splitting it pays and no caller asked for serial GEMMs. */
static int gemm_threads(int m, int n, int k) {
  int nt = lt_pool_threads();
  return nt > 1 && lt_blas_threads_pay(m, n, k) && __atomic_load_n(&B.serial, __ATOMIC_ACQUIRE) == 0 ? nt : 1;
}

static void sgemm_call(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc) {
  int nt = gemm_threads(m, n, k), split = nt > 1;
  if (tile_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nt)) return;
  if (split) {
    gemm_job j = { transa, transb, m, n, k, lda, ldb, ldc, m > n, alpha, beta, a, b, c };
    int64_t span = m > n ? m : n, parts = (span + GEMM_SPLIT_ALIGN - 1) / GEMM_SPLIT_ALIGN;
    lt_pool_run(gemm_part, &j, parts < nt ? (int)parts : nt);
    return;
  }
  B.sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
          b, ldb, beta, c, ldc);
}

/* C [1 x n] or [m x 1] (a batch-1 layer): a matrix-vector product. OpenBLAS's GEMM sends these to its
 * small-matrix kernel (~7 GB/s over a 784x512 weight); sgemv streams the matrix, and above GEMV_SPLIT_MACS
 * the pool's threads each stream a range of the output (memory-bound: two cores read about twice the bytes
 * of one). beta = 0 must not read C (which may hold NaN): it is zeroed first. */
#define GEMV_SPLIT_MACS 262144.0
static void gemv(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc) {
  if (m == 1) { /* c = op(B)^T a: a has stride lda when transposed */
    if (beta == 0.0f) memset(c, 0, sizeof(float) * (size_t)n);
    if (transb) B.sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, transa ? lda : 1, beta, c, 1);
    else B.sgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, transa ? lda : 1, beta, c, 1);
  } else { /* n == 1: c (stride ldc) = op(A) b: b has stride ldb unless transposed */
    if (beta == 0.0f)
      for (int i = 0; i < m; i++) c[(size_t)i * ldc] = 0.0f;
    if (transa) B.sgemv(CblasRowMajor, CblasTrans, k, m, alpha, a, lda, b, transb ? 1 : ldb, beta, c, ldc);
    else B.sgemv(CblasRowMajor, CblasNoTrans, m, k, alpha, a, lda, b, transb ? 1 : ldb, beta, c, ldc);
  }
}

/* A part of a split gemv: a range of C's n outputs (m == 1) or m outputs (n == 1). */
static void gemv_part(void *arg, int i, int nparts) {
  const gemm_job *j = arg;
  int64_t lo, hi;
  if (j->by_rows) {
    lt_pool_range(j->m, i, nparts, GEMM_SPLIT_ALIGN, &lo, &hi);
    if (lo < hi)
      gemv(j->transa, j->transb, (int)(hi - lo), 1, j->k, j->alpha, j->transa ? j->a + lo : j->a + lo * j->lda, j->lda,
           j->b, j->ldb, j->beta, j->c + lo * j->ldc, j->ldc);
  } else {
    lt_pool_range(j->n, i, nparts, GEMM_SPLIT_ALIGN, &lo, &hi);
    if (lo < hi)
      gemv(j->transa, j->transb, 1, (int)(hi - lo), j->k, j->alpha, j->a, j->lda,
           j->transb ? j->b + lo * j->ldb : j->b + lo, j->ldb, j->beta, j->c + lo, j->ldc);
  }
}

static void gemv_call(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc) {
  int nt = lt_pool_threads(), span = m == 1 ? n : m;
  if (nt > 1 && span >= 2 * GEMM_SPLIT_ALIGN && (double)m * n * k >= GEMV_SPLIT_MACS &&
      __atomic_load_n(&B.serial, __ATOMIC_ACQUIRE) == 0) {
    gemm_job j = { transa, transb, m, n, k, lda, ldb, ldc, m != 1, alpha, beta, a, b, c };
    int parts = (span + GEMM_SPLIT_ALIGN - 1) / GEMM_SPLIT_ALIGN;
    lt_pool_run(gemv_part, &j, parts < nt ? parts : nt);
    return;
  }
  gemv(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* k = 1 (a batch-1 weight gradient) with beta = 0: C = alpha a b^T, written in one pass (GEMM would zero C
 * first). Same products as the GEMM, so the same bits. */
/* c = alpha a b^T (add = 0) or c += alpha a b^T (add = 1: a gradient accumulated in place) */
LT_VECTOR_FN static void outer(int m, int n, float alpha, const float *a, int sa, const float *b, int sb, float *c,
                               int ldc, int add) {
  for (int i = 0; i < m; i++) {
    const float ai = alpha * a[(size_t)i * sa];
    float *restrict ci = c + (size_t)i * ldc;
    if (sb == 1 && add)
      for (int j = 0; j < n; j++) ci[j] += ai * b[j];
    else if (sb == 1)
      for (int j = 0; j < n; j++) ci[j] = ai * b[j];
    else if (add)
      for (int j = 0; j < n; j++) ci[j] += ai * b[(size_t)j * sb];
    else
      for (int j = 0; j < n; j++) ci[j] = ai * b[(size_t)j * sb];
  }
}

/* autocast's bf16 path takes this product (lt_gemm_bf16.h) */
static int bf16_takes(int m, int n, int k) {
  return lt_gemm_bf16_mode() == LT_AUTOCAST_BF16 && lt_gemm_bf16_wants(m, n, k) && lt_gemm_bf16_active();
}

/* a thin C over a long k, run in k-chunks accumulated with beta = 1 */
static int thin_long_k(int m, int n, int k) { return (long)m * n <= GEMM_THIN_MN && k > 2 * GEMM_KCHUNK; }

void lt_blas_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                   int ldb, float beta, float *c, int ldc) {
  lt_blas_init();
  if (B.sgemv && (m == 1 || n == 1) && (double)m * n * k >= 16384) {
    gemv_call(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (k == 1 && (beta == 0.0f || beta == 1.0f) && (double)m * n >= 16384) {
    /* a [m x 1]: element i at a[i * lda] (a[i] when transposed); b [1 x n]: b[j] (b[j * ldb] when transposed) */
    outer(m, n, alpha, a, transa ? 1 : lda, b, transb ? ldb : 1, c, ldc, beta == 1.0f);
    return;
  }
  /* inside autocast's ops (lt_gemm_bf16.h): bf16 operands, fp32 sums */
  if (bf16_takes(m, n, k)) {
    int serial = __atomic_load_n(&B.serial, __ATOMIC_ACQUIRE) > 0;
    if (lt_gemm_bf16(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                     !serial && lt_blas_threads_pay(m, n, k) ? B.info.threads : 1) == LT_OK)
      return; /* else no memory for its buffers: fp32 below */
  }
  if (thin_long_k(m, n, k)) {
    for (int p0 = 0; p0 < k; p0 += GEMM_KCHUNK) {
      int kc = k - p0 < GEMM_KCHUNK ? k - p0 : GEMM_KCHUNK;
      const float *ap = transa ? a + (size_t)p0 * lda : a + p0;
      const float *bp = transb ? b + p0 : b + (size_t)p0 * ldb;
      sgemm_call(transa, transb, m, n, kc, alpha, ap, lda, bp, ldb, p0 ? 1.0f : beta, c, ldc);
    }
    return;
  }
  sgemm_call(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int lt_blas_linear_tile(int m, int n, int k, const float *x, int ldx, const float *w, int ldw, const float *bias,
                        int relu, float *c, int ldc) {
  lt_blas_init();
  /* the cases lt_blas_sgemm sends elsewhere: products with a side of 1 (gemv, outer), autocast's bf16, a thin C over
   * a long k (in chunks) */
  if (m <= 1 || n <= 1 || k <= 1 || thin_long_k(m, n, k) || bf16_takes(m, n, k)) return 0;
  if (!lt_gemm_small_m_ok() || !tile_pays_nt(m, n, k, bias ? TILE_LINEAR_BIAS_ROOM : 1.0)) return 0;
  return lt_gemm_small_m_gemm_nt(m, n, k, x, ldx, w, ldw, c, ldc, 0, bias, relu, gemm_threads(m, n, k));
}

/* ---- float64: cblas_dgemm from the library lt_blas_init loaded (a plain C loop without one) ---------------- */

typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);
static dgemm_fn dgemm_ptr;
static pthread_once_t dgemm_once = PTHREAD_ONCE_INIT;

static void dgemm_init(void) {
  lt_blas_init();
  /* the library is already loaded (RTLD_LOCAL): RTLD_NOLOAD hands back its handle */
  void *h = strcmp(B.info.library, "builtin") ? dlopen(B.info.library, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD) : NULL;
  dgemm_fn f = h ? (dgemm_fn)dlsym(h, "cblas_dgemm") : NULL;
  dgemm_ptr = f ? f : naive_dgemm;
}

void lt_blas_dgemm(int transa, int transb, int m, int n, int k, double alpha, const double *a, int lda, const double *b,
                   int ldb, double beta, double *c, int ldc) {
  pthread_once(&dgemm_once, dgemm_init);
  /* OpenBLAS runs on one thread (the pool owns the threads, see lt_blas_set_threads); float64 GEMMs are not
   * split over the pool: they serve precision (gradchecks, LBFGS on small models), not speed. */
  dgemm_ptr(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
            lda, b, ldb, beta, c, ldc);
}

int lt_gemm_f64(lt_ctx *c, int transa, int transb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                int64_t lda, const double *b, int64_t ldb, double beta, double *cc, int64_t ldc) {
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
    return lt_fail(c, LT_E_BLAS_SIZE);
  if (m == 0 || n == 0) return LT_OK;
  if (lt_blas_ready(c)) return LT_ERR;
  if (k == 0) { /* C = beta * C, with beta = 0 overwriting (the BLAS's rule: no NaN from old contents) */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) cc[i * ldc + j] = beta == 0 ? 0 : beta * cc[i * ldc + j];
    return LT_OK;
  }
  lt_blas_dgemm(transa, transb, (int)m, (int)n, (int)k, alpha, a, (int)(lda ? lda : 1), b, (int)(ldb ? ldb : 1), beta,
                cc, (int)(ldc ? ldc : 1));
  return LT_OK;
}
