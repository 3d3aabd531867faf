-- bench/rnn_gemm.lua — one timestep's recurrent products of the word-level LSTM (batch 32, hidden 256), CPU time
-- per call: forward [32 x 256] x W_hh^T [256 x 1024] (beta 1) and backward [32 x 1024] x W_hh [1024 x 256],
-- through lt_blas_sgemm (OpenBLAS packs W_hh at every call) and through lutra's small-M GEMM over W_hh packed
-- once (core/src/gemm_small_m.c; backward also read in place). Medians of 7 timings, 3 rounds, one line each.
--   ./lutra bench/rnn_gemm.lua [threads]        (default 1)
local lt = require "lutra"
local ffi = require "ffi"
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } lt_rg_ts; int clock_gettime(int, lt_rg_ts *);
void lt_blas_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc);
int lt_gemm_small_m_ok(void);
int64_t lt_gemm_small_m_nr(void);
int64_t lt_gemm_small_m_packed_size(int64_t n, int64_t k);
void lt_gemm_small_m_pack_t(const float *w, int64_t n, int64_t k, float *packed);
void lt_gemm_small_m_pack_n(const float *b, int64_t k, int64_t n, float *packed);
void lt_gemm_small_m(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                     int64_t panel_stride, float *c, int64_t ldc, int accumulate, int threads);
]]
local C = ffi.C
assert(C.lt_gemm_small_m_ok() == 1, "this CPU has no AVX-512: the small-M GEMM is not used here")
local threads = tonumber(arg and arg[1] or "1")
lt.set_num_threads(threads)
local ts = ffi.new("lt_rg_ts")
local function now() C.clock_gettime(2, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local function ptr(t) return ffi.cast("float *", t:data_ptr()) end

local M, N, K = 32, 1024, 256
-- the panel width: a packed weight's ldb (NR * k its panel stride), a weight read in place's panel stride
local NR = tonumber(C.lt_gemm_small_m_nr())
local a, w, g = lt.randn(M, K), lt.randn(N, K), lt.randn(M, N)
local c1, c2, d1, d2, d3 = lt.zeros(M, N), lt.zeros(M, N), lt.zeros(M, K), lt.zeros(M, K), lt.zeros(M, K)
local wt = lt.empty(tonumber(C.lt_gemm_small_m_packed_size(N, K)))
local wn = lt.empty(tonumber(C.lt_gemm_small_m_packed_size(K, N)))
local pa, pw, pg, pwt, pwn = ptr(a), ptr(w), ptr(g), ptr(wt), ptr(wn)
C.lt_gemm_small_m_pack_t(pw, N, K, pwt)
C.lt_gemm_small_m_pack_n(pw, N, K, pwn)

local function time(f, n)
  for _ = 1, 20 do f() end
  local t = {}
  for r = 1, 7 do
    local t0 = now()
    for _ = 1, n do f() end
    t[r] = (now() - t0) / n * 1e6
  end
  table.sort(t)
  return t[4]
end
local gf = 2 * M * N * K / 1e3
for _ = 1, 3 do
  local fb = time(function() C.lt_blas_sgemm(0, 1, M, N, K, 1, pa, K, pw, K, 1, ptr(c1), N) end, 200)
  local fs = time(function() C.lt_gemm_small_m(M, N, K, pa, K, pwt, NR, NR * K, ptr(c2), N, 1, threads) end, 200)
  local bb = time(function() C.lt_blas_sgemm(0, 0, M, K, N, 1, pg, N, pw, K, 0, ptr(d1), K) end, 200)
  local bi = time(function() C.lt_gemm_small_m(M, K, N, pg, N, pw, K, NR, ptr(d2), K, 0, threads) end, 200)
  local bp = time(function() C.lt_gemm_small_m(M, K, N, pg, N, pwn, NR, NR * N, ptr(d3), K, 0, threads) end, 200)
  print(("forward: OpenBLAS %.1f us (%.0f GFLOP/s), packed once %.1f us (%.0f GFLOP/s): %.2fx | backward: OpenBLAS " ..
    "%.1f us, in place %.1f us, packed once %.1f us (%.0f GFLOP/s): %.2fx"):format(fb, gf / fb, fs, gf / fs, fb / fs,
    bb, bi, bp, gf / bp, bb / bp))
end
