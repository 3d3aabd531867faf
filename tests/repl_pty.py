#!/usr/bin/python3
"""repl_pty.py -- drives the `lutra` REPL through a pseudo-terminal (stdlib only).

    /usr/bin/python3 tests/repl_pty.py            # all scenarios
    /usr/bin/python3 tests/repl_pty.py ctrl_c     # only scenarios whose name contains "ctrl_c"

The binary is $LUTRA_BIN, else build/bin/release/cli/lutra under the repository root. Each scenario runs in
a fresh `lutra` with HOME set to a temporary directory (history goes there) and a 100x30 terminal.
Prints "ok - NAME" or "not ok - NAME: why" per scenario and a final "N passed, M failed"; exits 0 when
none failed.

Adding a scenario: a function taking a Session, registered with @scenario("name"). Session.send types
text ("\r" is Enter, CTRL_C / CTRL_D are the control keys), Session.expect(text_or_regex) waits for
output and returns the text up to and including the match, Session.expect_prompt() waits for "> ".
Raise Failure (or fail an assert) to fail. For a scenario that needs its own files, Session.home is
the temporary HOME directory; Session(argv=[...]) starts lutra with other arguments (see run()).
"""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("LUTRA_BIN") or os.path.join(ROOT, "build", "bin", "release", "lutra")
TIMEOUT = float(os.environ.get("LUTRA_PTY_TIMEOUT", "10"))
CTRL_C = "\x03"
CTRL_D = "\x04"
PROMPT = "> "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>78]|\x07")


class Failure(Exception):
    pass


