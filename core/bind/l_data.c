/*
 * l_data.c — Lua binding for lt.data's C helpers, registered as `lutra.core._data` (the user-facing API is
 * lua/lutra/data/init.lua):
 *   read_idx(path, mode, limit)        -> tensor   mode "raw" | "float32" | "images" | "labels"
 *   rng_seed(seed)                     -> state    a loader RNG state (64 hex chars, as lt.get_rng_state)
 *   rng_draw()                         -> state    a fresh state seeded from lutra's global RNG
 *   randperm(n, state)                 -> perm, state_after   (perm: int64 [n], 1-based)
 *   gather(tensors, perm|nil, start, count) -> {batch tensors}  rows perm[start+1 .. start+count] of each
 *                                         tensor (start 0-based; without perm rows start+1 .. start+count)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_util.h"
#include "lt_data.h"
#include "lt_idx.h"

static int l_read_idx(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  const char *mode_s = l_optstring(L, 2, "raw");
  int64_t limit = lua_isnoneornil(L, 3) ? 0 : l_checkint(L, 3, "read_idx", "limit", 0, L_INT_MAX);
  lt_data_idx_mode mode;
  if (!strcmp(mode_s, "raw")) mode = LT_DATA_RAW;
  else if (!strcmp(mode_s, "float32")) mode = LT_DATA_RAW_F32;
  else if (!strcmp(mode_s, "images")) mode = LT_DATA_IMAGES;
  else if (!strcmp(mode_s, "labels")) mode = LT_DATA_LABELS;
  else return luaL_error(L, "read_idx: unknown mode '%s' (expected raw, float32, images or labels)", mode_s);
  lt_idx_data d;
  char err[1024];
  if (lt_idx_read(path, &d, err, sizeof err)) {
    lua_pushstring(L, err);
    return lua_error(L);
  }
  char what[1024];
  snprintf(what, sizeof what, "read_idx: %s", path);
  lt_tensor *t = lt_data_from_idx(L_CTX(L), &d, mode, limit, what);
  lt_idx_free(&d);
  return l_push(L, t);
}

/* ---- loader RNG states: 4 x 64-bit words as 64 hex characters --------------------------------- */

static void push_rng(lua_State *L, const lt_rng *r) {
  char buf[80];
  snprintf(buf, sizeof buf, "%016llx%016llx%016llx%016llx", (unsigned long long)r->s[0], (unsigned long long)r->s[1],
           (unsigned long long)r->s[2], (unsigned long long)r->s[3]);
  lua_pushstring(L, buf);
}

static void check_rng(lua_State *L, int idx, lt_rng *r, const char *fname) {
  size_t len;
  const char *s = l_checklstring(L, idx, &len);
  if (len != 64) luaL_error(L, "%s: an RNG state is 64 hexadecimal characters, got %d characters", fname, (int)len);
  for (int i = 0; i < 4; i++) {
    char part[17], *end;
    memcpy(part, s + 16 * i, 16);
    part[16] = 0;
    r->s[i] = strtoull(part, &end, 16);
    if (*end) luaL_error(L, "%s: RNG state '%s' is not hexadecimal", fname, s);
  }
  if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) luaL_error(L, "%s: an RNG state cannot be all zeros", fname);
}

static int l_rng_seed(lua_State *L) {
  int64_t s = l_checkint(L, 1, "DataLoader", "seed", -L_INT_MAX, L_INT_MAX);
  lt_rng r;
  lt_rng_seed(&r, (uint64_t)s);
  push_rng(L, &r);
  return 1;
}

static int l_rng_draw(lua_State *L) {
  lt_rng r;
  lt_rng_seed(&r, lt_rng_next(&L_CTX(L)->rng));
  push_rng(L, &r);
  return 1;
}

static int l_randperm(lua_State *L) {
  int64_t n = l_checkint(L, 1, "DataLoader", "the dataset size", 0, L_INT_MAX);
  lt_rng r;
  check_rng(L, 2, &r, "DataLoader");
  lt_tensor *t = lt_tensor_new(L_CTX(L), LT_I64, 1, &n);
  if (!t) return l_error(L);
  lt_data_randperm(&r, n, lt_i64(t), 1);
  l_push(L, t);
  push_rng(L, &r);
  return 2;
}

static int l_gather(lua_State *L) {
  l_checktype(L, 1, LUA_TTABLE);
  lt_tensor *perm = lua_isnoneornil(L, 2) ? NULL : l_checktensor(L, 2, "DataLoader");
  int64_t start = l_checkint(L, 3, "DataLoader", "the batch start", 0, L_INT_MAX);
  int64_t count = l_checkint(L, 4, "DataLoader", "the batch size", 0, L_INT_MAX);
  const int64_t *rows = NULL;
  if (perm) {
    if (perm->dtype != LT_I64 || perm->ndim != 1 || !lt_is_contiguous(perm))
      return luaL_error(L, "DataLoader: the permutation must be a contiguous 1-D int64 tensor");
    if (start + count > perm->shape[0])
      return luaL_error(L, "DataLoader: batch rows %lld..%lld beyond the permutation's %lld entries",
                        (long long)start + 1, (long long)(start + count), (long long)perm->shape[0]);
    rows = lt_i64(perm) + start;
  }
  int n = (int)lua_objlen(L, 1);
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lt_tensor *src = l_checktensor(L, -1, "DataLoader");
    lt_tensor *b =
        rows ? lt_data_gather_rows(L_CTX(L), src, rows, count, 1) : lt_data_slice_rows(L_CTX(L), src, start, count);
    lua_pop(L, 1);
    l_push(L, b);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

void l_data_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "read_idx", l_read_idx }, { "rng_seed", l_rng_seed }, { "rng_draw", l_rng_draw },
                                    { "randperm", l_randperm }, { "gather", l_gather },     { NULL, NULL } };
  lua_newtable(L);
  l_setfuncs(L, funcs);
  lua_setfield(L, -2, "_data");
}
