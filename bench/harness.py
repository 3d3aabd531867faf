# bench/harness.py — the driver behind bench/run: runs every workload in lutra and in PyTorch as separate
# processes, alternating sides within each round, several rounds; prints medians and ratios in tables.
#   /usr/bin/python3 bench/harness.py [--quick] [--rounds N] [--only NAME[,NAME...]] [--json FILE] [--contended]
# --contended: one busy process per CPU runs beside both sides for the whole run (a shared machine: a build, a
# game); the same rounds and ratios, so the two modes compare.
# Environment: LUTRA_BIN (the lutra binary), LUTRA_BUILD (build dir holding bench_gemm_floor).
#   [--all] [--write-results | --no-write-results]
# Sections (--only): peak, floor, train, batch1, memory, ftz, perf, trainer, core_ops, gpt, vision, kernels, optim,
# lstm, gemm, bf16. The default run: those of issue 31's Done-when (DEFAULT_SECTIONS); --all: every one.
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUTRA = os.environ.get("LUTRA_BIN", os.path.join(ROOT, "build/bin/release/cli/lutra"))
# for the perf section: the same build with symbols, when bench/run made one (the release link strips them)
LUTRA_PROF = os.environ.get("LUTRA_PROF_BIN") or LUTRA
BUILD = os.environ.get("LUTRA_BUILD", os.path.join(ROOT, "build"))
PY = "/usr/bin/python3"

args = sys.argv[1:]
QUICK = "--quick" in args
CONTENDED = "--contended" in args
ROUNDS = 2 if QUICK else 5
ONLY = None
JSON_OUT = None
for i, a in enumerate(args):
    if a == "--rounds":
        ROUNDS = int(args[i + 1])
    if a == "--only":
        ONLY = set(args[i + 1].split(","))
    if a == "--json":
        JSON_OUT = args[i + 1]


# The default run: the sections behind issue 31's Done-when (training workloads against PyTorch best, the MLP's
# GEMM floor, the kernel rows), sized to finish in about 12 minutes on 2 vCPUs even with --contended. --all adds the
# earlier issues' sections (batch 1 and FTZ, memory over 10 epochs, perf profiles, core ops, vision layers, GEMM
# shapes, bf16); --only picks any.
DEFAULT_SECTIONS = {"peak", "train", "gpt", "lstm", "optim", "kernels"}
ALL = "--all" in args
# --contended: every side runs at about half speed (a busy process per CPU takes half of each core), so the steps
# or blocks inside a process are halved to keep the run within its time; the rounds (the medians) stay the same
# (BENCH_WORK=f sets the factor: e.g. 0.7 to shorten a run that overran its time on a slower machine)
WORK = float(os.environ.get("BENCH_WORK") or (0.5 if CONTENDED else 1.0))


def wanted(section):
    if ONLY is not None:
        return section in ONLY
    return ALL or section in DEFAULT_SECTIONS


# ---- environments -------------------------------------------------------------------------------------
BASE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                         "GOMP_SPINCOUNT", "MKL_NUM_THREADS")}
BASE_ENV["PYTHONWARNINGS"] = "ignore"


def env(**kw):
    e = dict(BASE_ENV)
    e.update(kw)
    return e


# Each side: (label, command prefix, environment, extra arguments)
LUTRA_SIDE = ("lutra", [LUTRA, os.path.join(ROOT, "bench/train_lutra.lua")], env(), [])
TORCH_SIDES = {
    # best settings: preloaded tensors, plain loop, 2 threads, passive OpenMP waiting, with each BLAS kernel
    "torch PASSIVE+SkylakeX": ([PY, os.path.join(ROOT, "bench/train_torch.py")],
                               env(OMP_WAIT_POLICY="PASSIVE", OPENBLAS_CORETYPE="SkylakeX"), []),
    "torch PASSIVE+default kernel": ([PY, os.path.join(ROOT, "bench/train_torch.py")],
                                     env(OMP_WAIT_POLICY="PASSIVE"), []),
    # what most users get: no environment, PyTorch's own thread count
    "torch default settings": ([PY, os.path.join(ROOT, "bench/train_torch.py")], env(), ["threads=default"]),
    # one thread: no OpenMP hand-offs at all (small steps, and a shared CPU, can favour it)
    "torch 1 thread+SkylakeX": ([PY, os.path.join(ROOT, "bench/train_torch.py")], env(OPENBLAS_CORETYPE="SkylakeX"),
                                ["threads=1"]),
}
# "PyTorch best" = the fastest of every PyTorch configuration measured, per workload: lutra is compared against
# min(PyTorch configurations), never against one chosen setting
BEST = tuple(TORCH_SIDES)


def run(cmd, e, timeout=900):
    t0 = time.time()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout[-2000:], p.stderr[-3000:]))
    return p.stdout, time.time() - t0


