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