class Session:
    def __init__(self, argv=None, home=None, env=None):
        self.home = home or tempfile.mkdtemp(prefix="lutra_pty_")
        self.own_home = home is None
        environ = dict(os.environ)
        environ.update({"HOME": self.home, "TERM": "xterm", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
        environ.pop("LUA_INIT", None)
        if env:
            environ.update(env)
        argv = [BIN] + list(argv or [])
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(BIN, argv, environ)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.out = ""      # everything read so far (escape sequences removed)
        self.pos = 0       # where the next expect starts looking
        self.status = None

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            raise Failure("lutra exited; output so far:\n" + self.out[-2000:])
        self.out += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def send(self, text, delay=0.05):
        # libedit prints the prompt before it puts the terminal in raw mode; text typed in between is
        # echoed twice (once by the terminal). A short pause after the prompt avoids that race.
        if delay:
            time.sleep(delay)
        os.write(self.fd, text.encode("utf-8"))

    def expect(self, what, timeout=TIMEOUT):
        """Waits until `what` (a string, or a compiled regex) appears after the previous match."""
        deadline = time.time() + timeout
        while True:
            if isinstance(what, str):
                i = self.out.find(what, self.pos)
                end = i + len(what) if i >= 0 else -1
            else:
                m = what.search(self.out, self.pos)
                end = m.end() if m else -1
            if end >= 0:
                seen = self.out[self.pos:end]
                self.pos = end
                return seen
            left = deadline - time.time()
            if left <= 0:
                raise Failure("timed out waiting for %r; output after the last match:\n%s"
                              % (what if isinstance(what, str) else what.pattern, self.out[self.pos:]))
            self._read(min(left, 0.2))

    def expect_prompt(self, timeout=TIMEOUT):
        return self.expect(PROMPT, timeout)

    def settle(self, quiet=0.3, timeout=TIMEOUT):
        """Reads until no output came for `quiet` seconds; returns what came after the last match."""
        deadline = time.time() + timeout
        while time.time() < deadline and self._read(quiet):
            pass
        return self.out[self.pos:]

    def run(self, line):
        """Types a line and returns lutra's output up to the next prompt (the echo removed)."""
        self.send(line + "\r")
        self.expect(line)
        return self.expect_prompt()[:-len(PROMPT)].strip("\r\n")

    def close(self):
        if self.status is None:
            try:
                self.send(CTRL_D)
            except OSError:
                pass
            deadline = time.time() + 3
            while time.time() < deadline:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = status
                    break
                try:
                    self._read(0.05)
                except Failure:
                    pass
            else:
                os.kill(self.pid, signal.SIGKILL)
                _, self.status = os.waitpid(self.pid, 0)
        try:
            os.close(self.fd)
        except OSError:
            pass
        if self.own_home:
            shutil.rmtree(self.home, ignore_errors=True)


SCENARIOS = []


def scenario(name, prepare=None):
    """Registers fn(session) as a scenario; prepare(home), if given, runs before lutra starts."""
    def register(fn):
        SCENARIOS.append((name, fn, prepare))
        return fn
    return register


def check(cond, why):
    if not cond:
        raise Failure(why)


@scenario("banner and prompt")
def _(s):
    s.expect(re.compile(r"lutra \d+\.\d+\.\d+ \(LuaJIT [^)]*\)"))
    s.expect_prompt()


@scenario("expression prints its value")
def _(s):
    s.expect_prompt()
    out = s.run("1 + 2")
    check(out == "3", "expected 3, got %r" % out)
    out = s.run("'a', nil, 4")
    check(out == "a\tnil\t4", "expected tab-separated values, got %r" % out)


@scenario("statement with trailing ; prints nothing")
def _(s):
    s.expect_prompt()
    out = s.run("x = 1;")
    check(out == "", "expected no output, got %r" % out)
    out = s.run("x;")
    check(out == "", "expected no output for `x;`, got %r" % out)
    out = s.run("x")
    check(out == "1", "expected 1, got %r" % out)


@scenario("multi-line function definition")
def _(s):
    s.expect_prompt()
    s.send("function twice(a)\r")
    s.expect(">> ")
    s.send("  return a * 2\r")
    s.expect(">> ")
    s.send("end\r")
    s.expect_prompt()
    out = s.run("twice(21)")
    check(out == "42", "expected 42, got %r" % out)


@scenario("error then a later command works")
def _(s):
    s.expect_prompt()
    out = s.run("error('boom')")
    check("stdin:1: boom" in out, "no error message in %r" % out)
    check("stack traceback:" in out, "no traceback in %r" % out)
    out = s.run("nosuch.field")
    check("attempt to index global 'nosuch'" in out, "unexpected %r" % out)
    out = s.run("40 + 2")
    check(out == "42", "session did not survive the error: %r" % out)


@scenario("syntax error is reported and the session goes on")
def _(s):
    s.expect_prompt()
    out = s.run("x = = 1")
    check("unexpected symbol" in out, "unexpected %r" % out)
    out = s.run("'still here'")
    check(out == "still here", "unexpected %r" % out)


@scenario("ctrl_c at the prompt clears the line")
def _(s):
    s.expect_prompt()
    s.send("garbage(")
    s.expect("garbage(")
    s.send(CTRL_C)
    s.expect_prompt()
    out = s.run("6 * 7")
    check(out == "42", "line not cleared: %r" % out)


@scenario("ctrl_c at the continuation prompt drops the buffer")
def _(s):
    s.expect_prompt()
    s.send("function broken(\r")
    s.expect(">> ")
    s.send(CTRL_C)
    s.expect("\n" + PROMPT)
    out = s.run("'fresh'")
    check(out == "fresh", "continuation buffer not dropped: %r" % out)


@scenario("ctrl_c twice interrupts while true do end")
def _(s):
    s.expect_prompt()
    s.send("while true do end\r")
    s.expect("while true do end")
    time.sleep(0.3)
    s.send(CTRL_C)
    time.sleep(0.3)
    s.send(CTRL_C)
    out = s.expect_prompt(timeout=5)
    check("interrupted!" in out, "no 'interrupted!' in %r" % out)
    out = s.run("1 + 1")
    check(out == "2", "session did not survive the interrupt: %r" % out)


@scenario("ctrl_c twice interrupts a function that calls C in a loop")
def _(s):
    # A loop that calls a C function (as any loop over lutra ops does) returns to the interpreter at
    # each call, where the hook fires, even when the function is JIT-compiled.
    s.expect_prompt()
    s.run("function spin() local t = 0 while true do t = t + os.clock() end end")
    s.send("spin()\r")
    s.expect("spin()")
    time.sleep(0.5)
    s.send(CTRL_C)
    time.sleep(0.3)
    s.send(CTRL_C)
    out = s.expect_prompt(timeout=5)
    check("interrupted!" in out, "no 'interrupted!' in %r" % out)


@scenario("tab completes globals and fields")
def _(s):
    s.expect_prompt()
    # The completed line is run: what it prints shows what the completion inserted.
    s.send("string.for\t")
    s.expect("mat(")
    s.send("'<%d>', 5)\r")
    out = s.expect_prompt()
    check("<5>" in out, "completion of string.for failed: %r" % out)
    s.run("str = 'x'")
    s.send("str:upp\t")
    s.expect("er(")
    s.send(") .. '!'\r")
    out = s.expect_prompt()
    check("X!" in out, "completion of str:upp failed: %r" % out)


@scenario("history is saved in $HOME/.lutra_history")
def _(s):
    s.expect_prompt()
    s.run("hist_marker = 12345;")
    path = os.path.join(s.home, ".lutra_history")
    check(os.path.exists(path), "no %s" % path)
    with open(path, "rb") as f:
        data = f.read().decode("utf-8", "replace")
    check("hist_marker" in data, "line not in history: %r" % data)


def _old_history(home):
    with open(os.path.join(home, ".lutra_history"), "w") as f:
        f.write("".join("old_line_%d\n" % i for i in range(1, 1201)))


@scenario("history is read back and capped at 1000 lines", prepare=_old_history)
def _(s):
    s.expect_prompt()
    s.send("\x1b[A")  # up arrow: the last line of the old history
    s.expect("old_line_1200")
    s.send(CTRL_C)
    s.expect_prompt()
    s.run("new_line = 1;")
    with open(os.path.join(s.home, ".lutra_history"), "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    entries = [l for l in lines if not l.startswith("_HiStOrY_")]
    check(len(entries) == 1000, "expected 1000 entries, got %d" % len(entries))
    check(entries[-1].replace("\\040", " ") == "new_line = 1;", "last entry %r" % entries[-1])
    check("old_line_1200" in entries and "old_line_1" not in entries, "wrong entries kept")


@scenario("ctrl_d exits with status 0")
def _(s):
    s.expect_prompt()
    s.send(CTRL_D)
    deadline = time.time() + 5
    while time.time() < deadline:
        pid, status = os.waitpid(s.pid, os.WNOHANG)
        if pid:
            s.status = status
            break
        try:
            s._read(0.05)
        except Failure:
            pass
    check(s.status is not None, "lutra did not exit on Ctrl-D")
    check(os.WIFEXITED(s.status) and os.WEXITSTATUS(s.status) == 0, "exit status %r" % s.status)


@scenario("os.exit leaves with its status")
def _(s):
    s.expect_prompt()
    s.send("os.exit(7)\r")
    deadline = time.time() + 5
    while time.time() < deadline:
        pid, status = os.waitpid(s.pid, os.WNOHANG)
        if pid:
            s.status = status
            break
        try:
            s._read(0.05)
        except Failure:
            pass
    check(s.status is not None and os.WEXITSTATUS(s.status) == 7, "exit status %r" % s.status)


# ---- training at the prompt (Ctrl-C during fit, fit again continues, hooks redefined) ------------
# A model whose batches busy-wait DELAY seconds of CPU time, 100 batches per epoch, 3 epochs: long enough to be
# interrupted, short enough for the suite. Every line is typed at the prompt, as a user would.
FIT_SETUP = [  # each line shorter than the 100-column terminal (libedit wraps longer ones)
    "lt.manual_seed(0)",
    "ds = lt.data.TensorDataset(lt.randn(400, 8), lt.randn(400, 1))",
    "loader = lt.data.DataLoader(ds, {batch_size = 4})",
    "m = {lin = lt.nn.Linear(8, 1), calls = 0}",
    "function busy(s) local t0 = os.clock() while os.clock() - t0 < s do end end",
    "DELAY = 0.004",
    "function m:training_step(b) self.calls = self.calls + 1; busy(DELAY)",
    "  return lt.F.mse_loss(self.lin(b[1]), b[2]) end",
    "function m:configure_optimizers()",
    "  return lt.optim.SGD(lt.nn.parameters(self), {lr = 0.01}) end",
    "function m:on_train_start() print('TRAINING') end",
    "cb = {on_exception = function(self, trainer, model, err) self.err = err end}",
    "t = lt.Trainer{max_epochs = 3, callbacks = {cb}, logger = false, enable_checkpointing = false,",
    "  enable_progress_bar = false, enable_model_summary = false}",
]
FIT_TOTAL = 300


def _type_fit_setup(s):
    """Waits for the prompt and types FIT_SETUP line by line; none of its lines prints anything."""
    s.expect_prompt()
    for line in FIT_SETUP:
        s.send(line + "\r")
        s.expect(line)
        out = s.expect(re.compile(r"\n(>>?) "))  # a continuation line gets ">> "
        check(out.strip("\r\n> ") == "", "set-up line %r printed %r" % (line, out))


def _start_fit_and_interrupt(s):
    """Types the set-up, starts t:fit, presses Ctrl-C once it trains; returns (epoch, step) at the stop."""
    _type_fit_setup(s)
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect("TRAINING", timeout=30)
    time.sleep(0.3)
    s.send(CTRL_C)
    t0 = time.time()
    out = s.expect_prompt(timeout=10)
    check("interrupted!" not in out and "traceback" not in out, "Ctrl-C raised an error: %r" % out)
    check(time.time() - t0 < 5, "the prompt took %.1f s to come back" % (time.time() - t0))
    out = s.run("t.interrupted, t.global_step, m.calls, t.current_epoch, cb.err")
    fields = out.split("\t")
    check(len(fields) == 5, "unexpected %r" % out)
    check(fields[0] == "true", "trainer.interrupted is %r" % fields[0])
    step, calls, epoch = int(fields[1]), int(fields[2]), int(fields[3])
    check(0 < step < FIT_TOTAL, "global_step %d after the interrupt" % step)
    check(calls == step, "stopped at a batch boundary: %d training_step calls, %d steps" % (calls, step))
    check(fields[4] == "interrupted", "on_exception got %r" % fields[4])
    return epoch, step


@scenario("ctrl_c during fit stops at a batch boundary and fit continues exactly")
def _(s):
    _start_fit_and_interrupt(s)
    out = s.run("t.state.status")
    check(out == "interrupted", "trainer.state.status %r" % out)
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    out = s.expect_prompt(timeout=60)
    check("TRAINING" not in out, "on_train_start ran again on continuing: %r" % out)
    out = s.run("t.interrupted, t.global_step, m.calls, t.current_epoch, t.state.status")
    check(out == "false\t%d\t%d\t3\tfinished" % (FIT_TOTAL, FIT_TOTAL),
          "after continuing: %r (expected false, %d steps, %d calls, epoch 3, finished)" % (out, FIT_TOTAL, FIT_TOTAL))


@scenario("ctrl_c during fit says where it stopped and how to go on")
def _(s):
    _type_fit_setup(s)
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect("TRAINING", timeout=30)
    time.sleep(0.3)
    s.send(CTRL_C)
    out = s.expect_prompt(timeout=10)
    said = re.search(r"fit interrupted in epoch (\d+) after (\d+) of 100 batches \(global_step (\d+)\); "
                     r"trainer:fit\(model, \.\.\.\) again with this trainer and model continues from there", out)
    check(said is not None, "no word on where the fit stopped: %r" % out)
    epoch, done, step = (int(g) for g in said.groups())
    out = s.run("t.current_epoch, t.global_step")
    check(out == "%d\t%d" % (epoch, step), "the message says epoch %d, step %d; the trainer %r" % (epoch, step, out))
    check(step == epoch * 100 + done, "epoch %d, %d batches done, global_step %d" % (epoch, done, step))


@scenario("hooks defined at the prompt after ctrl_c take effect at the next epoch start")
def _(s):
    epoch, step = _start_fit_and_interrupt(s)
    check(epoch <= 1, "interrupted too late to see an epoch start (epoch %d)" % epoch)
    # training_epoch_end is new (outputs are kept from the next epoch on); on_train_epoch_start is redefined
    s.run("ends = {}")
    s.run("function m:training_epoch_end(outs) ends[#ends + 1] = #outs .. '@' .. self.current_epoch end")
    s.run("starts = {}")
    s.run("function m:on_train_epoch_start() starts[#starts + 1] = self.current_epoch end")
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect_prompt(timeout=60)
    later = list(range(epoch + 1, 3))
    out = s.run("table.concat(ends, ' ')")
    want = " ".join("100@%d" % e for e in later)
    check(out == want, "training_epoch_end calls %r, expected %r (epochs after %d, 100 outputs each)" % (out, want, epoch))
    out = s.run("table.concat(starts, ' ')")
    want = " ".join(str(e) for e in later)
    check(out == want, "the redefined on_train_epoch_start ran for %r, expected %r" % (out, want))
    out = s.run("t.global_step, m.calls")
    check(out == "%d\t%d" % (FIT_TOTAL, FIT_TOTAL), "steps and calls %r" % out)


@scenario("ctrl_c twice during fit still stops at a batch boundary")
def _(s):
    # The 2nd Ctrl-C while a run is active (lutra_run_active) only repeats the stop request: no
    # "interrupted!" error is raised inside a hook, the run stops cleanly and can continue.
    _type_fit_setup(s)
    s.run("DELAY = 0.2")  # long batches: the 2nd Ctrl-C comes while the batch of the 1st still runs
    s.run("jit.off(busy)")  # interpreted: a "interrupted!" hook, if armed, would fire in it at once
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect("TRAINING", timeout=30)
    time.sleep(0.3)
    s.send(CTRL_C, delay=0)
    time.sleep(0.05)
    s.send(CTRL_C, delay=0)
    out = s.expect_prompt(timeout=10)
    check("interrupted!" not in out and "traceback" not in out, "the 2nd Ctrl-C raised an error: %r" % out)
    out = s.run("t.interrupted, t.global_step == m.calls, t.global_step < %d" % FIT_TOTAL)
    check(out == "true\ttrue\ttrue", "after two Ctrl-C: %r" % out)
    s.run("DELAY = 0.001")
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect_prompt(timeout=60)
    out = s.run("t.global_step, m.calls")
    check(out == "%d\t%d" % (FIT_TOTAL, FIT_TOTAL), "after continuing: %r" % out)


@scenario("ctrl_c while no fit runs does not stop the next fit")
def _(s):
    # Ctrl-C twice aborts a plain computation; the stop request the 1st one made must not stay pending
    # and end the next fit at its first batch.
    _type_fit_setup(s)
    s.run("jit.off(busy)")
    s.send("busy(30)\r")
    s.expect("busy(30)")
    time.sleep(0.3)
    s.send(CTRL_C, delay=0)
    time.sleep(0.1)
    s.send(CTRL_C, delay=0)
    out = s.expect_prompt(timeout=10)
    check("interrupted!" in out, "busy(30) was not interrupted: %r" % out)
    s.run("DELAY = 0")
    s.send("t:fit(m, loader)\r")
    s.expect("t:fit(m, loader)")
    s.expect_prompt(timeout=60)
    out = s.run("t.interrupted, t.global_step")
    check(out == "false\t%d" % FIT_TOTAL, "the fit after the Ctrl-C: %r (expected false, %d)" % (out, FIT_TOTAL))


def main(argv):
    if not os.access(BIN, os.X_OK):
        print("not ok - lutra binary not found at %s (set LUTRA_BIN)" % BIN)
        print("0 passed, 1 failed")
        return 1
    wanted = argv[1:]
    passed = failed = 0
    for name, fn, prepare in SCENARIOS:
        if wanted and not any(w in name.replace(" ", "_") or w in name for w in wanted):
            continue
        s = None
        try:
            home = tempfile.mkdtemp(prefix="lutra_pty_")
            try:
                if prepare:
                    prepare(home)
                s = Session(home=home)
            finally:
                if s is None:
                    shutil.rmtree(home, ignore_errors=True)
            s.own_home = True
            fn(s)
            print("ok - %s" % name)
            passed += 1
        except Exception as e:  # a failed scenario must not stop the others
            why = str(e) if isinstance(e, (Failure, AssertionError)) else traceback.format_exc()
            if s is not None and os.environ.get("LUTRA_PTY_VERBOSE"):
                why += "\nfull output:\n" + repr(s.out)
            print("not ok - %s: %s" % (name, why.replace("\n", "\n#   ")))
            failed += 1
        finally:
            if s is not None:
                s.close()
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
