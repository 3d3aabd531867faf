# bench/harness.py — the driver behind bench/run: runs every workload in lutra and in PyTorch as separate
# processes, alternating sides within each round, several rounds; prints medians and ratios in tables.
#   /usr/bin/python3 bench/harness.py [--quick] [--rounds N] [--only NAME[,NAME...]] [--json FILE]
# Environment: LUTRA_BIN (the lutra binary), LUTRA_BUILD (build dir holding bench_gemm_floor).
# Sections (--only): train, batch1, memory, ftz, floor, perf, trainer, core_ops, optim.
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


def wanted(section):
    return ONLY is None or section in ONLY


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
}
BEST = ("torch PASSIVE+SkylakeX", "torch PASSIVE+default kernel")


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


REPORT = {"quick": QUICK, "rounds": ROUNDS, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "sections": {}}


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


# ---- training throughput ------------------------------------------------------------------------------
TRAIN_ALL = [
    # name, model, batch, steps (full, quick), warmup, metric
    ("MLP b64", "mlp", 64, (600, 150), 50),
    ("MLP b256", "mlp", 256, (200, 50), 20),
    ("LeNet-5 b64", "lenet", 64, (200, 40), 10),
    ("tiny b1", "tiny", 1, (20000, 5000), 5000),
    ("tiny b8", "tiny", 8, (20000, 5000), 5000),
]
TRAIN = [w for w in TRAIN_ALL if not os.environ.get("BENCH_WORKLOADS") or w[0] in os.environ["BENCH_WORKLOADS"].split(",")]
FLOOR_MODELS = {"MLP b64": ("mlp", 64), "MLP b256": ("mlp", 256), "LeNet-5 b64": ("lenet", 64)}


