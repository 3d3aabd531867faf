/*
 * l_autocast.c — the C side of lt.autocast and Trainer{precision = "bf16-mixed"} (lua/lutra/autocast.lua):
 * the context's autocast precision, what the CPU can do, the switch that forces the fp32 path (tests), and a
 * GEMM on tensors for the bf16 kernel's tests.
 */
#include "l_util.h"
#include "lt_blas.h"
#include "lt_gemm_bf16.h"

/* _autocast_set(on) -> previous (booleans: bf16 or off) */
static int l_autocast_set(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  int old = c->autocast;
  c->autocast = lua_toboolean(L, 1) ? LT_AUTOCAST_BF16 : LT_AUTOCAST_OFF;
  lua_pushboolean(L, old == LT_AUTOCAST_BF16);
  return 1;
}

static int l_autocast_get(lua_State *L) {
  lua_pushboolean(L, L_CTX(L)->autocast == LT_AUTOCAST_BF16);
  return 1;
}

/* _bf16_info() -> { supported = cpu has AVX512-BF16, active = autocast's products run in bf16 } */
static int l_bf16_info(lua_State *L) {
  lua_createtable(L, 0, 2);
  lua_pushboolean(L, lt_gemm_bf16_supported());
  lua_setfield(L, -2, "supported");
  lua_pushboolean(L, lt_gemm_bf16_active());
  lua_setfield(L, -2, "active");
  return 1;
}

static int l_bf16_force_fp32(lua_State *L) {
  lt_gemm_bf16_force_fp32(lua_toboolean(L, 1));
  return 0;
}

/* _gemm(C, A, B, transa, transb, alpha, beta): C = alpha op(A) op(B) + beta C through lt_gemm, in the context's
 * autocast precision; A, B, C contiguous 2-D float32 (A [m x k], or [k x m] with transa). */
static int l_gemm(lua_State *L) {
  lt_tensor *C = l_checktensor(L, 1, "_gemm"), *A = l_checktensor(L, 2, "_gemm"), *Bt = l_checktensor(L, 3, "_gemm");
  int ta = lua_toboolean(L, 4), tb = lua_toboolean(L, 5);
  float alpha = (float)l_checknumber(L, 6), beta = (float)l_checknumber(L, 7);
  const lt_tensor *ts[3] = { C, A, Bt };
  for (int i = 0; i < 3; i++)
    if (ts[i]->ndim != 2 || ts[i]->dtype != LT_F32 || !lt_is_contiguous(ts[i]))
      return l_errorf(L, "_gemm: argument %d must be a contiguous 2-D float32 tensor", i + 1);
  int64_t m = ta ? A->shape[1] : A->shape[0], k = ta ? A->shape[0] : A->shape[1];
  int64_t kb = tb ? Bt->shape[1] : Bt->shape[0], n = tb ? Bt->shape[0] : Bt->shape[1];
  if (kb != k || C->shape[0] != m || C->shape[1] != n)
    return l_errorf(L, "_gemm: shapes do not agree (m %lld, k %lld / %lld, n %lld, C [%lld x %lld])", (long long)m,
                    (long long)k, (long long)kb, (long long)n, (long long)C->shape[0], (long long)C->shape[1]);
  lt_ctx *c = L_CTX(L);
  int rc;
  { /* the scope ends before l_check may raise (a longjmp would skip its cleanup) */
    lt_gemm_bf16_scope(c);
    rc = lt_gemm(c, ta, tb, m, n, k, alpha, lt_f32(A), A->shape[1], lt_f32(Bt), Bt->shape[1], beta, lt_f32(C), n);
  }
  l_check(L, rc);
  return 0;
}

static const luaL_Reg functions[] = { { "_autocast_set", l_autocast_set },
                                      { "_autocast_get", l_autocast_get },
                                      { "_bf16_info", l_bf16_info },
                                      { "_bf16_force_fp32", l_bf16_force_fp32 },
                                      { "_gemm", l_gemm },
                                      { NULL, NULL } };

/* Expects the module table on top. */
void l_autocast_register(lua_State *L) { l_setops(L, functions); }
