/*
 * abi_checks: misuse of libstrata through its C interface must give statuses and messages,
 * never a crash. Usage: abi_checks MODEL_DIR [SCRATCH_DIR] (state files and the prompt cache are
 * checked when a scratch directory is given). Prints one line per check and exits 1 if any
 * failed. Run by tests/capi_test.go (also against a library built with -race).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static int failures = 0;

static void check_status(const char* what, strata_status got, strata_status want, const char* must_contain) {
  char msg[1024];
  size_t n = strata_last_error(msg, sizeof msg);
  int ok = got == want;
  if (ok && want != STRATA_OK && must_contain != NULL) ok = strstr(msg, must_contain) != NULL;
  if (ok && want != STRATA_OK) ok = (n > 0 && n == strlen(msg)) || n >= sizeof msg;
  printf("%s %-48s %s%s%s\n", ok ? "ok  " : "FAIL", what, strata_status_name(got),
         got != STRATA_OK ? ": " : "", got != STRATA_OK ? msg : "");
  if (!ok) {
    printf("     want %s%s%s\n", strata_status_name(want), must_contain ? " containing " : "", must_contain ? must_contain : "");
    failures++;
  }
}

static void expect(const char* what, int cond) {
  printf("%s %s\n", cond ? "ok  " : "FAIL", what);
  if (!cond) failures++;
}

static atomic_int log_lines;
static void count_log(int32_t level, const char* msg, void* ud) {
  (void)level;
  (void)msg;
  if (ud == &log_lines) atomic_fetch_add(&log_lines, 1);
}

/* ---- one session used from two threads ---- */

struct busy_arg {
  strata_session* s;
  const int32_t* tokens;
  size_t n;
  atomic_int started, finished;
  strata_status st;
};

static void* long_prefill(void* p) {
  struct busy_arg* a = p;
  atomic_store(&a->started, 1);
  /* The main thread polls the same session: a poll that holds it at the moment this prefill
     starts makes the prefill BUSY, which is correct; try again until it runs. */
  do {
    a->st = strata_session_prefill(a->s, a->tokens, a->n, NULL, NULL, 0, NULL);
  } while (a->st == STRATA_ERR_BUSY);
  atomic_store(&a->finished, 1);
  return NULL;
}

/* ---- many threads sharing one device and model ---- */

struct share_arg {
  strata_model* m;
  const float* ref;
  int bad;
};

