/*
 * test_fileio.c — what an atomic whole-file write (core/src/fileio.c) may replace, and that nothing can
 * redirect it: a symbolic link planted under the old predictable temporary name, a FIFO, a device node, a
 * socket or a directory at the path, a symlink at the path (followed; the link stays), the replaced file's
 * mode and owner, a directory the process cannot write, and two threads — raw C writers, and two lua_States
 * running lt.save/lt.load — writing one path 2 x 200 times.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include "lt_fileio.h"
#include "lutra.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

static int npass, nfail;
static char tmpdir[64];

static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf(ok ? "ok - " : "not ok - ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok) npass++;
  else nfail++;
}

static const char *tpath(const char *name) {
  static char buf[16][512]; /* rotating: a returned path stays valid for 15 more calls */
  static int k;
  char *p = buf[k++ % 16];
  snprintf(p, 512, "%s/%s", tmpdir, name);
  return p;
}

static void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* The whole file as a NUL-terminated string ("" when it cannot be read). */
static const char *slurp(const char *path) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  p[0] = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return p;
  size_t n = fread(p, 1, 255, f);
  p[n] = 0;
  fclose(f);
  return p;
}

static int write_text(const char *path, const char *text, char *err, size_t errlen) {
  lt_chunk c = { text, strlen(text) };
  return lt_file_write_atomic("save", path, &c, 1, err, errlen);
}

/* Number of entries of tmpdir whose name contains ".tmp." (temporary files left behind). */
static int count_temps(void) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '\\.tmp\\.'", tmpdir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
  }
  return n;
}

/* ---- a planted link under the old temporary name ---- */

static void test_planted_link(void) {
  char err[1024], old_tmp[600];
  const char *p = tpath("planted.ckpt"), *victim = tpath("victim.txt");
  spit(victim, "the victim's data");
  snprintf(old_tmp, sizeof old_tmp, "%s.tmp.%ld", p, (long)getpid());
  int linked = symlink(victim, old_tmp) == 0;
  int rc = write_text(p, "new checkpoint", err, sizeof err);
  check(linked && rc == 0 && strcmp(slurp(p), "new checkpoint") == 0,
        "a save with a symlink planted at <path>.tmp.<pid> succeeds (%s)", rc ? err : "written");
  check(strcmp(slurp(victim), "the victim's data") == 0, "... and the link's target (the victim) is untouched");
  struct stat st;
  check(lstat(old_tmp, &st) == 0 && S_ISLNK(st.st_mode), "... and the planted link itself is left as it was");
  unlink(old_tmp);
}

/* ---- what a save refuses to replace ---- */

static void check_refused(const char *path, const char *what, mode_t type) {
  char err[1024], want[1024];
  snprintf(want, sizeof want, "save: %s: is %s, not a regular file; nothing was written", path, what);
  int rc = write_text(path, "x", err, sizeof err);
  check(rc == -1 && strcmp(err, want) == 0, "a save to %s is refused: %s", what, rc ? err : "(it succeeded)");
  struct stat st;
  check(lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type && count_temps() == 0,
        "... it is still %s, and no temporary file is left", what);
}