def section_train():
    sides = ["lutra"] + list(TORCH_SIDES)
    res = {w[0]: {s: [] for s in sides + ["GEMM-only floor"]} for w in TRAIN}
    extras = {w[0]: {s: [] for s in sides} for w in TRAIN}
    floors = {}
    for rnd in range(ROUNDS):
        print("  round %d/%d (load %.2f)" % (rnd + 1, ROUNDS, load_avg()), flush=True)
        for name, model, batch, steps, warmup in TRAIN:
            st = steps[1] if QUICK else steps[0]
            wargs = ["model=" + model, "batch=%d" % batch, "steps=%d" % st, "warmup=%d" % warmup]
            # alternate which side goes first from round to round
            order = sides if rnd % 2 == 0 else sides[::-1]
            for s in order:
                r = run_side(s, wargs)
                res[name][s].append(r["step_us"])
                extras[name][s].append(r)
            if name in FLOOR_MODELS:
                f = gemm_floor(*FLOOR_MODELS[name])
                res[name]["GEMM-only floor"].append(f["ms_per_step"] * 1e3)
                floors.setdefault(name, []).append(f)
    rows = []
    summary = {}
    for name, model, batch, _, _ in TRAIN:
        m = {s: med(v) for s, v in res[name].items()}
        best_label = min(BEST, key=lambda s: m[s])
        lut = m["lutra"]
        row_sum = {"batch": batch, "step_us": m, "best_torch": best_label,
                   "peak_rss_kb": {s: med([x["peak_rss_kb"] for x in extras[name][s]]) for s in sides},
                   "loss": {s: extras[name][s][-1].get("loss") for s in sides},
                   "system_allocs": med([x.get("system_allocs") for x in extras[name]["lutra"]]),
                   "raw_step_us": res[name]}
        summary[name] = row_sum
        for s in sides + ["GEMM-only floor"]:
            if m[s] is None:
                continue
            sps = batch / (m[s] * 1e-6)
            ratio = m[s] / lut
            rows.append([name if s == "lutra" else "", s + (" (best)" if s == best_label else ""),
                         fmt(m[s], 2), fmt(sps), "%.2fx" % ratio if s != "lutra" else "1.00x",
                         fmt(row_sum["peak_rss_kb"].get(s, None) and row_sum["peak_rss_kb"][s] / 1024, 0)
                         if s in row_sum["peak_rss_kb"] else "-"])
        if name in floors:
            row_sum["floor"] = floors[name][len(floors[name]) // 2]
    table("Training steps (median of %d rounds; ratio = that side's step time / lutra's: >1 means lutra is faster)"
          % ROUNDS, ["workload", "side", "step us", "samples/s", "ratio", "peak RSS MB"], rows)
    REPORT["sections"]["train"] = summary
    return summary


# ---- batch-1 MLP with and without flushing denormals --------------------------------------------------
def section_batch1():
    warm, st = (600, 300) if QUICK else (1500, 500)
    wargs = ["model=mlp", "batch=1", "steps=%d" % st, "warmup=%d" % warm]
    variants = [
        ("lutra FTZ on (default)", "lutra", ["ftz=1"]),
        ("lutra FTZ off", "lutra", ["ftz=0"]),
        ("torch PASSIVE+SkylakeX, FTZ off (default)", "torch PASSIVE+SkylakeX", ["ftz=0"]),
        ("torch PASSIVE+SkylakeX, FTZ on", "torch PASSIVE+SkylakeX", ["ftz=1"]),
        ("torch PASSIVE+default kernel, FTZ off", "torch PASSIVE+default kernel", ["ftz=0"]),
        ("torch PASSIVE+default kernel, FTZ on", "torch PASSIVE+default kernel", ["ftz=1"]),
        ("torch default settings (FTZ off)", "torch default settings", ["ftz=0"]),
    ]
    res = {v[0]: [] for v in variants}
    rounds = max(1, ROUNDS - 2) if not QUICK else 1
    for rnd in range(rounds):
        print("  batch-1 round %d/%d (load %.2f)" % (rnd + 1, rounds, load_avg()), flush=True)
        order = variants if rnd % 2 == 0 else variants[::-1]
        for label, side, extra in order:
            r = run_side(side, wargs + extra)
            res[label].append(r["step_us"])
    m = {k: med(v) for k, v in res.items()}
    lut = m["lutra FTZ on (default)"]
    rows = [[k, fmt(v, 1), "%.2fx" % (v / lut)] for k, v in m.items()]
    table("MLP 784-512-256-10 at batch 1 on Fashion-MNIST, per-step time after %d warm-up steps (median of %d rounds;"
          " ratio = step time / lutra's default)" % (warm, rounds), ["variant", "step us", "ratio"], rows)
    REPORT["sections"]["batch1"] = {"step_us": m, "raw": res, "warmup": warm, "steps": st}


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
              "with the Prescott kernel PyTorch gets by default: %.3f ms/step, %.1f GFLOP/s"
              % (model, batch, f["ms_per_step"], f["mflop_per_step"], f["gflops"], f["corename"], f["threads"],
                 fp["ms_per_step"], fp["gflops"]))
        for g in f["gemms"]:
            print("   " + g)
    REPORT["sections"]["floor"] = rep


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
            os.unlink(data)
            step_ms = r["step_us"] / 1e3
            gfl = fl["mflop_per_step"] / step_ms  # MFLOP per ms = GFLOP/s
            rows.append([name if side == "lutra" else "", side, fmt(step_ms, 3), "%.0f%%" % (share * 100),
                         fmt(step_ms * share, 3), fmt(fl["ms_per_step"], 3), fmt(gfl, 1), fmt(fl["gflops"], 1),
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
def paired(lua_file, py_file, title):
    lua_out, _ = run([LUTRA, os.path.join(ROOT, lua_file)], env(BENCH_THREADS="2"))
    py_out, _ = run([PY, os.path.join(ROOT, py_file)], env(OMP_WAIT_POLICY="PASSIVE", OPENBLAS_CORETYPE="SkylakeX",
                                                          BENCH_THREADS="2"))

    def lines(out):
        d = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                try:
                    d[" ".join(parts[:-1])] = float(parts[-1])
                except ValueError:
                    pass
        return d

    a, b = lines(lua_out), lines(py_out)
    rows, ratios = [], []
    for k in a:
        if k in b and a[k] > 0:
            ratios.append(b[k] / a[k])
            rows.append([k, fmt(a[k], 2), fmt(b[k], 2), "%.2fx" % (b[k] / a[k])])
    if ratios:
        import math
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        rows.append(["geometric mean", "", "", "%.2fx" % gm])
    table(title + " (microseconds; ratio = PyTorch / lutra: >1 means lutra is faster)",
          ["op", "lutra", "torch", "ratio"], rows)
    return {"lutra": a, "torch": b}


def main():
    print("lutra bench: %s, %d rounds, %s" % ("quick" if QUICK else "full", ROUNDS, REPORT["date"]))
    print("lutra binary: %s" % LUTRA)
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
        print("CPU: %s x %d, load average now %.2f" % (cpu[0], len(cpu), load_avg()))
    except OSError:
        pass
    sys.stdout.flush()
    train = None
    if wanted("floor"):
        section_floor()
    if wanted("train"):
        train = section_train()
    if wanted("batch1"):
        section_batch1()
    if wanted("memory"):
        section_memory()
    if wanted("ftz"):
        section_ftz()
    if wanted("perf"):
        section_perf(train)
    if wanted("trainer"):
        section_trainer()
    if wanted("core_ops"):
        REPORT["sections"]["core_ops"] = paired("bench/core_ops.lua", "bench/core_ops_torch.py", "Core ops")
    if wanted("optim") and os.path.exists(os.path.join(ROOT, "bench/optim_bench_torch.py")):
        REPORT["sections"]["optim"] = paired("bench/optim_bench.lua", "bench/optim_bench_torch.py", "Optimizer steps")
    if train:
        bars(train)
    if JSON_OUT:
        with open(JSON_OUT, "w") as f:
            json.dump(REPORT, f, indent=1, default=str)


def bars(train):
    rows = []
    if "MLP b64" not in train or "LeNet-5 b64" not in train:
        return
    m = train["MLP b64"]["step_us"]
    best = train["MLP b64"]["best_torch"]
    lut = m["lutra"]
    rows.append(["MLP b64 >= 1.4x PyTorch best", "%.2fx" % (m[best] / lut), m[best] / lut >= 1.4])
    if m.get("GEMM-only floor"):
        rows.append(["MLP b64 >= 75% of GEMM-only floor", "%.0f%%" % (m["GEMM-only floor"] / lut * 100),
                     m["GEMM-only floor"] / lut >= 0.75])
    rows.append(["MLP b64 >= 8x PyTorch default settings", "%.2fx" % (m["torch default settings"] / lut),
                 m["torch default settings"] / lut >= 8])
    l = train["LeNet-5 b64"]["step_us"]
    lb = train["LeNet-5 b64"]["best_torch"]
    rows.append(["LeNet b64 >= 1.3x PyTorch best", "%.2fx" % (l[lb] / l["lutra"]), l[lb] / l["lutra"] >= 1.3])
    b1 = REPORT["sections"].get("batch1")
    if b1:
        s = b1["step_us"]
        lt_ = s["lutra FTZ on (default)"]
        best_off = min(s["torch PASSIVE+SkylakeX, FTZ off (default)"], s["torch PASSIVE+default kernel, FTZ off"])
        best_on = min(s["torch PASSIVE+SkylakeX, FTZ on"], s["torch PASSIVE+default kernel, FTZ on"])
        rows.append(["MLP b1 step >= 5x faster than PyTorch best (its default FTZ off)", "%.2fx" % (best_off / lt_),
                     best_off / lt_ >= 5])
        rows.append(["  ... against PyTorch best with FTZ on", "%.2fx" % (best_on / lt_), best_on / lt_ >= 5])
    mem = REPORT["sections"].get("memory")
    if mem:
        r = mem["results"]
        e = mem["epochs"]
        lr_, tr = r["lutra"], r["torch PASSIVE+SkylakeX"]
        rows.append(["peak RSS <= PyTorch's (MLP b64)", "%.0f vs %.0f MB" % (lr_["peak_rss_kb"] / 1024,
                                                                        tr["peak_rss_kb"] / 1024),
                     lr_["peak_rss_kb"] <= tr["peak_rss_kb"]])
        g = (lr_["rss_epoch%d_kb" % e] - lr_["rss_epoch1_kb"]) / lr_["rss_epoch1_kb"] * 100
        rows.append(["RSS growth epoch 1 -> %d <= 2%%" % e, "%+.2f%%" % g, g <= 2])
    table("Bars of issue 8", ["bar", "measured", "met"], [[a, b, "yes" if c else "NO"] for a, b, c in rows])
    REPORT["bars"] = rows


if __name__ == "__main__":
    main()
