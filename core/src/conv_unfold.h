/*
 * conv_unfold.h — the kernels of nn_conv_general.c's im2col + GEMM convolution, written once for every float
 * element type: nn_conv_general.c includes it once per dtype with CONV_T (the element type), CONV_SFX (the name
 * suffix), CONV_GEMM (its lt_gemm-shaped GEMM) and CONV_SUM (a plane's sum in double) set, after defining
 * gconv_geom, conv_pass, the chunk sizes and conv_split_parts. It defines, suffixed: unfold_or_fold (im2col and its
 * adjoint col2im for one item), conv_run (the three passes over the batch, split among the pool's threads when that
 * pays), add_bias and bias_sums.
 *
 * Rows are short (an output row of WO positions per kernel tap), so the strides 1 and 2 get loops with the stride
 * a constant, which GCC vectorises (stride 2 loads as pairs of vectors and a permute). The adjoint at stride 2 and
 * dilation 1 adds two neighbouring taps kj, kj+1 in one loop: their input positions 2*ow+kj and 2*ow+kj+1
 * interleave, so the pair's stores are one contiguous run (a lone strided store with gaps does not vectorise).
 */
#if !defined(CONV_T) || !defined(CONV_SFX) || !defined(CONV_GEMM) || !defined(CONV_SUM)
#error "conv_unfold.h needs CONV_T, CONV_SFX, CONV_GEMM and CONV_SUM"
#endif

#define CONV_CAT2(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT2(a, b)
#define CONV_FN(name) CONV_CAT(name, CONV_SFX)

/* dst[lo, hi) = src[ow * SW] (SW a constant after inlining) */
__attribute__((always_inline)) static inline void CONV_FN(gather_row)(CONV_T *restrict dst, const CONV_T *restrict src,
                                                                      int64_t lo, int64_t hi, int64_t SW) {
  for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * SW];
}

/* dst[ow * SW] += src[ow] for ow in [lo, hi) */
__attribute__((always_inline)) static inline void CONV_FN(scatter_row)(CONV_T *restrict dst, const CONV_T *restrict src,
                                                                       int64_t lo, int64_t hi, int64_t SW) {
  for (int64_t ow = lo; ow < hi; ow++) dst[ow * SW] += src[ow];
}

/* col [Cg*KH*KW, HO*WO] (rows ld apart) of the Cg channels starting at x (zeros where the dilated window is in
 * the padding); with add, the adjoint instead: x += fold(col) */
LT_VECTOR_FN static void CONV_FN(unfold_or_fold)(const gconv_geom *g, CONV_T *x, CONV_T *col, int64_t ld, int add) {
  const int64_t HO = g->HO, WO = g->WO, SW = g->SW, W = g->W;
  const int pair = add && SW == 2 && g->DW == 1; /* the adjoint takes neighbouring taps two at a time */
  for (int64_t ch = 0; ch < g->C / g->G; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki * g->DH, g->SH, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        CONV_T *row = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj * g->DW, SW, g->PW, W, WO, &lo, &hi);
        CONV_T *base = x + ch * g->H * W - g->PW + kj * g->DW;
        if (!add) {
          for (int64_t i = 0; i < oh_lo * WO; i++) row[i] = 0;
          for (int64_t i = oh_hi * WO; i < HO * WO; i++) row[i] = 0;
        }
        if (pair && kj + 1 < g->KW) { /* taps kj and kj + 1 together, over the range both have */
          const CONV_T *row1 = row + ld;
          int64_t lo1, hi1;
          lt_conv_valid_range(kj + 1, 2, g->PW, W, WO, &lo1, &hi1);
          const int64_t a = lo > lo1 ? lo : lo1, b0 = hi < hi1 ? hi : hi1, b = b0 > a ? b0 : a;
          for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
            CONV_T *restrict xr = base + (oh * g->SH - g->PH + ki * g->DH) * W;
            const CONV_T *restrict c0 = row + oh * WO, *restrict c1 = row1 + oh * WO;
            CONV_FN(scatter_row)(xr, c0, lo, a < hi ? a : hi, 2);
            CONV_FN(scatter_row)(xr + 1, c1, lo1, a < hi1 ? a : hi1, 2);
            for (int64_t ow = a; ow < b; ow++) {
              xr[2 * ow] += c0[ow];
              xr[2 * ow + 1] += c1[ow];
            }
            CONV_FN(scatter_row)(xr, c0, b > lo ? b : lo, hi, 2);
            CONV_FN(scatter_row)(xr + 1, c1, b > lo1 ? b : lo1, hi1, 2);
          }
          kj++;
          continue;
        }
        for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
          CONV_T *restrict xr = base + (oh * g->SH - g->PH + ki * g->DH) * W;
          CONV_T *restrict cr = row + oh * WO;
          if (add) {
            if (SW == 1) CONV_FN(scatter_row)(xr, cr, lo, hi, 1);
            else if (SW == 2) CONV_FN(scatter_row)(xr, cr, lo, hi, 2);
            else CONV_FN(scatter_row)(xr, cr, lo, hi, SW);
          } else {
            for (int64_t ow = 0; ow < lo; ow++) cr[ow] = 0;
            if (SW == 1) CONV_FN(gather_row)(cr, xr, lo, hi, 1);
            else if (SW == 2) CONV_FN(gather_row)(cr, xr, lo, hi, 2);
            else CONV_FN(gather_row)(cr, xr, lo, hi, SW);
            for (int64_t ow = hi; ow < WO; ow++) cr[ow] = 0;
          }
        }
      }
    }
}