static void test_refusals(void) {
  /* A FIFO: refused without opening it, so the process does not block waiting for a reader. Run in a child
   * with an alarm: a save that blocks dies of SIGALRM instead of hanging the test. */
  const char *fifo = tpath("fifo");
  mkfifo(fifo, 0644);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(5);
    char err[1024], want[1024];
    snprintf(want, sizeof want, "save: %s: is a FIFO (named pipe), not a regular file; nothing was written", fifo);
    int rc = write_text(fifo, "x", err, sizeof err);
    _exit(rc == -1 && strcmp(err, want) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a save to a FIFO returns at once with a refusal (%s)",
        WIFSIGNALED(status) ? "the child blocked and was killed" : "exit status checked");
  check_refused(fifo, "a FIFO (named pipe)", S_IFIFO);

  const char *dir = tpath("adir");
  mkdir(dir, 0755);
  check_refused(dir, "a directory", S_IFDIR);

  const char *sock = tpath("sock");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  if (s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0) check_refused(sock, "a socket", S_IFSOCK);
  else check(0, "could not make a socket to test with: %s", strerror(errno));
  if (s >= 0) close(s);

  /* A device node (as root: a copy of /dev/null's numbers made with mknod here, never a real /dev entry). */
  const char *dev = tpath("devnull");
  if (geteuid() == 0) {
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) check_refused(dev, "a character device", S_IFCHR);
    else check(0, "as root, mknod of a character device failed: %s", strerror(errno));
  } else {
    printf("# not root: the device-node case (mknod) is checked only as root\n");
  }

  /* The same through a link: the message names the link and where it leads. */
  char err[1024], want[1024];
  const char *link = tpath("to_fifo");
  symlink("fifo", link);
  snprintf(want, sizeof want,
           "save: %s: is a symbolic link to %s/fifo, which is a FIFO (named pipe), not a regular file; nothing "
           "was written",
           link, tmpdir);
  int rc = write_text(link, "x", err, sizeof err);
  check(rc == -1 && strcmp(err, want) == 0, "a link to a FIFO is refused, naming both: %s", err);
}

/* ---- symbolic links at the path ---- */

static void test_links(void) {
  char err[1024];
  struct stat st;
  /* a chain: link1 -> sub/link2 (relative to link1's directory) -> ../real (relative to sub/) */
  mkdir(tpath("sub"), 0755);
  spit(tpath("real.ckpt"), "old");
  symlink("../real.ckpt", tpath("sub/link2"));
  symlink("sub/link2", tpath("link1"));
  int rc = write_text(tpath("link1"), "new through two links", err, sizeof err);
  check(rc == 0 && strcmp(slurp(tpath("real.ckpt")), "new through two links") == 0,
        "a save through a chain of two relative links writes the file at its end (%s)", rc ? err : "ok");
  check(lstat(tpath("link1"), &st) == 0 && S_ISLNK(st.st_mode) && lstat(tpath("sub/link2"), &st) == 0 &&
            S_ISLNK(st.st_mode),
        "... and both links stay links");
  check(count_temps() == 0, "... and no temporary file is left in either directory");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -a %s/sub | grep -q '\\.tmp\\.'", tmpdir);
  check(system(cmd) != 0, "... nor in the links' directory");

  /* an absolute link whose target does not exist yet: the target is created */
  char abs[600];
  snprintf(abs, sizeof abs, "%s/sub/created.ckpt", tmpdir);
  symlink(abs, tpath("dangling"));
  rc = write_text(tpath("dangling"), "created", err, sizeof err);
  check(rc == 0 && strcmp(slurp(abs), "created") == 0 && lstat(tpath("dangling"), &st) == 0 && S_ISLNK(st.st_mode),
        "a dangling absolute link: its target is created, the link stays (%s)", rc ? err : "ok");

  /* a loop */
  symlink("loop_b", tpath("loop_a"));
  symlink("loop_a", tpath("loop_b"));
  char want[1024];
  snprintf(want, sizeof want, "save: %s: cannot follow its symbolic links: Too many levels of symbolic links",
           tpath("loop_a"));
  rc = write_text(tpath("loop_a"), "x", err, sizeof err);
  check(rc == -1 && strcmp(err, want) == 0, "a loop of links is an error: %s", err);
}

/* ---- the replaced file's mode and owner ---- */

