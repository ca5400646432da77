/* strata-ops: the op-level entry points of libstrata from C, on the device you choose.
 *
 *   cc -std=c11 -O2 -I include examples/c/ops.c -L. -lstrata -lm -o strata-ops
 *   LD_LIBRARY_PATH=. ./strata-ops emu      (or cpu, metal, auto)
 *
 * It builds small deterministic inputs, runs strata_attention (dense and QSA-sparse),
 * strata_gdn_scan and strata_moe_combine (plain and fused into the GatedResidual write) on the
 * chosen device and on the cpu device, prints the largest difference of each output and the
 * device's kernel report (which names the kernel variants that ran), and exits 1 if a result
 * differs by more than 1e-4 relative to its largest value or a call fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static int failures = 0;

static int ok(strata_status st, const char* what) {
  if (st == STRATA_OK) return 1;
  char msg[512];
  strata_last_error(msg, sizeof msg);
  fprintf(stderr, "%s: %s: %s\n", what, strata_status_name(st), msg);
  failures++;
  return 0;
}

/* splitmix64 mapped to [lo, hi). */
static uint64_t rng_state = 1;
static float uniform(float lo, float hi) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * (float)((double)(z >> 11) / 9007199254740992.0);
}

static float* filled(size_t n, float lo, float hi) {
  float* x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
  return x;
}

static strata_tensor tensor(void* data, int32_t dtype, int32_t ndim, const int64_t* shape) {
  strata_tensor t = {data, dtype, ndim, shape, NULL};
  return t;
}

