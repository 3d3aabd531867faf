/*
 * host.c — lutra embedded in a game-like C program (docs/guide-embedding.md).
 *
 * The program owns everything a game owns: its LuaJIT state, its allocator, its frame loop and its
 * screen. A puck slides in a bowl (pulled to the centre, harder far out, pushed sideways by a swirl,
 * slowed by drag) and gets kicked now and then; the world runs at 60 frames per second. Every frame the
 * host hands the Lua side (examples/embed/world.lua) the transition it just simulated, then gives
 * training a budget of 4 ms: `run:advance{seconds = 0.004}` on a small MLP that learns the world's
 * dynamics online. Every 20 frames a line shows the frame, the training loss, and a tiny view of the
 * table along each axis: `o` the puck, `*` where the model, given the state of half a second earlier and
 * nothing since, predicted it would be now (the rollout error shrinks as it learns).
 *
 *   build-embed/bin/release/embed_host [--frames N] [--budget SECONDS] [--every N] [--seed N]
 *                                      [--script PATH] [--ppm DIR] [--realtime] [--quiet]
 *
 * At the end: the time spent in advance per frame (p50/p99/max), the steps trained, and the peak of the
 * memory lutra took through the host's allocator (all of it back after lua_close + lutra_empty_cache).
 * --ppm DIR writes a 96x96 image every 6 frames (puck white, the model's half-second prediction red).
 * Exit status 0 on success; a Lua error is printed with its message and gives status 1.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lutra.h"

/* ---- the host's allocator: counts what lutra takes ---------------------------------------------- */

typedef struct counting_alloc {
  size_t live, peak, total;
  long allocs, frees;
} counting_alloc;

static void *count_alloc(void *ud, size_t size, size_t align) {
  counting_alloc *a = ud;
  void *p = NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0) return NULL;
  a->live += size;
  a->total += size;
  a->allocs++;
  if (a->live > a->peak) a->peak = a->live;
  return p;
}

static void count_free(void *ud, void *p, size_t size) {
  counting_alloc *a = ud;
  a->live -= size;
  a->frees++;
  free(p);
}

/* ---- the world ------------------------------------------------------------------------------------- */

#define DT (1.0 / 60.0)
#define SPRING 12.0   /* the bowl: pull towards the centre, stiffer far out */
#define STIFFEN 3.0
#define SWIRL 2.0     /* a sideways force: the puck circles */
#define DRAG 0.6
#define KICK_EVERY 90 /* frames */
#define HORIZON 30    /* the prediction shown: this many frames ahead */

typedef struct ball { double x, y, vx, vy; } ball;