/* The permission bits of path after a save of text to it (-1 when the save or the stat failed). */
static int mode_after_save(const char *path, const char *text) {
  char err[1024];
  struct stat st;
  if (write_text(path, text, err, sizeof err) != 0) {
    printf("#   %s\n", err);
    return -1;
  }
  return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static void test_mode(void) {
  const char *p = tpath("private.ckpt");
  spit(p, "secret v1");
  chmod(p, 0600);
  int m = mode_after_save(p, "secret v2");
  check(m == 0600 && strcmp(slurp(p), "secret v2") == 0, "a 0600 file stays 0600 after a save (mode %o)", m);
  chmod(p, 0640);
  m = mode_after_save(p, "v3");
  check(m == 0640, "a 0640 file stays 0640 (mode %o)", m);

  mode_t old_mask = umask(027);
  m = mode_after_save(tpath("fresh.ckpt"), "new");
  umask(old_mask);
  check(m == 0640, "a new file gets 0666 & ~umask (umask 027: mode %o)", m);

  if (geteuid() == 0) {
    const char *q = tpath("owned.ckpt");
    spit(q, "theirs");
    int chowned = chown(q, 4321, 8765) == 0 && chmod(q, 0604) == 0;
    m = mode_after_save(q, "still theirs");
    struct stat st = { 0 };
    stat(q, &st);
    check(chowned && m == 0604 && st.st_uid == 4321 && st.st_gid == 8765,
          "as root, the replaced file's owner, group and mode are kept (%d:%d %o)", (int)st.st_uid, (int)st.st_gid, m);
  }
}

/* ---- a directory the process cannot write ---- */

static void test_readonly_dir(void) {
  const char *dir = tpath("ro"), *p = tpath("ro/keep.ckpt");
  mkdir(dir, 0755);
  spit(p, "old and whole");
  chmod(p, 0666);
  chmod(dir, 0555);
  /* Root writes anywhere: the save runs in a child that gives up root first. */
  chmod(tmpdir, 0755);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    char err[1024], want[1024];
    snprintf(want, sizeof want, "save: %s: cannot create temporary file %s.tmp.%ld.", p, p, (long)getpid());
    int rc = write_text(p, "new", err, sizeof err);
    const char *tail = ": Permission denied";
    size_t el = strlen(err), tl = strlen(tail);
    int ok = rc == -1 && strncmp(err, want, strlen(want)) == 0 && el > tl && strcmp(err + el - tl, tail) == 0;
    if (!ok) printf("#   got: %s\n", err);
    fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a save into a read-only directory fails naming the path, the temporary file and 'Permission denied'");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -a %s | grep -q '\\.tmp\\.'", dir);
  check(strcmp(slurp(p), "old and whole") == 0 && system(cmd) != 0,
        "... the old file is intact and no temporary file is left");
  chmod(dir, 0755);
}

/* ---- two threads, one path ---- */

#define ROUNDS 200
#define BODY 65536

typedef struct writer {
  const char *path;
  int id, save_failures, bad_reads;
  char msg[1024];
} writer;

/* Each save is BODY bytes: a header "<id> <round>\n" and then a pattern that depends on both, so a reader can
 * tell a whole file from a mix of two. */
static void fill(char *buf, int id, int round) {
  int h = snprintf(buf, 32, "%d %d\n", id, round);
  for (int i = h; i < BODY; i++) buf[i] = (char)('a' + (id * 7 + round * 13 + i) % 26);
}

static int whole(const char *path) {
  void *data;
  size_t len;
  char err[1024];
  if (lt_file_read_all("read", path, &data, &len, err, sizeof err) != 0) return 0;
  int id, round, ok = len == BODY && sscanf(data, "%d %d", &id, &round) == 2;
  if (ok) {
    static __thread char want[BODY];
    fill(want, id, round);
    ok = memcmp(want, data, BODY) == 0;
  }
  lt_file_free(data);
  return ok;
}

static void *c_writer(void *arg) {
  writer *w = arg;
  char *buf = malloc(BODY);
  for (int r = 0; r < ROUNDS && buf; r++) {
    fill(buf, w->id, r);
    lt_chunk c = { buf, BODY };
    if (lt_file_write_atomic("save", w->path, &c, 1, w->msg, sizeof w->msg) != 0) w->save_failures++;
    if (!whole(w->path)) w->bad_reads++;
  }
  free(buf);
  return NULL;
}