static void* shared_worker(void* p) {
  struct share_arg* a = p;
  static const int32_t prompt[6] = {7, 300, 11, 511, 2, 99};
  for (int r = 0; r < 3; r++) {
    strata_session* s = NULL;
    float logits[512];
    if (strata_session_new(a->m, NULL, &s) != STRATA_OK ||
        strata_session_prefill(s, prompt, 6, NULL, logits, 512, NULL) != STRATA_OK ||
        memcmp(logits, a->ref, sizeof logits) != 0)
      a->bad++;
    strata_model_props info = {.struct_size = sizeof info};
    if (strata_model_info(a->m, &info) != STRATA_OK || info.vocab != 512) a->bad++;
    /* Errors are per thread: a failing call here does not disturb other threads' messages. */
    if (strata_session_position(NULL, NULL) != STRATA_ERR_INVALID_ARGUMENT) a->bad++;
    if (strata_session_free(s) != STRATA_OK) a->bad++;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: abi_checks MODEL_DIR [SCRATCH_DIR]\n");
    return 2;
  }
  const char* dir = argv[1];
  char buf[64];

  expect("abi version matches the header", strata_abi_version() == STRATA_ABI_VERSION);
  expect("last error is empty before any failure", strata_last_error(buf, sizeof buf) == 0 && buf[0] == 0);
  expect("status names", strcmp(strata_status_name(STRATA_ERR_BUSY), "STRATA_ERR_BUSY") == 0 &&
                             strcmp(strata_status_name(999), "unknown") == 0);
  check_status("set log callback", strata_set_log_callback(count_log, STRATA_LOG_INFO, &log_lines), STRATA_OK, NULL);

  /* device */
  strata_device* dev = NULL;
  check_status("device_open out NULL", strata_device_open(NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "out is NULL");
  strata_device_params dp = strata_device_default_params();
  dp.backend = 42;
  check_status("device_open unknown backend", strata_device_open(&dp, &dev), STRATA_ERR_INVALID_ARGUMENT, "backend 42");
  dp.backend = STRATA_BACKEND_METAL;
  strata_status st = strata_device_open(&dp, &dev);
  expect("device_open metal: OK or BACKEND", st == STRATA_OK || st == STRATA_ERR_BACKEND);
  if (st == STRATA_OK) strata_device_free(dev);
  dp = strata_device_default_params();
  dp.struct_size = 1;
  check_status("device params struct_size too small", strata_device_open(&dp, &dev), STRATA_ERR_INVALID_ARGUMENT, "struct_size");
  dev = NULL;
  check_status("device_open", strata_device_open(NULL, &dev), STRATA_OK, NULL);
  expect("log callback called", atomic_load(&log_lines) > 0);
  strata_set_log_callback(NULL, 0, NULL);
  strata_device_props dinfo = {.struct_size = sizeof dinfo};
  check_status("device_info", strata_device_info(dev, &dinfo), STRATA_OK, NULL);
  expect("backend is cpu", strcmp(dinfo.backend, "cpu") == 0);

  /* model */
  strata_model* model = NULL;
  check_status("model_load dir NULL", strata_model_load(dev, NULL, NULL, &model), STRATA_ERR_INVALID_ARGUMENT, "NULL");
  check_status("model_load device NULL", strata_model_load(NULL, dir, NULL, &model), STRATA_ERR_INVALID_HANDLE, "NULL strata_device");
  check_status("model_load missing dir", strata_model_load(dev, "/nonexistent/strata", NULL, &model), STRATA_ERR_CHECKPOINT, "/nonexistent/strata");
  check_status("model_load", strata_model_load(dev, dir, NULL, &model), STRATA_OK, NULL);
  check_status("model handle as device", strata_device_info((strata_device*)model, &dinfo), STRATA_ERR_INVALID_HANDLE, "not a strata_device");
  strata_model_props minfo = {.struct_size = sizeof minfo};
  check_status("model_info", strata_model_info(model, &minfo), STRATA_OK, NULL);
  expect("model is qwen4_exp, vocab 512", strcmp(minfo.arch, "qwen4_exp") == 0 && minfo.vocab == 512);
  size_t full = 0;
  check_status("model_describe truncated", strata_model_describe(model, buf, 8, &full), STRATA_OK, NULL);
  expect("describe reports the full length and truncates", full > 8 && strlen(buf) == 7);

  /* session */
  strata_session* s = NULL;
  strata_session_params sp = strata_session_default_params();
  sp.max_context = 128;
  check_status("session_new", strata_session_new(model, &sp, &s), STRATA_OK, NULL);
  int32_t toks[96];
  for (int i = 0; i < 96; i++) toks[i] = (i * 37 + 5) % 512;
  float logits[512 * 2];
  size_t written = 0;
  check_status("prefill tokens NULL", strata_session_prefill(s, NULL, 3, NULL, logits, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "NULL");
  check_status("prefill zero tokens", strata_session_prefill(s, toks, 0, NULL, logits, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "empty");
  check_status("prefill buffer too small", strata_session_prefill(s, toks, 3, NULL, logits, 511, NULL), STRATA_ERR_SHAPE, "logits_cap 511");
  strata_prefill_params pp = strata_prefill_default_params();
  pp.all_logits = 1;
  check_status("prefill all logits too small", strata_session_prefill(s, toks, 3, &pp, logits, 1024, NULL), STRATA_ERR_SHAPE, "1536");
  check_status("prefill NULL buffer with cap", strata_session_prefill(s, toks, 3, NULL, NULL, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "logits_out is NULL");
  int32_t bad[2] = {1, 512};
  check_status("prefill token out of range", strata_session_prefill(s, bad, 2, NULL, logits, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "512");
  check_status("prefill 96 tokens", strata_session_prefill(s, toks, 96, NULL, logits, 512, NULL), STRATA_OK, NULL);
  check_status("prefill past max_context", strata_session_prefill(s, toks, 40, NULL, logits, 512, NULL), STRATA_ERR_CAPACITY, "context");
  int64_t pos = -1;
  check_status("position", strata_session_position(s, &pos), STRATA_OK, NULL);
  expect("failed prefills left position at 96", pos == 96);
  check_status("position out NULL", strata_session_position(s, NULL), STRATA_ERR_INVALID_ARGUMENT, "NULL");
  check_status("reset", strata_session_reset(s), STRATA_OK, NULL);

  /* snapshot and restore */
  strata_snapshot* snap = NULL;
  float a[512], b[512];
  check_status("prefill 10", strata_session_prefill(s, toks, 10, NULL, logits, 512, &written), STRATA_OK, NULL);
  expect("written 512", written == 512);
  check_status("snapshot", strata_session_snapshot(s, &snap), STRATA_OK, NULL);
  check_status("prefill 5 more", strata_session_prefill(s, toks + 10, 5, NULL, a, 512, NULL), STRATA_OK, NULL);
  check_status("restore", strata_session_restore(s, snap), STRATA_OK, NULL);
  check_status("prefill 5 again", strata_session_prefill(s, toks + 10, 5, NULL, b, 512, NULL), STRATA_OK, NULL);
  expect("restore then prefill repeats bitwise", memcmp(a, b, sizeof a) == 0);
  check_status("restore session as snapshot", strata_session_restore(s, (strata_snapshot*)s), STRATA_ERR_INVALID_HANDLE, "not a strata_snapshot");
  check_status("snapshot_free", strata_snapshot_free(snap), STRATA_OK, NULL);
  check_status("snapshot double free", strata_snapshot_free(snap), STRATA_ERR_INVALID_HANDLE, "already freed");
  check_status("restore freed snapshot", strata_session_restore(s, snap), STRATA_ERR_INVALID_HANDLE, "already freed");

  /* one session, two threads */
  check_status("reset", strata_session_reset(s), STRATA_OK, NULL);
  struct busy_arg ba = {.s = s, .tokens = toks, .n = 96};
  pthread_t th;
  pthread_create(&th, NULL, long_prefill, &ba);
  while (!atomic_load(&ba.started)) {
  }
  int saw_busy = 0, other = 0;
  for (int i = 0; i < 200000 && !atomic_load(&ba.finished); i++) {
    strata_status ps = strata_session_position(s, &pos);
    if (ps == STRATA_ERR_BUSY) saw_busy++;
    else if (ps != STRATA_OK) other++;
  }
  strata_status fs = strata_session_free(s);
  expect("free during a prefill is BUSY or waits for none", fs == STRATA_ERR_BUSY || (fs == STRATA_OK && atomic_load(&ba.finished)));
  pthread_join(th, NULL);
  check_status("background prefill", ba.st, STRATA_OK, NULL);
  expect("position from a second thread: BUSY while the prefill ran, no other error", saw_busy > 0 && other == 0);
  printf("     (%d BUSY answers)\n", saw_busy);

  /* freed and double-freed handles: the handle value stays the same whether the free above
     succeeded (the prefill had finished) or was refused as BUSY and is done here. */
  if (fs != STRATA_OK) check_status("session_free", strata_session_free(s), STRATA_OK, NULL);
  check_status("prefill on freed session", strata_session_prefill(s, toks, 1, NULL, logits, 512, NULL), STRATA_ERR_INVALID_HANDLE, "freed");
  check_status("session double free", strata_session_free(s), STRATA_ERR_INVALID_HANDLE, "already freed");
  check_status("free NULL session", strata_session_free(NULL), STRATA_OK, NULL);
  check_status("forged handle", strata_session_reset((strata_session*)(uintptr_t)0x7fff0003), STRATA_ERR_INVALID_HANDLE, "never issued");

  /* many threads share the device and the model */
  {
    static const int32_t prompt[6] = {7, 300, 11, 511, 2, 99};
    float ref[512];
    strata_session* s0 = NULL;
    strata_session_new(model, NULL, &s0);
    check_status("reference prefill", strata_session_prefill(s0, prompt, 6, NULL, ref, 512, NULL), STRATA_OK, NULL);
    strata_session_free(s0);
    enum { N = 4 };
    pthread_t ths[N];
    struct share_arg args[N];
    for (int i = 0; i < N; i++) {
      args[i] = (struct share_arg){.m = model, .ref = ref};
      pthread_create(&ths[i], NULL, shared_worker, &args[i]);
    }
    int bad_total = 0;
    for (int i = 0; i < N; i++) {
      pthread_join(ths[i], NULL);
      bad_total += args[i].bad;
    }
    expect("4 threads x 3 sessions on one model: identical logits, no errors", bad_total == 0);
  }

  /* ops: descriptor checks */
  {
    float q[2 * 2 * 4] = {0}, kv[2 * 1 * 4] = {0}, o[2 * 2 * 4];
    int32_t qi[16];
    int64_t qs[3] = {2, 2, 4}, ks[3] = {2, 1, 4}, bad_s[3] = {2, 2, 5}, strides[3] = {1, 2, 4};
    strata_tensor tq = {q, STRATA_F32, 3, qs, NULL}, tk = {kv, STRATA_F32, 3, ks, NULL}, to = {o, STRATA_F32, 3, qs, NULL};
    check_status("attention ok", strata_attention(dev, &tq, &tk, &tk, &to, NULL, NULL), STRATA_OK, NULL);
    check_status("attention q NULL", strata_attention(dev, NULL, &tk, &tk, &to, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "q: NULL");
    strata_tensor ti = {qi, STRATA_I32, 3, qs, NULL};
    check_status("attention q int32", strata_attention(dev, &ti, &tk, &tk, &to, NULL, NULL), STRATA_ERR_DTYPE, "q: dtype i32");
    strata_tensor tob = {o, STRATA_F32, 3, bad_s, NULL};
    check_status("attention o wrong shape", strata_attention(dev, &tq, &tk, &tk, &tob, NULL, NULL), STRATA_ERR_SHAPE, "o: shape");
    strata_tensor tn = {NULL, STRATA_F32, 3, qs, NULL};
    check_status("attention NULL data", strata_attention(dev, &tn, &tk, &tk, &to, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "NULL data");
    strata_tensor tshape = {q, STRATA_F32, 3, NULL, NULL};
    check_status("attention NULL shape", strata_attention(dev, &tshape, &tk, &tk, &to, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "NULL shape");
    strata_tensor tnd = {q, STRATA_F32, 9, qs, NULL};
    check_status("attention ndim 9", strata_attention(dev, &tnd, &tk, &tk, &to, NULL, NULL), STRATA_ERR_SHAPE, "ndim 9");
    strata_tensor tst = {q, STRATA_F32, 3, qs, strides};
    check_status("attention strided q", strata_attention(dev, &tst, &tk, &tk, &to, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "contiguous");
    strata_attention_params ap = strata_attention_default_params();
    ap.struct_size = 0;
    check_status("attention params struct_size 0", strata_attention(dev, &tq, &tk, &tk, &to, NULL, &ap), STRATA_ERR_INVALID_ARGUMENT, "struct_size");
    strata_tensor tal = {q, STRATA_F32, 3, qs, NULL};
    strata_tensor toal = {q, STRATA_F32, 3, qs, NULL};
    check_status("attention output aliases q", strata_attention(dev, &tal, &tk, &tk, &toal, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "overlaps");

    float ye[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, w[2 * 2] = {0.5f, 0.25f, 1, 2}, out[2 * 4];
    int32_t rk[4] = {0, 2, -1, 1}, rk_bad[4] = {0, 3, -1, 1};
    int64_t ys[2] = {3, 4}, rs[2] = {2, 2}, os[2] = {2, 4}, os_small[2] = {1, 4};
    strata_tensor tye = {ye, STRATA_F32, 2, ys, NULL}, trk = {rk, STRATA_I32, 2, rs, NULL}, tw = {w, STRATA_F32, 2, rs, NULL};
    strata_tensor tout = {out, STRATA_F32, 2, os, NULL};
    check_status("moe_combine", strata_moe_combine(dev, &tye, &trk, &tw, &tout, NULL), STRATA_OK, NULL);
    expect("moe_combine values", out[0] == 0.5f * 1 + 0.25f * 9 && out[4] == 2 * 5 && out[7] == 2 * 8);
    strata_tensor trkb = {rk_bad, STRATA_I32, 2, rs, NULL};
    check_status("moe_combine rk out of range", strata_moe_combine(dev, &tye, &trkb, &tw, &tout, NULL), STRATA_ERR_INVALID_ARGUMENT, "rk[0, 1] = 3");
    strata_tensor touts = {out, STRATA_F32, 2, os_small, NULL};
    check_status("moe_combine output too small", strata_moe_combine(dev, &tye, &trk, &tw, &touts, NULL), STRATA_ERR_SHAPE, "out: shape");
    strata_tensor trkf = {rk, STRATA_F32, 2, rs, NULL};
    check_status("moe_combine rk as float", strata_moe_combine(dev, &tye, &trkf, &tw, &tout, NULL), STRATA_ERR_DTYPE, "rk: dtype f32");
    strata_gdn_params gp = strata_gdn_default_params();
    gp.mode = 9;
    float g1[2] = {0}, st1[16] = {0}, o1[8];
    int64_t s2[2] = {2, 1}, s3[3] = {2, 1, 4}, ss[3] = {1, 4, 4};
    strata_tensor tg = {g1, STRATA_F32, 2, s2, NULL}, tst1 = {st1, STRATA_F32, 3, ss, NULL}, to1 = {o1, STRATA_F32, 3, s3, NULL};
    strata_tensor tq1 = {q, STRATA_F32, 3, s3, NULL}, tk1 = {kv, STRATA_F32, 3, s3, NULL};
    check_status("gdn_scan unknown mode", strata_gdn_scan(dev, &tq1, &tk1, &tk1, &tg, &tg, &tst1, &to1, &gp), STRATA_ERR_INVALID_ARGUMENT, "mode 9");
    check_status("gdn_scan state NULL", strata_gdn_scan(dev, &tq1, &tk1, &tk1, &tg, &tg, NULL, &to1, NULL), STRATA_ERR_INVALID_ARGUMENT, "state: NULL");
    check_status("gdn_scan ok", strata_gdn_scan(dev, &tq1, &tk1, &tk1, &tg, &tg, &tst1, &to1, NULL), STRATA_OK, NULL);
  }

  /* steps and pipeline stages: all logits of 60 tokens from the whole model in calls of 16
     tokens, in one call with step 16, and from two stages [0, k) and [k, L) (step 16 each)
     chained through hidden_out / hidden_in, for every k: the same bits. */
  {
    enum { T = 60 };
    static float whole[T * 512], got[T * 512];
    int64_t L = minfo.layers, H = 0;
    strata_session* ws = NULL;
    strata_session_new(model, NULL, &ws);
    strata_prefill_params p1 = strata_prefill_default_params();
    expect("default step is STRATA_DEFAULT_STEP", p1.step == STRATA_DEFAULT_STEP);
    p1.all_logits = 1;
    p1.step = 0;
    for (int at = 0; at < T; at += 16) {
      int n = T - at < 16 ? T - at : 16;
      check_status("whole model, calls of 16 tokens", strata_session_prefill(ws, toks + at, n, &p1, whole + at * 512, n * 512, NULL), STRATA_OK, NULL);
    }
    strata_session_reset(ws);
    p1.step = 16;
    check_status("whole model, one call in steps of 16", strata_session_prefill(ws, toks, T, &p1, got, T * 512, NULL), STRATA_OK, NULL);
    expect("steps of 16 == calls of 16, bitwise", memcmp(got, whole, sizeof whole) == 0);
    strata_session_reset(ws);
    p1.step = -1;
    check_status("negative step", strata_session_prefill(ws, toks, T, &p1, got, T * 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "step -1");
    strata_session_free(ws);
    strata_model_params mp = strata_model_default_params();
    strata_model* st0 = NULL;
    mp.layer_lo = 2, mp.layer_hi = 1;
    check_status("empty layer range", strata_model_load(dev, dir, &mp, &st0), STRATA_ERR_INVALID_ARGUMENT, "[2, 1)");
    mp.layer_lo = 0, mp.layer_hi = L + 1;
    check_status("layer range past the model", strata_model_load(dev, dir, &mp, &st0), STRATA_ERR_INVALID_ARGUMENT, "layers");
    int all_equal = 1;
    for (int64_t k = 1; k < L; k++) {
      strata_model *m0 = NULL, *m1 = NULL;
      mp.layer_lo = 0, mp.layer_hi = k;
      check_status("load stage [0, k)", strata_model_load(dev, dir, &mp, &m0), STRATA_OK, NULL);
      mp.layer_lo = k, mp.layer_hi = L;
      check_status("load stage [k, L)", strata_model_load(dev, dir, &mp, &m1), STRATA_OK, NULL);
      strata_model_props pi = {.struct_size = sizeof pi};
      strata_model_info(m1, &pi);
      expect("stage props", pi.layer_lo == k && pi.layer_hi == L && pi.layers == L && pi.hidden_size > 0);
      H = pi.hidden_size;
      float* hidden = malloc(sizeof(float) * T * H);
      strata_session *s0 = NULL, *s1 = NULL;
      strata_session_new(m0, NULL, &s0);
      strata_session_new(m1, NULL, &s1);
      strata_prefill_params q = strata_prefill_default_params();
      q.step = 16;
      if (k == 1) {
        check_status("headless stage without hidden_out", strata_session_prefill(s0, toks, T, &q, NULL, 0, NULL), STRATA_ERR_INVALID_ARGUMENT, "hidden_out");
        check_status("headless stage with logits_out", strata_session_prefill(s0, toks, T, &q, got, T * 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "no head");
        q.hidden_out = hidden, q.hidden_out_cap = T * H - 1;
        check_status("hidden_out too small", strata_session_prefill(s0, toks, T, &q, NULL, 0, NULL), STRATA_ERR_SHAPE, "hidden_out_cap");
      }
      q.hidden_out = hidden, q.hidden_out_cap = T * H;
      check_status("stage [0, k)", strata_session_prefill(s0, toks, T, &q, NULL, 0, NULL), STRATA_OK, NULL);
      strata_prefill_params r = strata_prefill_default_params();
      r.all_logits = 1, r.step = 16;
      if (k == 1) {
        check_status("second stage without hidden_in", strata_session_prefill(s1, toks, T, &r, got, T * 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "hidden_in must hold");
        r.hidden_in = hidden, r.hidden_in_len = T * H - 1;
        check_status("hidden_in too short", strata_session_prefill(s1, toks, T, &r, got, T * 512, NULL), STRATA_ERR_SHAPE, "hidden_in_len");
        float keep = hidden[5];
        hidden[5] = NAN;
        r.hidden_in_len = T * H;
        check_status("hidden_in with NaN", strata_session_prefill(s1, toks, T, &r, got, T * 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "NaN");
        hidden[5] = keep;
        int64_t p = -1;
        strata_session_position(s1, &p);
        expect("refused stage prefills left position 0", p == 0);
      }
      r.hidden_in = hidden, r.hidden_in_len = T * H;
      check_status("stage [k, L)", strata_session_prefill(s1, toks, T, &r, got, T * 512, NULL), STRATA_OK, NULL);
      all_equal &= memcmp(got, whole, sizeof whole) == 0;
      strata_session_free(s0);
      strata_session_free(s1);
      strata_model_free(m0);
      strata_model_free(m1);
      free(hidden);
    }
    strata_session* s2 = NULL;
    strata_session_new(model, NULL, &s2);
    strata_prefill_params r2 = strata_prefill_default_params();
    r2.hidden_in = whole, r2.hidden_in_len = 64;
    check_status("hidden_in to a whole model", strata_session_prefill(s2, toks, 1, &r2, got, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "starts at layer 0");
    r2 = strata_prefill_default_params();
    r2.hidden_out = got, r2.hidden_out_cap = 64;
    check_status("hidden_out to a whole model", strata_session_prefill(s2, toks, 1, &r2, got, 512, NULL), STRATA_ERR_INVALID_ARGUMENT, "holds the head");
    strata_session_free(s2);
    expect("two chained stages == the whole model, bitwise, for every split", all_equal);
  }

  /* session state files and the prompt cache */
  if (argc == 3) {
    char path[4096];
    snprintf(path, sizeof path, "%s/s.state", argv[2]);
    strata_session *a = NULL, *b = NULL;
    strata_session_new(model, NULL, &a);
    strata_session_new(model, NULL, &b);
    int32_t p40[40], ids[64];
    for (int i = 0; i < 40; i++) p40[i] = (i * 37 + 5) % 512;
    float la[512], lb[512];
    check_status("prefill 30 tokens", strata_session_prefill(a, p40, 30, NULL, NULL, 0, NULL), STRATA_OK, NULL);
    check_status("session_save NULL path", strata_session_save(a, NULL), STRATA_ERR_INVALID_ARGUMENT, "path is NULL");
    check_status("session_save", strata_session_save(a, path), STRATA_OK, NULL);
    {
      char mpath[4096];
      snprintf(mpath, sizeof mpath, "%s/m.safetensors", argv[2]);
      strata_mlx_lm_params mp = strata_mlx_lm_default_params();
      expect("mlx_lm default params", mp.struct_size == sizeof mp && !mp.format && !mp.dtype && !mp.model);
      check_status("save_mlx_lm NULL path", strata_session_save_mlx_lm(a, NULL, NULL), STRATA_ERR_INVALID_ARGUMENT, "path is NULL");
      mp.struct_size = 1;
      check_status("save_mlx_lm struct_size too small", strata_session_save_mlx_lm(a, mpath, &mp), STRATA_ERR_INVALID_ARGUMENT, "struct_size");
      mp = strata_mlx_lm_default_params();
      mp.format = "legacy", mp.dtype = "float32";
      check_status("save_mlx_lm of a qwen4_exp session", strata_session_save_mlx_lm(a, mpath, &mp), STRATA_ERR_UNSUPPORTED, "qwen4_exp family");
      FILE* f = fopen(mpath, "rb");
      expect("a refused mlx-lm export writes no file", f == NULL);
      if (f) fclose(f);
    }
    check_status("session_load", strata_session_load(b, path), STRATA_OK, NULL);
    size_t n = 0;
    check_status("session_tokens count", strata_session_tokens(b, NULL, 0, &n), STRATA_OK, NULL);
    expect("session_tokens: 30 ids", n == 30);
    check_status("session_tokens buffer too small", strata_session_tokens(b, ids, 10, &n), STRATA_ERR_SHAPE, "holds 10 ids");
    check_status("session_tokens", strata_session_tokens(b, ids, 64, &n), STRATA_OK, NULL);
    expect("the loaded session's ids", n == 30 && memcmp(ids, p40, 30 * sizeof(int32_t)) == 0);
    strata_session_prefill(a, p40 + 30, 10, NULL, la, 512, NULL);
    strata_session_prefill(b, p40 + 30, 10, NULL, lb, 512, NULL);
    expect("a loaded session continues bitwise", memcmp(la, lb, sizeof la) == 0);
    check_status("session_load missing file", strata_session_load(b, "/nonexistent/x.state"), STRATA_ERR_CHECKPOINT, "/nonexistent/x.state");
    int64_t pos = -1;
    strata_session_position(b, &pos);
    expect("a refused file left the session", pos == 40);

    strata_prompt_cache* pc = NULL;
    strata_prompt_cache_params cp = strata_prompt_cache_default_params();
    cp.bytes = 1000;
    check_status("prompt cache budget below one checkpoint", strata_prompt_cache_new(model, &cp, &pc), STRATA_ERR_INVALID_ARGUMENT, "smaller than one checkpoint");
    cp = strata_prompt_cache_default_params();
    cp.every = 16, cp.dir = argv[2];
    check_status("prompt_cache_new", strata_prompt_cache_new(model, &cp, &pc), STRATA_OK, NULL);
    strata_prompt_cache_result res = {.struct_size = sizeof res};
    check_status("cache prefill, cold", strata_prompt_cache_prefill(pc, a, p40, 40, NULL, la, 512, NULL, &res), STRATA_OK, NULL);
    expect("cold: nothing reused, 3 checkpoints", res.reused == 0 && res.tokens == 40 && res.source == STRATA_CACHE_MISS && res.checkpoints == 3);
    check_status("cache prefill, the same prompt", strata_prompt_cache_prefill(pc, b, p40, 40, NULL, lb, 512, NULL, &res), STRATA_OK, NULL);
    expect("the whole prompt from memory, the same logits", res.reused == 40 && res.source == STRATA_CACHE_MEMORY && memcmp(la, lb, sizeof la) == 0);
    strata_prefill_params ap = strata_prefill_default_params();
    ap.all_logits = 1;
    check_status("cache prefill all logits, buffer short", strata_prompt_cache_prefill(pc, b, p40, 40, &ap, la, 512, NULL, &res), STRATA_ERR_SHAPE, "logits_cap");
    res.struct_size = 8;
    check_status("cache result struct_size too small", strata_prompt_cache_prefill(pc, b, p40, 40, NULL, la, 512, NULL, &res), STRATA_ERR_INVALID_ARGUMENT, "struct_size");
    check_status("cache prefill, session as the cache", strata_prompt_cache_prefill((strata_prompt_cache*)a, b, p40, 40, NULL, la, 512, NULL, NULL), STRATA_ERR_INVALID_HANDLE, "not a strata_prompt_cache");
    check_status("prompt_cache_free", strata_prompt_cache_free(pc), STRATA_OK, NULL);
    check_status("prompt_cache double free", strata_prompt_cache_free(pc), STRATA_ERR_INVALID_HANDLE, "already freed");
    strata_session_free(a);
    strata_session_free(b);
  }

  /* one-shot */
  check_status("strata_prefill", strata_prefill(dir, toks, 4, NULL, logits, 512, NULL), STRATA_OK, NULL);
  check_status("strata_prefill bad dir", strata_prefill("/nonexistent", toks, 4, NULL, logits, 512, NULL), STRATA_ERR_CHECKPOINT, NULL);

  check_status("model_free", strata_model_free(model), STRATA_OK, NULL);
  check_status("model double free", strata_model_free(model), STRATA_ERR_INVALID_HANDLE, "already freed");
  check_status("device_free", strata_device_free(dev), STRATA_OK, NULL);
  check_status("device double free", strata_device_free(dev), STRATA_ERR_INVALID_HANDLE, "already freed");

  /* last error sizing */
  strata_device_free((strata_device*)(uintptr_t)0x8);
  size_t need = strata_last_error(NULL, 0);
  char* whole = malloc(need + 1);
  expect("last_error returns the full length", whole != NULL && strata_last_error(whole, need + 1) == need && strlen(whole) == need);
  free(whole);

  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