def parse_result(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            r = {}
            for kv in line[7:].split():
                k, _, v = kv.partition("=")
                try:
                    r[k] = float(v)
                except ValueError:
                    r[k] = v
            return r
    raise RuntimeError("no RESULT line in:\n" + out)


def run_side(label, workload_args, prof=False):
    if label == "lutra":
        cmd, e, extra = LUTRA_SIDE[1], LUTRA_SIDE[2], LUTRA_SIDE[3]
        if prof:
            cmd = [LUTRA_PROF] + cmd[1:]
    else:
        cmd, e, extra = TORCH_SIDES[label]
    out, _ = run(cmd + workload_args + extra, e)
    return parse_result(out)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    return ("{:.%df}" % nd).format(x)


def table(title, header, rows):
    print("\n" + title)
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(header, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    sys.stdout.flush()


REPORT = {"quick": QUICK, "contended": CONTENDED, "rounds": ROUNDS, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
          "sections": {}}


def load_avg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---- GEMM-only floor ----------------------------------------------------------------------------------
def gemm_floor(model, batch, coretype=None):
    exe = os.path.join(BUILD, "bin/release/bench_gemm_floor")
    e = env()
    if coretype:
        e["OPENBLAS_CORETYPE"] = coretype
    out, _ = run([exe, model, str(batch), "5" if QUICK else "9"], e)
    r = {"gemms": []}
    for line in out.splitlines():
        if line.startswith("gemm_floor "):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                try:
                    r[k] = float(v)
                except ValueError:
                    r[k] = v
        elif line.startswith("gemm "):
            r["gemms"].append(line[5:])
    return r


# ---- served processes: every side loaded once, then timed in alternating blocks -----------------------------
# The machine's speed drifts (a shared 2-vCPU VM: the same loop varies by up to 2x from one second to the
# next), so comparing whole runs taken minutes apart is noise. Each side runs as a process that stays loaded
# (mode=serve) and the harness asks them in turn for a block of steps: one round = one block of every side,
# sides in rotating order, and the ratio of a round compares blocks run within a second or two of each other.
class Served:
    # started together and then waited for (ready()): the sides load (PyTorch's import, the data set, the warm-up
    # steps) at the same time instead of one after another, which is most of a workload's fixed cost
    def __init__(self, label, cmd, e):
        self.label, self.cmd = label, cmd
        self.p = subprocess.Popen(cmd, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)

    def ready(self):
        line = self.p.stdout.readline()
        if not line.startswith("READY"):
            self.p.kill()
            raise RuntimeError("%s did not start: %s%s" % (" ".join(self.cmd), line, self.p.stderr.read()[-3000:]))
        return self

    def block(self, n):
        self.p.stdin.write("run %d\n" % n)
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        if not line or line[0] != "DONE":
            raise RuntimeError("%s: no answer to a block (%s): %s" % (self.label, line, self.p.stderr.read()[-3000:]))
        return float(line[1]), int(line[2])

    def finish(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        out = self.p.stdout.read()
        self.p.wait()
        try:
            return parse_result(out)
        except RuntimeError:
            return {}


def serve_side(label, wargs):
    if label == "GEMM-only floor":
        model, batch = wargs
        exe = os.path.join(BUILD, "bin/release/bench_gemm_floor")
        return Served(label, [exe, model, str(batch), "1", "lutra", "serve"], env())
    if label == "lutra":
        cmd, e, extra = LUTRA_SIDE[1], LUTRA_SIDE[2], LUTRA_SIDE[3]
    else:
        cmd, e, extra = TORCH_SIDES[label]
    return Served(label, cmd + wargs + ["mode=serve"] + extra, e)


def rounds_of(variants, block, rounds, ref):
    """variants: [(label, side, wargs)]; returns {label: [seconds per step of each round]}, {label: [ratio to
    ref in each round]}, {label: RESULT of the process}, {label: system allocs of lutra's blocks}"""
    procs = {}
    try:
        for label, side, wargs in variants:
            procs[label] = serve_side(side, wargs)
        for sp in procs.values():
            sp.ready()
        per_step = {v[0]: [] for v in variants}
        allocs = {v[0]: [] for v in variants}
        labels = [v[0] for v in variants]
        for rnd in range(rounds):
            k = rnd % len(labels)
            order = labels[k:] + labels[:k]
            for label in order:
                # idle processes' threads keep spinning for a while after their block (OpenBLAS's workers
                # yield-spin ~0.1 s): let them go to sleep before the next block, as they would between runs
                time.sleep(PAUSE)
                dt, al = procs[label].block(block)
                per_step[label].append(dt / block)
                allocs[label].append(al)
        ratios = {l: [a / b for a, b in zip(per_step[l], per_step[ref])] for l in labels}
        results = {l: procs[l].finish() for l in labels}
        procs = {}
        return per_step, ratios, results, allocs
    finally:
        for sp in procs.values():
            sp.p.kill()


# ---- training throughput ------------------------------------------------------------------------------
TRAIN_ALL = [
    # name, model, batch, steps per block (full, quick), warm-up steps
    ("MLP b64", "mlp", 64, (150, 100), 300),
    ("MLP b256", "mlp", 256, (40, 30), 100),
    ("LeNet-5 b64", "lenet", 64, (40, 25), 30),
    ("tiny b1", "tiny", 1, (1000, 500), 5000),
    ("tiny b8", "tiny", 8, (1000, 500), 5000),
]
TRAIN = [w for w in TRAIN_ALL if not os.environ.get("BENCH_WORKLOADS") or w[0] in os.environ["BENCH_WORKLOADS"].split(",")]
FLOOR_MODELS = {"MLP b64": ("mlp", 64), "MLP b256": ("mlp", 256), "LeNet-5 b64": ("lenet", 64)}
TRAINER_WORKLOAD = "MLP b64"  # also run under lt.Trainer, against PyTorch best's plain loop
TRAIN_ROUNDS = 5 if QUICK else 9  # alternating blocks per workload: medians of 9
# between two blocks: idle threads of the side that just ran go to sleep (OpenBLAS's workers yield-spin ~0.1 s,
# libgomp's without OMP_WAIT_POLICY a fraction of that; lutra's pool parks after ~20 us)
PAUSE = float(os.environ.get("BENCH_PAUSE", "0.15"))


def section_train():
    sides = ["lutra"] + list(TORCH_SIDES)
    rows, summary = [], {}
    for name, model, batch, steps, warmup in TRAIN:
        block = max(1, int((steps[1] if QUICK else steps[0]) * WORK))
        wargs = ["model=" + model, "batch=%d" % batch, "warmup=%d" % warmup]
        variants = [(s, s, wargs) for s in sides]
        if name in FLOOR_MODELS:
            variants.append(("GEMM-only floor", "GEMM-only floor", FLOOR_MODELS[name]))
        if name == TRAINER_WORKLOAD:  # the same recipe under lt.Trainer (its DataLoader, hooks, built-in step)
            variants.append(("lutra Trainer", "lutra", wargs + ["loop=trainer"]))
        print("  %s: %d rounds of %d-step blocks (load %.2f)" % (name, TRAIN_ROUNDS, block, load_avg()), flush=True)
        per_step, ratios, results, allocs = rounds_of(variants, block, TRAIN_ROUNDS, "lutra")
        m = {l: med(v) * 1e6 for l, v in per_step.items()}
        r = {l: med(v) for l, v in ratios.items()}
        best_label = min(BEST, key=lambda s: r[s])
        if "lutra Trainer" in per_step:  # PyTorch best's plain loop / lutra's Trainer, per round
            r["PyTorch best / lutra Trainer"] = med([a / b for a, b in zip(per_step[best_label],
                                                                          per_step["lutra Trainer"])])
        summary[name] = {"batch": batch, "step_us": m, "ratio": r, "best_torch": best_label,
                         "peak_rss_kb": {l: results[l].get("peak_rss_kb") for l in sides},
                         "loss": {l: results[l].get("loss") for l in sides},
                         "lutra_system_allocs_per_block": allocs["lutra"][2:],
                         "raw_step_s": per_step, "raw_ratio": ratios, "block": block, "rounds": TRAIN_ROUNDS}
        for l, _, _ in variants:
            rss = summary[name]["peak_rss_kb"].get(l)
            rows.append([name if l == "lutra" else "", l + (" (best)" if l == best_label else ""), fmt(m[l], 2),
                         fmt(batch / (m[l] * 1e-6)), "%.2fx" % r[l] if l != "lutra" else "1.00x",
                         fmt(rss / 1024, 0) if rss else "-"])
    table("Training steps (%d rounds of alternating blocks; step us, samples/s: medians; ratio: median over rounds of "
          "(that side's step time / lutra's in the same round): >1 means lutra is faster)" % TRAIN_ROUNDS,
          ["workload", "side", "step us", "samples/s", "ratio", "peak RSS MB"], rows)
    REPORT["sections"]["train"] = summary
    return summary


# ---- batch-1 MLP with and without flushing denormals --------------------------------------------------
def section_batch1():
    warm, block, rounds = (600, 60, 4) if QUICK else (1500, 100, 10)
    wargs = ["model=mlp", "batch=1", "warmup=%d" % warm]
    variants = [
        ("lutra FTZ on (default)", "lutra", wargs + ["ftz=1"]),
        ("lutra FTZ off", "lutra", wargs + ["ftz=0"]),
        ("torch PASSIVE+SkylakeX, FTZ off (default)", "torch PASSIVE+SkylakeX", wargs + ["ftz=0"]),
        ("torch PASSIVE+SkylakeX, FTZ on", "torch PASSIVE+SkylakeX", wargs + ["ftz=1"]),
        ("torch PASSIVE+default kernel, FTZ off", "torch PASSIVE+default kernel", wargs + ["ftz=0"]),
        ("torch PASSIVE+default kernel, FTZ on", "torch PASSIVE+default kernel", wargs + ["ftz=1"]),
        ("torch default settings (FTZ off)", "torch default settings", wargs + ["ftz=0"]),
    ]
    print("  batch 1: %d rounds of %d-step blocks after %d warm-up steps (load %.2f)" % (rounds, block, warm,
                                                                                         load_avg()), flush=True)
    per_step, ratios, _, _ = rounds_of(variants, block, rounds, "lutra FTZ on (default)")
    m = {k: med(v) * 1e6 for k, v in per_step.items()}
    r = {k: med(v) for k, v in ratios.items()}
    rows = [[k, fmt(m[k], 1), "%.2fx" % r[k]] for k, _, _ in variants]
    table("MLP 784-512-256-10 at batch 1 on Fashion-MNIST, per-step time after %d warm-up steps (%d rounds of "
          "alternating blocks; ratio: median over rounds of step time / lutra's default)" % (warm, rounds),
          ["variant", "step us", "ratio"], rows)
    REPORT["sections"]["batch1"] = {"step_us": m, "ratio": r, "raw": per_step, "warmup": warm, "block": block}


# ---- memory: peak RSS, RSS flatness over 10 epochs ------------------------------------------------------
def section_memory():
    epochs = 3 if QUICK else 10
    wargs = ["model=mlp", "batch=64", "mode=memory", "epochs=%d" % epochs]
    out = {}
    for s in ("lutra", "torch PASSIVE+SkylakeX"):
        print("  memory: %s, %d epochs (load %.2f)" % (s, epochs, load_avg()), flush=True)
        out[s] = run_side(s, wargs)
    rows = []
    for s, r in out.items():
        e1, eN = r["rss_epoch1_kb"], r["rss_epoch%d_kb" % epochs]
        rows.append([s, fmt(r["peak_rss_kb"] / 1024, 1), fmt(e1 / 1024, 1), fmt(eN / 1024, 1),
                     "%+.2f%%" % ((eN - e1) / e1 * 100), fmt(r["samples_per_s"])])
    table("Memory, MLP b64 on Fashion-MNIST over %d epochs (VmHWM; VmRSS after epochs)" % epochs,
          ["side", "peak RSS MB", "RSS ep1 MB", "RSS ep%d MB" % epochs, "growth", "samples/s"], rows)
    REPORT["sections"]["memory"] = {"epochs": epochs, "results": out}


# ---- FTZ does not change results ---------------------------------------------------------------------
def read_floats(path):
    import array
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def section_ftz():
    steps = 800 if QUICK else 3000
    tmp = tempfile.mkdtemp(prefix="lutra-bench-")
    rows = []
    rep = {}
    for side in ("lutra", "torch PASSIVE+SkylakeX"):
        files, losses = {}, {}
        for ftz in ("1", "0"):
            path = os.path.join(tmp, "%s-%s.bin" % (side.split()[0], ftz))
            r = run_side(side, ["model=mlp", "batch=1", "mode=dump", "steps=%d" % steps, "ftz=" + ftz, "seed=1",
                                "out=" + path])
            files[ftz], losses[ftz] = read_floats(path), r.get("loss")
        a, b = files["1"], files["0"]
        diffs = [abs(x - y) for x, y in zip(a, b)]
        maxd = max(diffs)
        nd = sum(1 for d in diffs if d != 0)
        scale = max(abs(x) for x in b)
        rows.append([side, len(a), nd, "%.3g" % maxd, "%.3g" % (maxd / scale), losses["1"], losses["0"]])
        rep[side] = {"params": len(a), "n_differ": nd, "max_abs_diff": maxd, "max_rel_to_max_weight": maxd / scale,
                     "loss_ftz_on": losses["1"], "loss_ftz_off": losses["0"]}
        for p in files:
            os.unlink(os.path.join(tmp, "%s-%s.bin" % (side.split()[0], p)))
    os.rmdir(tmp)
    table("Flush-to-zero on vs off: MLP batch 1, %d SGD steps from the same seed and data order" % steps,
          ["side", "weights", "differ", "max |diff|", "rel. to max |w|", "last loss FTZ on", "FTZ off"], rows)
    REPORT["sections"]["ftz"] = {"steps": steps, "results": rep}


# ---- GEMM floors, per call ------------------------------------------------------------------------------
def section_floor():
    rep = {}
    for model, batch in (("mlp", 64), ("mlp", 256), ("lenet", 64)):
        f = gemm_floor(model, batch)
        fp = gemm_floor(model, batch, coretype="Prescott")
        rep["%s b%d" % (model, batch)] = {"skylakex": f, "prescott": fp}
        print("\nGEMM-only floor %s b%d: %.3f ms/step, %.1f MFLOP/step, %.1f GFLOP/s (%s, %d threads); "
              "with the Prescott kernel (OpenBLAS's choice on the old Intel machine): %.3f ms/step, %.1f GFLOP/s"
              % (model, batch, f["ms_per_step"], f["mflop_per_step"], f["gflops"], f["corename"], f["threads"],
                 fp["ms_per_step"], fp["gflops"]))
        for g in f["gemms"]:
            print("   " + g)
    REPORT["sections"]["floor"] = rep


# ---- the per-core peak: OpenBLAS's sgemm alone on one thread (bench/sgemm_peak.py, CPU time) ------------------
def section_peak():
    rep = {}
    for label, e in (("SkylakeX (AVX-512)", env(OPENBLAS_CORETYPE="SkylakeX")), ("OpenBLAS's own choice", env())):
        out, _ = run([PY, os.path.join(ROOT, "bench/sgemm_peak.py"), "512,1024" if QUICK else "512,1024,2048"],
                     env(**dict(e, REPS="3" if QUICK else "5")))
        sizes = {}
        for line in out.splitlines():
            kv = dict(x.partition("=")[::2] for x in line.split()[2:])
            if line.startswith("sgemm_peak n="):
                sizes[line.split()[1]] = float(kv["gflops"])
            elif line.startswith("sgemm_peak best"):
                rep[label] = {"gflops": float(kv["gflops"]), "coretype": kv["coretype"], "sizes": sizes}
    print("\nPer-core peak: OpenBLAS sgemm alone, 1 thread, square sizes, GFLOP/s per CPU second: %s"
          % "; ".join("%s [%s] %.0f (%s)" % (k, v["coretype"], v["gflops"],
                                              ", ".join("%s %.0f" % kv for kv in v["sizes"].items()))
                      for k, v in rep.items()), flush=True)
    REPORT["sections"]["peak"] = rep


# ---- where the step goes: perf, share of the main thread's time inside OpenBLAS ------------------------------
def perf_share(data, pid):
    """(share of the main thread's samples with an OpenBLAS frame or in sched_yield (OpenBLAS waiting),
    top self symbols of the main thread)"""
    p = subprocess.run(["perf", "script", "-i", data, "-F", "tid,ip,sym,dso"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    total = inblas = 0
    selfsym = {}
    cur = None
    frames = []

    def flush():
        nonlocal total, inblas
        if cur != pid or not frames:
            return
        total += 1
        # the first user-space frame decides: inside OpenBLAS, or in sched_yield (OpenBLAS waiting for its
        # threads); deeper frames are not trusted (frame-pointer unwinding through code built without them)
        user = [(s, d) for s, d in frames if "kernel.kallsyms" not in d]
        if user and ("openblas" in user[0][1] or "sched_yield" in user[0][0]):
            inblas += 1
        s, d = frames[0]
        key = "%s (%s)" % (s if s and not s.startswith("[unknown]") else "?", os.path.basename(d.strip("()")))
        selfsym[key] = selfsym.get(key, 0) + 1

    for line in p.stdout.splitlines():
        if not line.strip():
            flush()
            cur, frames = None, []
        elif not line.startswith("\t"):
            flush()
            cur, frames = int(line.split()[0]), []
        else:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s*(\([^()]*\))\s*$", line)
            if m:
                frames.append((m.group(1), m.group(2)))
    flush()
    top = sorted(selfsym.items(), key=lambda kv: -kv[1])[:12]
    return (inblas / total if total else None), [(k, v / total) for k, v in top], total


def section_perf(train_summary):
    if subprocess.run(["which", "perf"], stdout=subprocess.DEVNULL).returncode != 0:
        print("\n(perf not found: no GEMM-share profile)")
        return
    tmp = tempfile.mkdtemp(prefix="lutra-perf-")
    rows = []
    rep = {}
    secs = "2" if QUICK else "4"
    for name, model, batch in (("MLP b64", "mlp", 64), ("MLP b256", "mlp", 256), ("LeNet-5 b64", "lenet", 64)):
        fl = gemm_floor(model, batch)
        for side in ("lutra", "torch PASSIVE+SkylakeX"):
            data = os.path.join(tmp, "perf.data")
            r = run_side(side, ["model=" + model, "batch=%d" % batch, "mode=perf", "perf=" + secs, "out=" + data,
                                "warmup=20"], prof=True)
            share, top, n = perf_share(data, int(r["pid"]))
            if os.path.exists(data):
                os.unlink(data)
            step_ms = r["step_us"] / 1e3
            gfl = fl["mflop_per_step"] / step_ms  # MFLOP per ms = GFLOP/s
            if share is None:  # perf recorded no sample of the main thread (it started late, or was refused)
                print("  (perf: no samples of %s's main thread for %s)" % (side, name))
            rows.append([name if side == "lutra" else "", side, fmt(step_ms, 3),
                         "%.0f%%" % (share * 100) if share is not None else "-",
                         fmt(step_ms * share if share is not None else None, 3), fmt(fl["ms_per_step"], 3), fmt(gfl, 1),
                         fmt(fl["gflops"], 1),
                         "%.0f%%" % (fl["ms_per_step"] / step_ms * 100)])
            rep.setdefault(name, {})[side] = {"step_ms": step_ms, "blas_share": share, "samples": n, "top": top,
                                              "floor_ms": fl["ms_per_step"], "gflops": gfl, "floor_gflops": fl["gflops"]}
    os.rmdir(tmp)
    table("Where the step goes (perf, main thread; 'in sgemm' = samples inside OpenBLAS incl. its waits; "
          "GFLOP/s = the step's GEMM FLOPs / step time; floor = the same GEMMs alone)",
          ["workload", "side", "step ms", "in sgemm", "sgemm ms", "floor ms", "GFLOP/s", "floor GFLOP/s",
           "floor/step"], rows)
    for name, sides in rep.items():
        for side, r in sides.items():
            print("  top of %s, %s: %s" % (name, side, ", ".join("%s %.0f%%" % (k, v * 100) for k, v in r["top"][:8])))
    REPORT["sections"]["perf"] = rep


# ---- Trainer-driven MLP: framework overhead -----------------------------------------------------------
def section_trainer():
    st = 150 if QUICK else 600
    res = {"lutra plain loop": [], "lutra Trainer": []}
    for rnd in range(max(1, ROUNDS - 2)):
        for label, extra in (("lutra plain loop", []), ("lutra Trainer", ["loop=trainer"])):
            try:
                r = run_side("lutra", ["model=mlp", "batch=64", "steps=%d" % st, "warmup=200"] + extra)
            except RuntimeError as e:
                print("  (Trainer workload failed: %s)" % str(e).splitlines()[0])
                return
            res[label].append(r["step_us"])
    m = {k: med(v) for k, v in res.items()}
    rows = [[k, fmt(v, 1), fmt(64 / (v * 1e-6)), "%+.1f%%" % ((v / m["lutra plain loop"] - 1) * 100)]
            for k, v in m.items()]
    table("MLP b64: plain loop vs lt.Trainer (same data, model, optimizer)", ["loop", "step us", "samples/s",
                                                                              "overhead"], rows)
    REPORT["sections"]["trainer"] = {"step_us": m, "raw": res}


# ---- micro-benchmarks of other areas: "name ... number" lines, lower is better -----------------------------------
# PyTorch's side of the paired micro-benchmarks runs in each of these configurations every round; a row's "torch
# best" is the fastest of them (per row), and the table names it. lutra runs as a user gets it: no environment,
# its own thread count (2 here, BENCH_THREADS=2 only pins what the scripts would pick anyway).
TORCH_PAIRED = [
    ("2T PASSIVE SkylakeX", dict(OMP_WAIT_POLICY="PASSIVE", OPENBLAS_CORETYPE="SkylakeX", BENCH_THREADS="2")),
    ("1T SkylakeX", dict(OPENBLAS_CORETYPE="SkylakeX", BENCH_THREADS="1")),
    ("default", dict(BENCH_THREADS="default")),
]


def out_lines(out):
    """'name ... number' lines of a benchmark's output as {name: number}"""
    d = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                d[" ".join(parts[:-1])] = float(parts[-1])
            except ValueError:
                pass
    return d


def best_of_configs(per, configs):
    """per: [(lutra {row: t}, {config: {row: t}})] one entry a round. Returns {row: {lutra, torch, ratio, best,
    ratios}}: times are medians over rounds; a configuration's ratio is the median over rounds of its time / lutra's
    in the same round; 'best' is the configuration with the lowest ratio (PyTorch's fastest), 'ratio' its ratio."""
    rep = {}
    for k in per[0][0]:
        if not all(k in p[0] and p[0][k] > 0 for p in per):
            continue
        ratios = {c: med([p[1][c][k] / p[0][k] for p in per if k in p[1][c]]) for c in configs}
        ratios = {c: r for c, r in ratios.items() if r is not None}
        if not ratios:
            continue
        best = min(ratios, key=ratios.get)
        rep[k] = {"lutra": med([p[0][k] for p in per]), "torch": med([p[1][best][k] for p in per if k in p[1][best]]),
                  "ratio": ratios[best], "best": best, "ratios": ratios}
    return rep


def paired_table(title, unit, rep, configs):
    rows = []
    for k, v in rep.items():
        rows.append([k, fmt(v["lutra"], 2), fmt(v["torch"], 2), "%.2fx" % v["ratio"], v["best"]]
                    + ["%.2fx" % v["ratios"][c] if c in v["ratios"] else "-" for c in configs])
    if rep:
        import math
        gm = math.exp(sum(math.log(v["ratio"]) for v in rep.values()) / len(rep))
        rows.append(["geometric mean", "", "", "%.2fx" % gm, ""] + [""] * len(configs))
    table(title + " (%s, medians; ratio = PyTorch best / lutra, > 1 means lutra is faster; PyTorch best = its fastest "
          "configuration per row, named)" % unit,
          ["op", "lutra", "torch best", "ratio", "fastest torch"] + ["vs " + c for c in configs], rows)


def paired(lua_file, py_file, title, rounds=1, configs=None, extra_env=None, unit="microseconds"):
    """Each round runs lutra once and PyTorch once in every configuration (TORCH_PAIRED unless given), in rotating
    order; times are medians over rounds, a ratio the median of the rounds' (against PyTorch's fastest
    configuration). extra_env: environment for both sides (e.g. repetitions)."""
    configs = configs or TORCH_PAIRED
    names = [c for c, _ in configs]
    extra = extra_env or {}
    per = []
    for rnd in range(rounds):
        sides = ["lutra"] + names
        k = rnd % len(sides)
        got = {}
        for side in sides[k:] + sides[:k]:
            if side == "lutra":
                out, _ = run([LUTRA, os.path.join(ROOT, lua_file)], env(BENCH_THREADS="2", **extra))
            else:
                out, _ = run([PY, os.path.join(ROOT, py_file)], env(**dict(dict(configs)[side], **extra)))
            got[side] = out_lines(out)
        per.append((got["lutra"], {c: got[c] for c in names}))
    rep = best_of_configs(per, names)
    paired_table(title, unit, rep, names)
    return {"lutra": {k: v["lutra"] for k, v in rep.items()}, "torch": {k: v["torch"] for k, v in rep.items()},
            "ratio": {k: v["ratio"] for k, v in rep.items()}, "best": {k: v["best"] for k, v in rep.items()},
            "ratios": {k: v["ratios"] for k, v in rep.items()}, "rounds": rounds}


# ---- the slow kernels of issues 31 and 29 (bench/kernels_cpu.lua, bench/kernels_cpu_torch.py) ------------------
# Process CPU time per call on one thread on both sides: a process waiting for a shared CPU does not count the
# wait, so the row compares the kernels' cost, not the scheduler's share; one thread is PyTorch's cheapest
# configuration in CPU time (a second thread only adds hand-offs to the sum).
KERNEL_CONFIGS = [("1T SkylakeX PASSIVE", dict(OPENBLAS_CORETYPE="SkylakeX", OMP_WAIT_POLICY="PASSIVE", T="1"))]


def section_kernels():
    rounds = PAIRED_ROUNDS
    return paired("bench/kernels_cpu.lua", "bench/kernels_cpu_torch.py",
                  "Issue 31/29 kernels, fwd+bwd where named, one thread, %d alternating rounds" % rounds,
                  rounds=rounds, configs=KERNEL_CONFIGS, unit="CPU microseconds per call")


# ---- vision area: conv/pool/norm layers fwd+bwd (bench/vision_bench.lua, bench/vision_bench_torch.py) ----------
def section_vision():
    """Both sides alternate over rounds (PyTorch in each TORCH_PAIRED configuration); per round the ratio PyTorch /
    lutra of each layer; the table gives the medians over rounds and the load average around it."""
    rounds = PAIRED_ROUNDS
    loads = [load_avg()]
    rep = paired("bench/vision_bench.lua", "bench/vision_bench_torch.py",
                 "Vision layers fwd+bwd, batch 16, %d alternating rounds" % rounds, rounds=rounds,
                 extra_env={"BENCH_REPS": "7" if QUICK else "11"}, unit="ms")
    loads.append(load_avg())
    print("  (load average before and after: %s)" % " ".join("%.1f" % x for x in loads))
    rep["load"] = loads
    return rep


def section_bf16():
    """lutra fp32 / lutra bf16 / PyTorch fp32 / PyTorch autocast bf16 for the MLP, LeNet and GPT steps on one
    thread, and the bf16 GEMM's GFLOP/s against sgemm: bench/bf16.lua prints the table (CPU time, medians)."""
    print("\n== bfloat16 mixed precision (bench/bf16.lua, %d rounds, one thread)" % ROUNDS)
    sys.stdout.flush()
    out = subprocess.run([LUTRA, os.path.join(ROOT, "bench/bf16.lua")], env=env(BENCH_ROUNDS=str(ROUNDS)),
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(out.stdout, end="")
    return {"returncode": out.returncode, "lines": out.stdout.splitlines()}


def busy_processes():
    """--contended: one busy loop per CPU, started before the first workload, killed when the run ends."""
    if not CONTENDED:
        return []
    return [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 1)]


def main():
    # a SIGTERM (or the terminal going away) unwinds like Ctrl-C, so the finally blocks kill the served sides and
    # the busy processes instead of leaving them running
    import signal
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_, s=sig: sys.exit(128 + s))
    busy = busy_processes()
    try:
        run_sections(busy)
    finally:
        for p in busy:
            p.kill()
            p.wait()


PAIRED_ROUNDS = 2 if QUICK else max(3, ROUNDS - 2)


def scaled(n):
    """n steps or blocks inside a process, halved under --contended (WORK), at least 1, as a string"""
    return str(max(1, int(n * WORK)))


def paired_section(title, lua_file, py_file, extra_env=None):
    def go():
        return paired(lua_file, py_file, "%s, %d alternating rounds" % (title, PAIRED_ROUNDS), rounds=PAIRED_ROUNDS,
                      extra_env=extra_env)
    return go


# (name for --only, what it runs); in this order. train's summary feeds perf's and the bars.
def sections():
    return [
        ("peak", section_peak),
        ("floor", section_floor),
        ("train", section_train),
        ("batch1", section_batch1),
        ("memory", section_memory),
        ("ftz", section_ftz),
        ("perf", lambda: section_perf(REPORT["sections"].get("train"))),
        ("trainer", section_trainer),
        ("core_ops", paired_section("Core ops", "bench/core_ops.lua", "bench/core_ops_torch.py")),
        # the tiny GPT's training step (bench/gpt_bench.lua, bench/gpt_bench_torch.py): the best of 4 blocks of 10
        # steps inside each process (its own default is 15: the harness's rounds already repeat the process)
        ("gpt", paired_section("Tiny GPT step", "bench/gpt_bench.lua", "bench/gpt_bench_torch.py",
                               {"BENCH_ROUNDS": scaled(2 if QUICK else 4)})),
        ("vision", section_vision),
        ("kernels", section_kernels),
        ("optim", paired_section("Optimizer steps", "bench/optim_bench.lua", "bench/optim_bench_torch.py",
                                 {"BENCH_ROUNDS": "5", "BENCH_STEPS": scaled(10 if QUICK else 20)})),
        # the 2-layer LSTM word model's training step (bench/lstm_bench*.{lua,py}): best of 3 blocks of 2 steps
        ("lstm", paired_section("LSTM word model (2 layers)", "bench/lstm_bench.lua", "bench/lstm_bench_torch.py",
                                {"BENCH_ROUNDS": "3", "BENCH_STEPS": scaled(1 if QUICK else 2)})),
        # the workloads' GEMM shapes alone (bench/gemm_shapes.lua, bench/gemm_shapes_torch.py)
        ("gemm", paired_section("GEMM shapes of the workloads", "bench/gemm_shapes.lua",
                                "bench/gemm_shapes_torch.py")),
        # bfloat16 mixed precision (bench/bf16.lua runs both sides itself, on one thread)
        ("bf16", section_bf16),
    ]


def run_sections(busy):
    print("lutra bench: %s, %d alternating rounds for the training steps, %d for the other sections, %s%s"
          % ("quick" if QUICK else "full", TRAIN_ROUNDS, PAIRED_ROUNDS, REPORT["date"],
             ", contended: %d busy processes beside both sides" % len(busy) if busy else ""))
    print("lutra binary: %s" % LUTRA)
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
        print("CPU: %s x %d, load average now %.2f" % (cpu[0], len(cpu), load_avg()))
    except OSError:
        pass
    sys.stdout.flush()
    REPORT["load_start"] = load_avg()
    REPORT["section_seconds"] = {}
    t_all = time.time()
    for name, fn in sections():
        if not wanted(name):
            continue
        t0, c0 = time.time(), os.times()
        got = fn()
        if got is not None and name not in REPORT["sections"]:
            REPORT["sections"][name] = got
        c1 = os.times()
        REPORT["section_seconds"][name] = time.time() - t0
        # the CPU time of the section's processes (both sides, all threads): with the wall time under load it tells
        # what the section would take on a quiet machine
        cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
        REPORT.setdefault("section_cpu_seconds", {})[name] = cpu
        print("  [section %s: %.0f s wall, %.0f s CPU of its processes, load %.2f]"
              % (name, REPORT["section_seconds"][name], cpu, load_avg()), flush=True)
    REPORT["total_seconds"] = time.time() - t_all
    REPORT["load_end"] = load_avg()
    bars(REPORT["sections"].get("train") or {})
    rows = done_when()
    if rows and WRITE_RESULTS:
        write_results(rows)
    if JSON_OUT:
        with open(JSON_OUT, "w") as f:
            json.dump(REPORT, f, indent=1, default=str)


def bars(train):
    rows = []
    if "MLP b64" in train:
        t = train["MLP b64"]
        best = t["best_torch"]
        rows.append(["MLP b64 >= 1.4x PyTorch best", "%.2fx" % t["ratio"][best], t["ratio"][best] >= 1.4])
        if "GEMM-only floor" in t["ratio"]:
            f = t["ratio"]["GEMM-only floor"]
            rows.append(["MLP b64 >= 75% of GEMM-only floor", "%.0f%%" % (f * 100), f >= 0.75])
        d = t["ratio"]["torch default settings"]
        rows.append(["MLP b64 >= 8x PyTorch default settings", "%.2fx" % d, d >= 8])
    if "LeNet-5 b64" in train:
        t = train["LeNet-5 b64"]
        lb = t["ratio"][t["best_torch"]]
        rows.append(["LeNet b64 >= 1.3x PyTorch best", "%.2fx" % lb, lb >= 1.3])
    b1 = REPORT["sections"].get("batch1")
    if b1:
        r = b1["ratio"]
        best_off = min(r["torch PASSIVE+SkylakeX, FTZ off (default)"], r["torch PASSIVE+default kernel, FTZ off"])
        best_on = min(r["torch PASSIVE+SkylakeX, FTZ on"], r["torch PASSIVE+default kernel, FTZ on"])
        rows.append(["MLP b1 step >= 5x faster than PyTorch best (its default: FTZ off)", "%.2fx" % best_off,
                     best_off >= 5])
        rows.append(["  ... against PyTorch best with FTZ on", "%.2fx" % best_on, best_on >= 5])
    lstm = REPORT["sections"].get("lstm")  # recurrent: issue 17's bar for the LSTM word model
    for k, v in sorted((lstm or {}).get("lutra", {}).items()):
        if k.startswith("lm_step_") and k in lstm["torch"] and v > 0:
            r = lstm["ratio"][k]
            rows.append(["LSTM word model step (%s) >= 1.3x PyTorch best" % k.split("_")[2], "%.2fx" % r, r >= 1.3])
    gpt = REPORT["sections"].get("gpt")  # issue 17's bar for the tiny GPT's training step
    if gpt and "gpt train step" in gpt["ratio"]:
        r = gpt["ratio"]["gpt train step"]
        rows.append(["tiny GPT step >= 1.3x PyTorch best", "%.2fx" % r, r >= 1.3])
    mem = REPORT["sections"].get("memory")
    if mem:
        r = mem["results"]
        e = mem["epochs"]
        lr_, tr = r["lutra"], r["torch PASSIVE+SkylakeX"]
        rows.append(["peak RSS <= PyTorch's (MLP b64, 10 epochs)", "%.0f vs %.0f MB" % (lr_["peak_rss_kb"] / 1024,
                                                                                      tr["peak_rss_kb"] / 1024),
                     lr_["peak_rss_kb"] <= tr["peak_rss_kb"]])
        g = (lr_["rss_epoch%d_kb" % e] - lr_["rss_epoch1_kb"]) / lr_["rss_epoch1_kb"] * 100
        rows.append(["RSS growth epoch 1 -> %d <= 2%%" % e, "%+.2f%%" % g, g <= 2])
    if rows:
        table("Bars (issues 8 and 17)", ["bar", "measured", "met"], [[a, b, "yes" if c else "NO"] for a, b, c in rows])
    REPORT["bars"] = rows


# ---- issue 31's Done-when, one line per row, and the summary written into bench/RESULTS.md -----------------------
TRAIN_BAR = 1.2 if CONTENDED else 1.3  # every training workload against PyTorch best: quiet / --contended
FLOOR_BAR = 0.85  # MLP b64: the GEMM-only floor's time / lutra's step time
KERNEL_BAR = 1.0  # every kernel row of issues 31/29


def done_when():
    """[(row, measured, against, bar, met)] for every Done-when row this run measured; prints them as a table."""
    rows = []
    secs = REPORT["sections"]

    def add(name, ratio, against, bar, fmt_="%.2fx"):
        rows.append((name, fmt_ % ratio, against, (">= " + fmt_) % bar, ratio >= bar))

    for name, t in (secs.get("train") or {}).items():
        add(name + " training step", t["ratio"][t["best_torch"]], t["best_torch"], TRAIN_BAR)
    t = (secs.get("train") or {}).get(TRAINER_WORKLOAD)
    if t and "PyTorch best / lutra Trainer" in t["ratio"]:
        add("%s under lt.Trainer" % TRAINER_WORKLOAD, t["ratio"]["PyTorch best / lutra Trainer"],
            t["best_torch"] + " (plain loop)", TRAIN_BAR)
    t = (secs.get("train") or {}).get("MLP b64")
    if t and "GEMM-only floor" in t["ratio"]:
        f = t["ratio"]["GEMM-only floor"]
        rows.append(("MLP b64 share of its GEMM-only floor", "%.0f%%" % (f * 100), "floor time / lutra step",
                     ">= %.0f%%" % (FLOOR_BAR * 100), f >= FLOOR_BAR))
    g = secs.get("gpt")
    if g and "gpt train step" in g["ratio"]:
        add("tiny GPT training step", g["ratio"]["gpt train step"], g["best"]["gpt train step"], TRAIN_BAR)
    ls = secs.get("lstm")
    for k in sorted((ls or {}).get("ratio", {})):
        if k.startswith("lm_step_"):
            add("LSTM word model step (%s)" % k[len("lm_step_"):].split("_")[0], ls["ratio"][k], ls["best"][k],
                TRAIN_BAR)
    o = secs.get("optim")
    if o and o["ratio"]:
        import math
        low = min(o["ratio"], key=o["ratio"].get)
        gm = math.exp(sum(math.log(r) for r in o["ratio"].values()) / len(o["ratio"]))
        # the workload is the set of optimizer steps, measured as the issue measured it: the geometric mean of the
        # rows (zero_grad and plain SGD are a memory pass each, ~1x on both sides); the lowest row is named
        rows.append(("optimizer steps (geometric mean of %d rows)" % len(o["ratio"]), "%.2fx" % gm,
                     "each row's best; lowest: %s %.2fx vs %s" % (low, o["ratio"][low], o["best"][low]),
                     ">= %.2fx" % TRAIN_BAR, gm >= TRAIN_BAR))
    kr = secs.get("kernels")
    for k in (kr or {}).get("ratio", {}):
        add("kernel: " + k, kr["ratio"][k], kr["best"][k] + ", CPU time", KERNEL_BAR)
    if rows:
        table("Issue 31 Done-when (%s; ratio = PyTorch best / lutra, median over rounds; PyTorch best = its fastest "
              "configuration, named)%s" % ("--contended: one busy process per CPU beside both sides" if CONTENDED
                                         else "quiet", " [--quick: a smoke test, not the figures]" if QUICK else ""),
              ["row", "measured", "against", "bar", "PASS/MISS"],
              [[a, b, c, d, "PASS" if e else "MISS"] for a, b, c, d, e in rows])
        print("%d of %d rows PASS" % (sum(1 for r in rows if r[4]), len(rows)))
    REPORT["done_when"] = rows
    return rows


RESULTS_MD = os.path.join(ROOT, "bench/RESULTS.md")
# a full run (every section, default rounds, not --quick) writes its Done-when table into bench/RESULTS.md between
# these markers (one pair per mode); --write-results forces it, --no-write-results prevents it
WRITE_RESULTS = ("--no-write-results" not in args and
                 ("--write-results" in args or
                  (not QUICK and ONLY is None and "--rounds" not in args and not os.environ.get("BENCH_WORKLOADS"))))


def results_markers():
    mode = "contended" if CONTENDED else "quiet"
    return "<!-- bench/run %s: begin -->" % mode, "<!-- bench/run %s: end -->" % mode


def results_block(rows):
    try:
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout.strip() or "?"
    except OSError:
        commit = "?"
    secs = REPORT["section_seconds"]
    lines = ["",
             "Written by `bench/run%s` on %s, commit %s, %d alternating rounds for the training steps, %d for the "
             "other sections; load average %.2f at the start, %.2f at the end; %d:%02d in all (%s)."
             % (" --contended" if CONTENDED else "", REPORT["date"], commit, TRAIN_ROUNDS, PAIRED_ROUNDS,
                REPORT["load_start"], REPORT["load_end"], REPORT["total_seconds"] // 60, REPORT["total_seconds"] % 60,
                ", ".join("%s %.0f s" % kv for kv in secs.items())),
             ""]
    pk = REPORT["sections"].get("peak")
    if pk:
        lines += ["Per-core peak (OpenBLAS sgemm alone, 1 thread, GFLOP/s per CPU second): %s." % "; ".join(
            "%s [%s] %.0f" % (k, v["coretype"], v["gflops"]) for k, v in pk.items()), ""]
    t = (REPORT["sections"].get("train") or {}).get("MLP b64")
    if t and "GEMM-only floor" in t["step_us"]:
        lines += ["MLP b64: lutra %.0f us per step, its GEMM-only floor %.0f us; PyTorch %s." % (
            t["step_us"]["lutra"], t["step_us"]["GEMM-only floor"],
            ", ".join("%s %.0f us" % (k, v) for k, v in t["step_us"].items() if k.startswith("torch"))), ""]
    lines += ["| row | measured | against | bar | |",
              "| --- | --- | --- | --- | --- |"]
    for a, b, c, d, e in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (a, b, c, d, "PASS" if e else "**MISS**"))
    lines += ["", "%d of %d rows PASS." % (sum(1 for r in rows if r[4]), len(rows)), ""]
    return "\n".join(lines)


def write_results(rows):
    begin, end = results_markers()
    try:
        with open(RESULTS_MD) as f:
            text = f.read()
    except OSError as e:
        print("bench/run: cannot read %s (%s): the summary was not written" % (RESULTS_MD, e))
        return
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        print("bench/run: %s has no '%s' ... '%s' markers: the summary was not written" % (RESULTS_MD, begin, end))
        return
    text = text[:i + len(begin)] + "\n" + results_block(rows) + text[j:]
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    print("bench/run: the Done-when table is written into %s (between '%s' and '%s')" % (RESULTS_MD, begin, end))


if __name__ == "__main__":
    main()