/* The same through lutra itself: each thread has its own lua_State, saves a checkpoint and loads the file
 * back (lt.load verifies the checksum), ROUNDS times. */
static const char *STATE_LOOP =
    "local lt = require 'lutra'\n"
    "local path, id, rounds = ...\n"
    "local save_failures, bad_loads, msg = 0, 0, ''\n"
    "for r = 1, rounds do\n"
    "  local v = id * 1000 + r\n"
    "  local ok, e = pcall(lt.save, path, { w = lt.full({ 4096 }, v), step = lt.tensor({ v }) })\n"
    "  if not ok then save_failures = save_failures + 1; msg = tostring(e) end\n"
    "  local okl, sd = pcall(lt.load, path)\n"
    "  if not okl or sd.w:numel() ~= 4096 or sd.w:min():item() ~= sd.step[1]:item()\n"
    "      or sd.w:max():item() ~= sd.step[1]:item() then\n"
    "    bad_loads = bad_loads + 1; msg = okl and 'inconsistent file' or tostring(sd)\n"
    "  end\n"
    "end\n"
    "return save_failures, bad_loads, msg\n";

static void *state_writer(void *arg) {
  writer *w = arg;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  if (luaL_loadstring(L, STATE_LOOP) != 0) {
    snprintf(w->msg, sizeof w->msg, "%s", lua_tostring(L, -1));
    w->save_failures = -1;
  } else {
    lua_pushstring(L, w->path);
    lua_pushinteger(L, w->id);
    lua_pushinteger(L, ROUNDS);
    if (lua_pcall(L, 3, 3, 0) != 0) {
      snprintf(w->msg, sizeof w->msg, "%s", lua_tostring(L, -1));
      w->save_failures = -1;
    } else {
      w->save_failures = (int)lua_tointeger(L, -3);
      w->bad_reads = (int)lua_tointeger(L, -2);
      snprintf(w->msg, sizeof w->msg, "%s", lua_tostring(L, -1));
    }
  }
  lua_close(L);
  return NULL;
}

static void two_threads(void *(*fn)(void *), const char *path, const char *what) {
  writer w[2] = { { path, 1, 0, 0, "" }, { path, 2, 0, 0, "" } };
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fn, &w[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  int fails = w[0].save_failures + w[1].save_failures, bad = w[0].bad_reads + w[1].bad_reads;
  check(w[0].save_failures == 0 && w[1].save_failures == 0,
        "%s, two threads saving 2 x %d times to one path: every save succeeds (%d failed%s%s)", what, ROUNDS, fails,
        fails ? ": " : "", w[0].save_failures ? w[0].msg : w[1].msg);
  check(bad == 0, "... and every read of the file after a save finds a whole file (%d did not%s%s)", bad,
        bad ? ": " : "", w[0].bad_reads ? w[0].msg : w[1].msg);
  check(count_temps() == 0, "... and no temporary file is left");
}

static void test_threads(void) {
  two_threads(c_writer, tpath("shared.bin"), "lt_file_write_atomic");
  two_threads(state_writer, tpath("shared.ckpt"), "two lua_States running lt.save / lt.load");
  char err[1024];
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "lutra");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "load");
  lua_pushstring(L, tpath("shared.ckpt"));
  int rc = lua_pcall(L, 1, 1, 0);
  snprintf(err, sizeof err, "%s", rc ? lua_tostring(L, -1) : "");
  check(rc == 0, "the final checkpoint loads (%s)", rc ? err : "checksum verified");
  lua_close(L);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lt_test_fileio_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("not ok - mkdtemp: %s\n0 passed, 1 failed\n", strerror(errno));
    return 1;
  }
  test_planted_link();
  test_refusals();
  test_links();
  test_mode();
  test_readonly_dir();
  test_threads();
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
