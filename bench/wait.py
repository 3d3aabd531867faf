# bench/wait.py — how lutra's threads wait: wall and CPU time per step (bench/wait_steps.lua: MLP b64, LSTM
# word model, tiny GPT) and the sched_yield / futex calls of a run (strace -c -f), for this build and,
# optionally, another lutra binary (the code before a change), alternating, medians of the rounds.
#   /usr/bin/python3 bench/wait.py [--contended] [--old BIN] [--rounds N] [--no-strace] [mlp,lstm,gpt]
# --contended: one busy process per CPU runs beside both sides for the whole measurement (a shared machine).
# One summary line per workload: "<name>: wall new/old ... cpu new/old ... ratio old/new (>1: new is faster)".
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEW = os.environ.get("LUTRA_BIN", os.path.join(ROOT, "build/bin/release/cli/lutra"))
args = sys.argv[1:]
old, rounds, contended, strace = None, 3, "--contended" in args, "--no-strace" not in args
work = ["mlp", "lstm", "gpt"]
STEPS = {"mlp": 200, "lstm": 8, "gpt": 15}
i = 0
while i < len(args):
    if args[i] == "--old":
        old, i = args[i + 1], i + 1
    elif args[i] == "--rounds":
        rounds, i = int(args[i + 1]), i + 1
    elif not args[i].startswith("--"):
        work = args[i].split(",")
    i += 1
sides = [("new", NEW)] + ([("old", old)] if old else [])
env = dict(os.environ, BENCH_THREADS="2")
env.pop("OPENBLAS_NUM_THREADS", None)


def step(binary, w):
    out = subprocess.run([binary, os.path.join(ROOT, "bench/wait_steps.lua"), w, str(STEPS[w])], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    m = re.search(r"WAIT \S+ wall_us=([\d.]+) cpu_us=([\d.]+)", out.stdout)
    if not m:
        raise RuntimeError("%s %s: %s%s" % (binary, w, out.stdout[-2000:], out.stderr[-2000:]))
    return float(m.group(1)), float(m.group(2))


def calls(binary, w):
    with tempfile.NamedTemporaryFile(suffix=".strace") as f:
        subprocess.run(["strace", "-c", "-f", "-e", "trace=sched_yield,futex", "-o", f.name, binary,
                        os.path.join(ROOT, "bench/wait_steps.lua"), w, str(STEPS[w])], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        got = {"sched_yield": 0, "futex": 0}
        for line in open(f.name):
            p = line.split()
            if p and p[-1] in got:
                got[p[-1]] = int(p[3] if len(p) >= 6 else p[3])
        return got


busy = []
if contended:
    busy = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 1)]
try:
    load = open("/proc/loadavg").read().split()[0]
    print("bench/wait: %s, %d rounds, load %s%s" % ("contended (%d busy processes)" % len(busy) if contended
                                                     else "no busy processes", rounds, load,
                                                     ", old = " + old if old else ""), flush=True)
    for w in work:
        res = {s: [] for s, _ in sides}
        for r in range(rounds):
            for s, b in (sides if r % 2 == 0 else sides[::-1]):
                res[s].append(step(b, w))
        med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for s, v in res.items()}
        line = "%s (%d steps): wall/step new %.0f us, cpu/step new %.0f us" % (w, STEPS[w], med["new"][0],
                                                                            med["new"][1])
        if old:
            line += "; old %.0f / %.0f us; ratio old/new wall %.2fx cpu %.2fx" % (
                med["old"][0], med["old"][1], med["old"][0] / med["new"][0], med["old"][1] / med["new"][1])
        if strace:
            for s, b in sides:
                c = calls(b, w)
                line += "; %s: %d sched_yield %d futex" % (s, c["sched_yield"], c["futex"])
        print(line, flush=True)
finally:
    for p in busy:
        p.kill()
        p.wait()