static uint64_t rng_state;
static double rng_uniform(void) { /* xorshift64*: the host's own RNG, seeded by --seed */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* One frame of a puck in a bowl with a swirl and drag (semi-implicit Euler): smooth, nonlinear dynamics
 * the model has to discover from the transitions alone. */
static ball world_step(ball b) {
  double dx = b.x - 0.5, dy = b.y - 0.5, k = SPRING * (1 + STIFFEN * (dx * dx + dy * dy));
  double ax = -k * dx - SWIRL * dy - DRAG * b.vx;
  double ay = -k * dy + SWIRL * dx - DRAG * b.vy;
  ball n;
  n.vx = b.vx + ax * DT;
  n.vy = b.vy + ay * DT;
  n.x = b.x + n.vx * DT;
  n.y = b.y + n.vy * DT;
  return n;
}

/* ---- calling the Lua side --------------------------------------------------------------------------- */

static int learner_ref = LUA_NOREF;

static void die_lua(lua_State *L, const char *what) {
  fprintf(stderr, "embed_host: %s: %s\n", what, lua_tostring(L, -1));
  lua_close(L);
  exit(1);
}

/* learner[name](args on the stack): calls with nargs arguments, leaves nres results */
static void push_method(lua_State *L, const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, learner_ref);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

static void call(lua_State *L, const char *name, int nargs, int nres) {
  if (lua_pcall(L, nargs, nres, 0) != 0) die_lua(L, name);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- rendering -------------------------------------------------------------------------------------- */

static int cell(double v, int width) { /* a position in [0, 1] (clamped) to a column */
  v = v < 0 ? 0 : v > 1 ? 1 : v;
  return (int)lround(v * (width - 1));
}

static void strip(char *out, int width, double ball, double pred) {
  for (int i = 0; i < width; i++) out[i] = '.';
  int pb = cell(ball, width), pp = cell(pred, width);
  if (pp >= 0 && pp < width) out[pp] = '*';
  if (pb >= 0 && pb < width) out[pb] = (pb == pp) ? '@' : 'o';
  out[width] = 0;
}

#define IMG 96
static int write_ppm(const char *dir, long frame, ball b, double px, double py, int have_pred) {
  static unsigned char img[IMG * IMG * 3];
  char path[4096];
  memset(img, 24, sizeof img);
  struct { double x, y; unsigned char r, g, bl; int on; } dots[2] = {
    { px, py, 230, 40, 40, have_pred }, { b.x, b.y, 250, 250, 250, 1 }
  };
  for (int d = 0; d < 2; d++) {
    if (!dots[d].on) continue;
    double cx = dots[d].x * (IMG - 1), cy = (1 - dots[d].y) * (IMG - 1);
    for (int yy = 0; yy < IMG; yy++)
      for (int xx = 0; xx < IMG; xx++)
        if ((xx - cx) * (xx - cx) + (yy - cy) * (yy - cy) <= 9.0) {
          unsigned char *p = img + 3 * (yy * IMG + xx);
          p[0] = dots[d].r; p[1] = dots[d].g; p[2] = dots[d].bl;
        }
  }
  snprintf(path, sizeof path, "%s/frame_%05ld.ppm", dir, frame);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fprintf(f, "P6\n%d %d\n255\n", IMG, IMG);
  size_t n = fwrite(img, 1, sizeof img, f);
  return (fclose(f) == 0 && n == sizeof img) ? 0 : -1;
}

/* ---- main ------------------------------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: embed_host [--frames N] [--budget SECONDS] [--every N] [--seed N] [--script PATH]\n"
                  "                  [--ppm DIR] [--realtime] [--quiet]\n");
}

int main(int argc, char **argv) {
  long frames = 600, every = 20, seed = 1;
  double budget = 0.004;
  const char *script = "examples/embed/world.lua", *ppm = NULL;
  int realtime = 0, quiet = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--realtime")) realtime = 1;
    else if (!strcmp(a, "--quiet")) quiet = 1;
    else if (v && !strcmp(a, "--frames")) { frames = atol(v); i++; }
    else if (v && !strcmp(a, "--every")) { every = atol(v); i++; }
    else if (v && !strcmp(a, "--seed")) { seed = atol(v); i++; }
    else if (v && !strcmp(a, "--budget")) { budget = atof(v); i++; }
    else if (v && !strcmp(a, "--script")) { script = v; i++; }
    else if (v && !strcmp(a, "--ppm")) { ppm = v; i++; }
    else { usage(); return 2; }
  }
  if (frames < 1 || every < 1 || budget <= 0) { usage(); return 2; }
  if (ppm && mkdir(ppm, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "embed_host: cannot create %s: %s\n", ppm, strerror(errno));
    return 1;
  }

  /* 1. the host's allocator, before lutra allocates anything */
  counting_alloc counter = { 0 };
  lutra_allocator al = { count_alloc, count_free, &counter };
  if (lutra_set_allocator(&al) != 0) { fprintf(stderr, "embed_host: lutra_set_allocator failed\n"); return 1; }

  /* 2. the host's own Lua state, lutra added to it */
  lua_State *L = luaL_newstate();
  if (!L) { fprintf(stderr, "embed_host: cannot create a Lua state\n"); return 1; }
  luaL_openlibs(L);
  lutra_preload(L);

  /* 3. the learner: world.lua returns a constructor */
  if (luaL_loadfile(L, script) != 0) die_lua(L, "loading the script");
  call(L, script, 0, 1);
  lua_newtable(L);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_setfield(L, -2, "seed");
  lua_pushnumber(L, DT);
  lua_setfield(L, -2, "dt");
  call(L, "world.lua constructor", 1, 1);
  if (!lua_istable(L, -1)) { fprintf(stderr, "embed_host: %s must return a table\n", script); lua_close(L); return 1; }
  learner_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* 4. the frame loop */
  rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed * 0xBF58476D1CE4E5B9ULL;
  if (!rng_state) rng_state = 1;
  ball b = { 0.2, 0.7, 0.5, 0.0 };
  ball *history = calloc((size_t)HORIZON + 1, sizeof *history); /* ring of past states */
  double *adv = malloc((size_t)frames * sizeof *adv);
  if (!history || !adv) { fprintf(stderr, "embed_host: out of memory\n"); lua_close(L); return 1; }
  long n_adv = 0;
  double loss = 0, err_sum = 0, first_err = -1;
  long steps = 0, n_err = 0;
  double t_start = now(), next_frame = t_start;

  for (long f = 0; f < frames; f++) {
    history[f % (HORIZON + 1)] = b;
    /* simulate one frame; a kick is the player's input, not the world's dynamics: not learned from */
    int kicked = f > 0 && f % KICK_EVERY == 0;
    if (kicked) {
      b.vx += 3 * rng_uniform() - 1.5;
      b.vy += 3 * rng_uniform() - 1.5;
    }
    ball n = world_step(b);
    if (!kicked) {
      push_method(L, "observe");
      lua_pushnumber(L, b.x); lua_pushnumber(L, b.y); lua_pushnumber(L, b.vx); lua_pushnumber(L, b.vy);
      lua_pushnumber(L, n.x); lua_pushnumber(L, n.y); lua_pushnumber(L, n.vx); lua_pushnumber(L, n.vy);
      call(L, "observe", 8, 0);
    }
    b = n;

    /* train for the frame's budget */
    push_method(L, "ready");
    call(L, "ready", 0, 1);
    int ready = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (ready) {
      push_method(L, "train");
      lua_pushnumber(L, budget);
      double t0 = now();
      call(L, "train", 1, 2);
      adv[n_adv++] = now() - t0;
      loss = lua_tonumber(L, -2);
      steps = (long)lua_tointeger(L, -1);
      lua_pop(L, 2);
    }

    /* the model's prediction of now, from HORIZON frames ago (kicks in between make it miss: that is fair) */
    int show = (f + 1) % every == 0, image = ppm && (f + 1) % 6 == 0;
    if ((show || image) && f >= HORIZON) {
      ball past = history[(f + 2) % (HORIZON + 1)]; /* the state at frame f + 1 - HORIZON */
      push_method(L, "predict");
      lua_pushnumber(L, past.x); lua_pushnumber(L, past.y); lua_pushnumber(L, past.vx); lua_pushnumber(L, past.vy);
      lua_pushinteger(L, HORIZON);
      call(L, "predict", 5, 2);
      double px = lua_tonumber(L, -2), py = lua_tonumber(L, -1);
      lua_pop(L, 2);
      double err = sqrt((px - b.x) * (px - b.x) + (py - b.y) * (py - b.y));
      long p0 = f + 1 - HORIZON; /* a kick in between was not the model's to foresee: not counted */
      int fair = (f / KICK_EVERY) * KICK_EVERY < p0 || f < KICK_EVERY;
      if (show && fair) {
        if (first_err < 0) first_err = err;
        if (f >= frames / 2) { err_sum += err; n_err++; }
      }
      if (show) {
        if (!quiet) {
          char sx[25], sy[13];
          strip(sx, 24, b.x, px);
          strip(sy, 12, b.y, py);
          printf("frame %4ld  t=%5.2fs  steps %6ld  loss %8.5f  x |%s|  y |%s|  err %.3f%s\n", f + 1, (f + 1) * DT,
                 steps, loss, sx, sy, err, fair ? "" : " (kicked)");
          fflush(stdout);
        }
      }
      if (image && write_ppm(ppm, f + 1, b, px, py, 1) != 0) {
        fprintf(stderr, "embed_host: cannot write an image into %s\n", ppm);
        lua_close(L);
        return 1;
      }
    } else if (image && write_ppm(ppm, f + 1, b, 0, 0, 0) != 0) {
      fprintf(stderr, "embed_host: cannot write an image into %s\n", ppm);
      lua_close(L);
      return 1;
    }

    if (realtime) { /* a game waits for the next frame */
      next_frame += DT;
      double wait = next_frame - now();
      if (wait > 0) {
        struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
        nanosleep(&ts, NULL);
      }
    }
  }
  double wall = now() - t_start;

  /* 5. report */
  qsort(adv, (size_t)n_adv, sizeof *adv, cmp_double);
  double p50 = n_adv ? adv[(n_adv - 1) / 2] : 0;
  double p99 = n_adv ? adv[(long)ceil(0.99 * (double)n_adv) - 1] : 0;
  double mx = n_adv ? adv[n_adv - 1] : 0;
  printf("frames %ld (%.1f s simulated, %.2f s wall), training steps %ld, final loss %.5f\n", frames, frames * DT,
         wall, steps, loss);
  printf("prediction %d frames ahead (no kick in between): error %.3f at the first report, mean %.3f over the "
         "second half\n", HORIZON, first_err < 0 ? 0 : first_err, n_err ? err_sum / (double)n_err : 0);
  printf("advance{seconds=%g} per frame over %ld frames: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", budget, n_adv,
         p50 * 1e3, p99 * 1e3, mx * 1e3);

  lua_close(L);
  lutra_empty_cache();
  printf("host allocator: peak %.2f MiB live, %ld allocations, %.1f KiB still held after lua_close\n",
         (double)counter.peak / 1048576.0, counter.allocs, (double)counter.live / 1024.0);
  free(history);
  free(adv);
  return counter.live == 0 ? 0 : 1;
}