typedef struct CONV_FN(fold_job) {
  const gconv_geom *g;
  CONV_T *x;   /* the chunk's first item, at its group's first channel */
  CONV_T *col; /* [Kg, nb*P] */
  int64_t nb, add;
} CONV_FN(fold_job);

static void CONV_FN(fold_part)(void *arg, int part, int nparts) {
  const CONV_FN(fold_job) *j = arg;
  const gconv_geom *g = j->g;
  int64_t lo, hi;
  lt_pool_range(j->nb, part, nparts, 1, &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    CONV_FN(unfold_or_fold)(g, j->x + i * g->C * g->H * g->W, j->col + i * g_p(g), j->nb * g_p(g), (int)j->add);
}

/* col <- the unfold of nb items from x (add 0), or x += their folds from col (add 1) */
static void CONV_FN(fold_items)(lt_ctx *c, const gconv_geom *g, CONV_T *x, CONV_T *col, int64_t nb, int add) {
  CONV_FN(fold_job) j = { g, x, col, nb, add };
  int parts = lt_pool_parts(c->num_threads, g_kg(g) * nb * g_p(g), CONV_PAR_MIN);
  if (parts > nb) parts = (int)nb;
  if (parts > 1) lt_pool_run(CONV_FN(fold_part), &j, parts);
  else CONV_FN(fold_part)(&j, 0, 1);
}

/* t [Og, nb*P] <-> the chunk's planes in y [.., O, P] from item 0 at its group's first channel (to_t: gather) */
static void CONV_FN(gather_or_scatter)(const gconv_geom *g, CONV_T *y, CONV_T *t, int64_t nb, int to_t) {
  const int64_t P = g_p(g), Og = g_og(g);
  for (int64_t i = 0; i < nb; i++)
    for (int64_t o = 0; o < Og; o++) {
      CONV_T *yr = y + (i * g->O + o) * P, *tr = t + o * nb * P + i * P;
      if (to_t) memcpy(tr, yr, sizeof(CONV_T) * (size_t)P);
      else memcpy(yr, tr, sizeof(CONV_T) * (size_t)P);
    }
}

/* items per chunk: small planes only; a plane of CONV_CHUNK_MAX_P columns or more makes a wide enough GEMM alone,
 * and then the item's [Og, P] block of y (or gy) is the GEMM's operand itself, with no gather or scatter */
static int64_t CONV_FN(chunk_items)(const gconv_geom *g) {
  const int64_t Kg = g_kg(g), P = g_p(g);
  int64_t nb = P < CONV_CHUNK_MAX_P ? CONV_CHUNK_FLOATS / (Kg * P > 0 ? Kg * P : 1) : 1;
  return nb < 1 ? 1 : nb > g->N ? g->N : nb;
}
/* the scratch of conv_items: col [Kg, nb*P], then the gathered outputs [Og, nb*P] when a chunk has several items */
static int64_t CONV_FN(scratch_elems)(const gconv_geom *g) {
  const int64_t nb = CONV_FN(chunk_items)(g);
  return (g_kg(g) + (nb > 1 ? g_og(g) : 0)) * nb * g_p(g);
}

/* The three passes (conv_pass) on the im2col + GEMM path over the g->N items given, per chunk of nb items and per
 * group; scratch: scratch_elems. With wg_out, CONV_FORWARD also adds the weight gradient wg_out += wg_gy @
 * im2col(in)^T from the same unfolded chunk (a transposed convolution's backward unfolds its output gradient once
 * for both of its gradients) */
static int CONV_FN(conv_items)(lt_ctx *c, const gconv_geom *g, conv_pass pass, const CONV_T *in, const CONV_T *other,
                               CONV_T *out, const CONV_T *wg_gy, CONV_T *wg_out, CONV_T *scratch) {
  const int64_t Kg = g_kg(g), P = g_p(g), Og = g_og(g), Cg = g_cg(g), HW = g->H * g->W;
  const int64_t nb = CONV_FN(chunk_items)(g);
  CONV_T *col = scratch, *tbuf = scratch + Kg * nb * P;
  int rc = LT_OK;
  for (int64_t n0 = 0; n0 < g->N && !rc; n0 += nb) {
    const int64_t m = n0 + nb <= g->N ? nb : g->N - n0, L = m * P; /* the chunk's items and columns */
    for (int64_t gr = 0; gr < g->G && !rc; gr++) {
      const int64_t xo = (n0 * g->C + gr * Cg) * HW, yo = (n0 * g->O + gr * Og) * P, wo = gr * Og * Kg;
      /* the chunk's outputs [Og, L]: the gathered buffer, or the one item's block in place */
      const CONV_T *plane = pass == CONV_FORWARD ? out + yo : pass == CONV_INPUT_GRAD ? in + yo : other + yo;
      CONV_T *t = m > 1 ? tbuf : (CONV_T *)plane;
      switch (pass) {
        case CONV_FORWARD:
          CONV_FN(fold_items)(c, g, (CONV_T *)in + xo, col, m, 0);
          rc = CONV_GEMM(c, 0, 0, Og, L, Kg, 1, other + wo, Kg, col, L, 0, t, L);
          if (!rc && m > 1) CONV_FN(gather_or_scatter)(g, out + yo, t, m, 0);
          if (rc || !wg_out) break;
          t = m > 1 ? tbuf : (CONV_T *)wg_gy + yo;
          if (m > 1) CONV_FN(gather_or_scatter)(g, (CONV_T *)wg_gy + yo, t, m, 1);
          rc = CONV_GEMM(c, 0, 1, Og, Kg, L, 1, t, L, col, L, 1, wg_out + wo, Kg);
          break;
        case CONV_INPUT_GRAD:
          if (m > 1) CONV_FN(gather_or_scatter)(g, (CONV_T *)in + yo, t, m, 1);
          rc = CONV_GEMM(c, 1, 0, Kg, L, Og, 1, other + wo, Kg, t, L, 0, col, L);
          if (!rc) CONV_FN(fold_items)(c, g, out + xo, col, m, 1);
          break;
        case CONV_WEIGHT_GRAD:
          CONV_FN(fold_items)(c, g, (CONV_T *)in + xo, col, m, 0);
          if (m > 1) CONV_FN(gather_or_scatter)(g, (CONV_T *)other + yo, t, m, 1);
          rc = CONV_GEMM(c, 0, 1, Og, Kg, L, 1, t, L, col, L, 1, out + wo, Kg);
          break;
      }
    }
  }
  return rc;
}

/* A pass over the batch split among the pool's threads (conv_split_parts): each part runs conv_items on its range
 * of items with its own scratch, GEMMs on its own thread; a weight gradient is added per range, the first range's
 * into the gradient itself and the others' into buffers of their own, added in range order afterwards. */
typedef struct CONV_FN(split_job) {
  lt_ctx *c;
  const gconv_geom *g;
  conv_pass pass;
  int nparts, failed;
  const CONV_T *in, *other, *wg_gy;
  CONV_T *out, *wg_out, *wsum; /* wsum: the weight gradient summed in this pass (out or wg_out), NULL if none */
  CONV_T *scratch;
  int64_t each; /* scratch per part, then (wsum) the part's own weight gradient of wsize */
  int64_t wsize;
} CONV_FN(split_job);

static void CONV_FN(split_part)(void *arg, int part, int nparts) {
  CONV_FN(split_job) *j = arg;
  const gconv_geom *g = j->g;
  int64_t lo, hi;
  lt_pool_range(g->N, part, nparts, 1, &lo, &hi);
  if (lo >= hi) return;
  gconv_geom gs = *g;
  gs.N = hi - lo;
  const int64_t x_item = g->C * g->H * g->W, y_item = g->O * g_p(g);
  CONV_T *scratch = j->scratch + part * (j->each + (j->wsum ? j->wsize : 0));
  CONV_T *wpart = j->wsum && part > 0 ? scratch + j->each : j->wsum;
  if (wpart && part > 0) memset(wpart, 0, sizeof(CONV_T) * (size_t)j->wsize);
  int rc;
  switch (j->pass) {
    case CONV_FORWARD:
      rc = CONV_FN(conv_items)(j->c, &gs, j->pass, j->in + lo * x_item, j->other, j->out + lo * y_item,
                               j->wg_gy ? j->wg_gy + lo * y_item : NULL, wpart, scratch);
      break;
    case CONV_INPUT_GRAD:
      rc = CONV_FN(conv_items)(j->c, &gs, j->pass, j->in + lo * y_item, j->other, j->out + lo * x_item, NULL, NULL,
                               scratch);
      break;
    default:
      rc = CONV_FN(conv_items)(j->c, &gs, j->pass, j->in + lo * x_item, j->other + lo * y_item, wpart, NULL, NULL,
                               scratch);
      break;
  }
  if (rc) __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

/* The later ranges' own weight gradients added into wsum in range order, elements [lo, hi): on the pool, as the
 * sum of a large weight (8 MB for a 256->512 k4 layer) left the other threads waiting when the caller ran it alone */
typedef struct CONV_FN(wsum_job) {
  const CONV_FN(split_job) * j;
  int ranges; /* the ranges that had items (range 0 summed into wsum itself) */
} CONV_FN(wsum_job);

static void CONV_FN(wsum_range)(void *arg, int64_t lo, int64_t hi) {
  const CONV_FN(wsum_job) *s = arg;
  for (int i = 1; i < s->ranges; i++) {
    const CONV_T *w = s->j->scratch + i * (s->j->each + s->j->wsize) + s->j->each;
    for (int64_t k = lo; k < hi; k++) s->j->wsum[k] += w[k];
  }
}

/* The pass over the whole batch (see conv_items): on one thread's GEMMs per range of items when the batch is split
 * among the pool's threads, else in chunks whose GEMMs and folds take the pool themselves. */
static int CONV_FN(conv_run)(lt_ctx *c, const gconv_geom *g, conv_pass pass, const CONV_T *in, const CONV_T *other,
                             CONV_T *out, const CONV_T *wg_gy, CONV_T *wg_out) {
  const int parts = conv_split_parts(c, g);
  if (parts <= 1) {
    const int64_t n = CONV_FN(scratch_elems)(g);
    CONV_T *scratch = conv_scratch(c, sizeof(CONV_T), n);
    if (!scratch) return LT_ERR;
    int rc = CONV_FN(conv_items)(c, g, pass, in, other, out, wg_gy, wg_out, scratch);
    lt_free(scratch, sizeof(CONV_T) * (size_t)n);
    return rc;
  }
  gconv_geom gs = *g;
  gs.N = (g->N + parts - 1) / parts; /* the longest range */
  CONV_FN(split_job)
  j = { .c = c,
        .g = g,
        .pass = pass,
        .nparts = parts,
        .in = in,
        .other = other,
        .wg_gy = wg_gy,
        .out = out,
        .wg_out = wg_out };
  j.wsum = pass == CONV_WEIGHT_GRAD ? out : pass == CONV_FORWARD ? wg_out : NULL;
  j.wsize = g->O * g_kg(g);
  j.each = (CONV_FN(scratch_elems)(&gs) + 15) / 16 * 16; /* whole cache lines per part */
  const int64_t total = parts * (j.each + (j.wsum ? j.wsize : 0));
  if (!(j.scratch = conv_scratch(c, sizeof(CONV_T), total))) return LT_ERR;
  lt_pool_run(CONV_FN(split_part), &j, parts);
  if (!j.failed && j.wsum) {
    CONV_FN(wsum_job) s = { &j, 1 };
    while (s.ranges < parts && (int64_t)s.ranges * gs.N < g->N) s.ranges++;
    lt_pool_for(parts, j.wsize, 16, CONV_FN(wsum_range), &s);
  }
  lt_free(j.scratch, sizeof(CONV_T) * (size_t)total);
  return j.failed ? LT_ERR : LT_OK;
}

/* y [N, Ch, P] += b[ch] */
static void CONV_FN(add_bias)(CONV_T *y, const CONV_T *b, int64_t N, int64_t Ch, int64_t P) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < Ch; o++) {
      CONV_T *row = y + (n * Ch + o) * P;
      for (int64_t p = 0; p < P; p++) row[p] += b[o];
    }
}

/* gb [Ch] = sums of gy [N, Ch, P] over the batch and the plane, in double */
static void CONV_FN(bias_sums)(const CONV_T *gy, int64_t N, int64_t Ch, int64_t P, CONV_T *gb) {
  for (int64_t o = 0; o < Ch; o++) {
    double s = 0;
    for (int64_t n = 0; n < N; n++) s += CONV_SUM(gy + (n * Ch + o) * P, P);
    gb[o] = (CONV_T)s;
  }
}

#undef CONV_FN
#undef CONV_CAT
#undef CONV_CAT2
