# bench/sgemm_peak.py — the per-core peak as OpenBLAS reaches it: cblas_sgemm alone on one thread, square
# float32 sizes, GFLOP/s from the process CPU time (on a shared machine a process waiting for the CPU does not
# count the wait), the best of a few repetitions per size; then the best size. Prints
#   sgemm_peak n=N gflops=G coretype=CORE           per size
#   sgemm_peak best gflops=G coretype=CORE
# The kernel family is OpenBLAS's own choice unless OPENBLAS_CORETYPE is set (bench/run runs it with SkylakeX,
# the AVX-512 kernels, and with the machine's environment).
#   /usr/bin/python3 bench/sgemm_peak.py [sizes, default 512,1024,2048] (env REPS, default 5)
import ctypes
import ctypes.util
import os
import sys
import time

import numpy as np

lib = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
lib.openblas_set_num_threads(1)
lib.openblas_get_corename.restype = ctypes.c_char_p
core = lib.openblas_get_corename().decode()
CblasRowMajor, CblasNoTrans = 101, 111
f = ctypes.c_float
P = ctypes.POINTER(ctypes.c_float)
lib.cblas_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, f, P,
                            ctypes.c_int, P, ctypes.c_int, f, P, ctypes.c_int]
sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "512,1024,2048").split(",")]
reps = int(os.environ.get("REPS", "5"))
best = 0.0
for n in sizes:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    pa, pb, pc = (x.ctypes.data_as(P) for x in (a, b, c))
    calls = max(1, int(1e10 / (2.0 * n ** 3)))  # ~10 GFLOP a repetition

    def gemm():
        lib.cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, pa, n, pb, n, 0.0, pc, n)
    gemm()
    got = 0.0
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(calls):
            gemm()
        got = max(got, 2.0 * n ** 3 * calls / (time.process_time() - t0) / 1e9)
    print("sgemm_peak n=%d gflops=%.1f coretype=%s" % (n, got, core))
    best = max(best, got)
print("sgemm_peak best gflops=%.1f coretype=%s" % (best, core))