/* compare reports max |a - b| relative to max |b| and counts a failure above 1e-4. */
static void compare(const char* name, const float* a, const float* b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    d = fmax(d, fabs((double)a[i] - (double)b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  double rel = m > 0 ? d / m : d;
  printf("  %-22s max |diff| vs cpu %.3g (relative %.3g)\n", name, d, rel);
  if (!(rel <= 1e-4)) {
    fprintf(stderr, "%s: relative difference %.3g > 1e-4\n", name, rel);
    failures++;
  }
}

enum { T = 5, HQ = 4, HKV = 2, D = 16, POS0 = 3, N = POS0 + T };
enum { GT = 6, HK = 1, HV = 2, DK = 8, DV = 8 };
enum { MT = 3, MK = 2, MD = 8, ROWS = 5, S = 4 };

/* run_ops runs every op on dev; outputs go to the buffers passed. */
static void run_ops(strata_device* dev, float* o, float* lse, float* os, float* go, float* gstate, float* mout,
                    float* mh, const float* q, const float* k, const float* v, const float* gq, const float* gk,
                    const float* gv, const float* gg, const float* gb, const float* ye, const float* w,
                    const float* shared, const float* beta) {
  int64_t qs[3] = {T, HQ, D}, ks[3] = {N, HKV, D}, ls[2] = {T, HQ};
  strata_tensor tq = tensor((void*)q, STRATA_F32, 3, qs), tk = tensor((void*)k, STRATA_F32, 3, ks);
  strata_tensor tv = tensor((void*)v, STRATA_F32, 3, ks), to = tensor(o, STRATA_F32, 3, qs);
  strata_tensor tl = tensor(lse, STRATA_F32, 2, ls);
  strata_attention_params ap = strata_attention_default_params();
  ap.pos0 = POS0;
  ok(strata_attention(dev, &tq, &tk, &tv, &to, &tl, &ap), "attention");

  /* QSA-sparse: rows 0 and 1 dense, rows 2..4 attend a few positions each. */
  uint8_t dense[T] = {1, 1, 0, 0, 0};
  int32_t offs[T + 1] = {0, 0, 0, 2, 5, 7};
  int32_t toks[7] = {0, 5, 1, 2, 6, 3, 7};
  int64_t ds[1] = {T}, osz[1] = {T + 1}, tsz[1] = {7};
  strata_tensor td = tensor(dense, STRATA_U8, 1, ds), toff = tensor(offs, STRATA_I32, 1, osz);
  strata_tensor ttok = tensor(toks, STRATA_I32, 1, tsz), tos = tensor(os, STRATA_F32, 3, qs);
  ap.sel_dense = &td;
  ap.sel_offsets = &toff;
  ap.sel_tokens = &ttok;
  ok(strata_attention(dev, &tq, &tk, &tv, &tos, NULL, &ap), "attention (sparse)");

  int64_t gqs[3] = {GT, HK, DK}, gvs[3] = {GT, HV, DV}, ggs[2] = {GT, HV}, gss[3] = {HV, DK, DV};
  strata_tensor tgq = tensor((void*)gq, STRATA_F32, 3, gqs), tgk = tensor((void*)gk, STRATA_F32, 3, gqs);
  strata_tensor tgv = tensor((void*)gv, STRATA_F32, 3, gvs), tgg = tensor((void*)gg, STRATA_F32, 2, ggs);
  strata_tensor tgb = tensor((void*)gb, STRATA_F32, 2, ggs), tgs = tensor(gstate, STRATA_F32, 3, gss);
  strata_tensor tgo = tensor(go, STRATA_F32, 3, gvs);
  strata_gdn_params gp = strata_gdn_default_params();
  gp.normalize_qk = 1;
  gp.mode = STRATA_GDN_RECURRENT;
  ok(strata_gdn_scan(dev, &tgq, &tgk, &tgv, &tgg, &tgb, &tgs, &tgo, &gp), "gdn_scan");

  int32_t rk[MT * MK] = {0, 3, -1, 1, 4, 2};
  int64_t ys[2] = {ROWS, MD}, rs[2] = {MT, MK}, mos[2] = {MT, MD}, hs[3] = {MT, S, MD}, bs[2] = {MT, S};
  strata_tensor tye = tensor((void*)ye, STRATA_F32, 2, ys), trk = tensor(rk, STRATA_I32, 2, rs);
  strata_tensor tw = tensor((void*)w, STRATA_F32, 2, rs), tmo = tensor(mout, STRATA_F32, 2, mos);
  strata_tensor tsh = tensor((void*)shared, STRATA_F32, 2, mos), tmh = tensor(mh, STRATA_F32, 3, hs);
  strata_tensor tbeta = tensor((void*)beta, STRATA_F32, 2, bs);
  strata_moe_params mp = strata_moe_default_params();
  mp.shared = &tsh;
  ok(strata_moe_combine(dev, &tye, &trk, &tw, &tmo, &mp), "moe_combine");
  mp.beta = &tbeta;
  ok(strata_moe_combine(dev, &tye, &trk, &tw, &tmh, &mp), "moe_combine (GatedResidual write)");
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "auto";
  int32_t backend;
  if (!strcmp(name, "auto")) backend = STRATA_BACKEND_AUTO;
  else if (!strcmp(name, "cpu")) backend = STRATA_BACKEND_CPU;
  else if (!strcmp(name, "metal")) backend = STRATA_BACKEND_METAL;
  else if (!strcmp(name, "emu")) backend = STRATA_BACKEND_EMU;
  else {
    fprintf(stderr, "usage: %s [auto|cpu|metal|emu]\n", argv[0]);
    return 2;
  }
  strata_device_params dp = strata_device_default_params();
  dp.backend = backend;
  strata_device *dev = NULL, *cpu = NULL;
  if (!ok(strata_device_open(&dp, &dev), "device_open")) return 1;
  dp.backend = STRATA_BACKEND_CPU;
  if (!ok(strata_device_open(&dp, &cpu), "device_open cpu")) return 1;

  float *q = filled(T * HQ * D, -2, 2), *k = filled(N * HKV * D, -2, 2), *v = filled(N * HKV * D, -1, 1);
  float *gq = filled(GT * HK * DK, -1, 1), *gk = filled(GT * HK * DK, -1, 1), *gv = filled(GT * HV * DV, -1, 1);
  float *gg = filled(GT * HV, -2, -0.01f), *gb = filled(GT * HV, 0.05f, 0.95f), *state0 = filled(HV * DK * DV, -0.5f, 0.5f);
  float *ye = filled(ROWS * MD, -1, 1), *w = filled(MT * MK, 0, 1), *shared = filled(MT * MD, -1, 1);
  float *beta = filled(MT * S, 0, 2), *h0 = filled(MT * S * MD, -3, 3);

  float out[2][T * HQ * D], lse[2][T * HQ], os[2][T * HQ * D], go[2][GT * HV * DV], gstate[2][HV * DK * DV];
  float mout[2][MT * MD], mh[2][MT * S * MD];
  strata_device* devs[2] = {dev, cpu};
  for (int i = 0; i < 2; i++) {
    memcpy(gstate[i], state0, sizeof gstate[i]);
    memcpy(mh[i], h0, sizeof mh[i]);
    run_ops(devs[i], out[i], lse[i], os[i], go[i], gstate[i], mout[i], mh[i], q, k, v, gq, gk, gv, gg, gb, ye, w,
            shared, beta);
  }
  strata_device_props props = {.struct_size = sizeof props};
  ok(strata_device_info(dev, &props), "device_info");
  size_t klen = 0;
  ok(strata_device_kernels(dev, NULL, 0, &klen), "device_kernels");
  char* kernels = malloc(klen + 1);
  ok(strata_device_kernels(dev, kernels, klen + 1, NULL), "device_kernels");
  printf("backend   %s\nkernels   %s\n", props.backend, kernels);
  free(kernels);
  compare("attention o", out[0], out[1], T * HQ * D);
  compare("attention lse", lse[0], lse[1], T * HQ);
  compare("attention (sparse) o", os[0], os[1], T * HQ * D);
  compare("gdn_scan o", go[0], go[1], GT * HV * DV);
  compare("gdn_scan state", gstate[0], gstate[1], HV * DK * DV);
  compare("moe_combine", mout[0], mout[1], MT * MD);
  compare("moe_combine H", mh[0], mh[1], MT * S * MD);
  strata_device_free(dev);
  strata_device_free(cpu);
  free(q), free(k), free(v), free(gq), free(gk), free(gv), free(gg), free(gb), free(state0);
  free(ye), free(w), free(shared), free(beta), free(h0);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
