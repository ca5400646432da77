/*
 * prefill: load a checkpoint through libstrata and prefill a prompt, the C counterpart of
 * `go run ./cmd/strata` (its prefill).
 *
 *   cc -std=c11 -O2 -I include examples/c/prefill.c -L. -lstrata -o strata-prefill
 *   LD_LIBRARY_PATH=. ./strata-prefill [--all-logits] [--chunk N] [--out FILE] [-v] MODEL_DIR TOKENS
 *
 * TOKENS is a comma-separated list of token ids ("1,2,3") or @FILE naming a file of ids
 * separated by commas or white space. --out writes the logits as raw little-endian float32:
 * [T, vocab] with --all-logits, else [vocab] for the last token. Exit status 0 on success, 1 on
 * a usage error, 2 when a strata call fails (its status name and message go to stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata.h"

static void log_to_stderr(int32_t level, const char* msg, void* user_data) {
  (void)user_data;
  static const char* names[] = {"debug", "info", "warn", "error"};
  fprintf(stderr, "[%s] %s\n", (level >= 0 && level <= 3) ? names[level] : "?", msg);
}

/* fail prints the failed call's status and the thread's last error message. */
static int fail(const char* what, strata_status st) {
  size_t n = strata_last_error(NULL, 0);
  char* msg = malloc(n + 1);
  if (msg != NULL) strata_last_error(msg, n + 1);
  fprintf(stderr, "%s: %s: %s\n", what, strata_status_name(st), msg != NULL ? msg : "(no memory for the message)");
  free(msg);
  return 2;
}

/* parse_tokens reads "1,2,3" or @file into a malloc'ed array; returns the count, 0 on error. */
static size_t parse_tokens(const char* arg, int32_t** out) {
  char* text = NULL;
  if (arg[0] == '@') {
    FILE* f = fopen(arg + 1, "rb");
    if (f == NULL) {
      perror(arg + 1);
      return 0;
    }
    size_t cap = 1 << 16, len = 0;
    text = malloc(cap);
    size_t got;
    while (text != NULL && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
      len += got;
      if (len + 1 == cap) text = realloc(text, cap *= 2);
    }
    fclose(f);
    if (text == NULL) return 0;
    text[len] = 0;
  } else {
    text = malloc(strlen(arg) + 1);
    if (text == NULL) return 0;
    strcpy(text, arg);
  }
  size_t n = 0, cap = 256;
  int32_t* toks = malloc(cap * sizeof *toks);
  for (char* p = text; toks != NULL && *p;) {
    while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p || v < INT32_MIN || v > INT32_MAX) {
      fprintf(stderr, "bad token id near \"%.16s\"\n", p);
      free(toks);
      free(text);
      return 0;
    }
    if (n == cap) toks = realloc(toks, (cap *= 2) * sizeof *toks);
    if (toks != NULL) toks[n++] = (int32_t)v;
    p = end;
  }
  free(text);
  *out = toks;
  return toks != NULL ? n : 0;
}

static double seconds(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
  fprintf(stderr, "usage: strata-prefill [--all-logits] [--chunk N] [--out FILE] [-v] MODEL_DIR TOKENS\n");
  return 1;
}

int main(int argc, char** argv) {
  int all_logits = 0, verbose = 0;
  long chunk = 0;
  const char* out_path = NULL;
  const char* args[2];
  int nargs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--all-logits") == 0) all_logits = 1;
    else if (strcmp(argv[i], "-v") == 0) verbose = 1;
    else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
      char* end;
      chunk = strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != 0) return usage();
    }
    else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out_path = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1] == '-') return usage();
    else if (nargs < 2) args[nargs++] = argv[i];
    else return usage();
  }
  if (nargs != 2 || chunk < 0) return usage();

  if (strata_abi_version() != STRATA_ABI_VERSION) {
    fprintf(stderr, "libstrata ABI %d does not match this program's header (%d)\n", strata_abi_version(), STRATA_ABI_VERSION);
    return 2;
  }
  if (verbose) strata_set_log_callback(log_to_stderr, STRATA_LOG_DEBUG, NULL);

  int32_t* tokens = NULL;
  size_t n = parse_tokens(args[1], &tokens);
  if (n == 0) { /* parse_tokens printed why, unless the list was simply empty */
    fprintf(stderr, "no usable token ids in %s\n", args[1]);
    return 1;
  }

  strata_status st;
  strata_device* dev = NULL;
  strata_model* model = NULL;
  strata_session* sess = NULL;
  float* logits = NULL;
  int rc = 0;

  if ((st = strata_device_open(NULL, &dev)) != STRATA_OK) { rc = fail("strata_device_open", st); goto done; }
  strata_device_props dinfo = {.struct_size = sizeof dinfo};
  if ((st = strata_device_info(dev, &dinfo)) != STRATA_OK) { rc = fail("strata_device_info", st); goto done; }

  double t0 = seconds();
  if ((st = strata_model_load(dev, args[0], NULL, &model)) != STRATA_OK) { rc = fail("strata_model_load", st); goto done; }
  double load_s = seconds() - t0;
  strata_model_props minfo = {.struct_size = sizeof minfo};
  if ((st = strata_model_info(model, &minfo)) != STRATA_OK) { rc = fail("strata_model_info", st); goto done; }
  char desc[512];
  if ((st = strata_model_describe(model, desc, sizeof desc, NULL)) != STRATA_OK) { rc = fail("strata_model_describe", st); goto done; }

  strata_session_params sp = strata_session_default_params();
  sp.max_context = n > 4096 ? (int64_t)n : 4096;
  if ((st = strata_session_new(model, &sp, &sess)) != STRATA_OK) { rc = fail("strata_session_new", st); goto done; }

  size_t vocab = (size_t)minfo.vocab;
  size_t rows = all_logits ? n : 1;
  logits = malloc(rows * vocab * sizeof *logits);
  if (logits == NULL) { fprintf(stderr, "out of memory\n"); rc = 2; goto done; }

  printf("library   %s\n", strata_version_string());
  printf("backend   %s\n", dinfo.backend);
  printf("kernels   %s\n", dinfo.kernels);
  printf("model     %s\n", desc);
  printf("          %s (loaded in %.0f ms)\n", args[0], 1e3 * load_s);
  printf("prompt    %zu tokens", n);
  if (chunk > 0) printf(" in chunks of %ld", chunk);
  printf("\n");

  strata_prefill_params pp = strata_prefill_default_params();
  pp.all_logits = all_logits;
  size_t step = chunk > 0 ? (size_t)chunk : n;
  t0 = seconds();
  for (size_t at = 0; at < n; at += step) {
    size_t len = n - at < step ? n - at : step;
    /* With --all-logits each chunk's rows land at their place in the [T, vocab] buffer; else
     * every chunk overwrites the one row and the last chunk's remains. */
    float* dst = all_logits ? logits + at * vocab : logits;
    size_t cap = all_logits ? (n - at) * vocab : vocab, written = 0;
    if ((st = strata_session_prefill(sess, tokens + at, len, &pp, dst, cap, &written)) != STRATA_OK) {
      rc = fail("strata_session_prefill", st);
      goto done;
    }
  }
  double pre_s = seconds() - t0;
  int64_t pos = 0;
  if ((st = strata_session_position(sess, &pos)) != STRATA_OK) { rc = fail("strata_session_position", st); goto done; }
  printf("prefill   %zu tokens in %.1f ms: %.1f tokens/s\n", n, 1e3 * pre_s, (double)n / pre_s);

  const float* last = logits + (rows - 1) * vocab;
  int top[5] = {-1, -1, -1, -1, -1};
  for (size_t k = 0; k < 5 && k < vocab; k++) {
    for (size_t i = 0; i < vocab; i++) {
      int taken = 0;
      for (size_t j = 0; j < k; j++) taken |= top[j] == (int)i;
      if (!taken && (top[k] < 0 || last[i] > last[top[k]])) top[k] = (int)i;
    }
  }
  printf("top-5     next token after position %lld:", (long long)pos - 1);
  for (size_t k = 0; k < 5 && k < vocab; k++) printf("  %d (%.4f)", top[k], last[top[k]]);
  printf("\n");

  if (out_path != NULL) {
    FILE* f = fopen(out_path, "wb");
    if (f == NULL || fwrite(logits, sizeof *logits, rows * vocab, f) != rows * vocab) {
      fprintf(stderr, "writing %s failed\n", out_path);
      rc = 2;
    }
    if (f != NULL && fclose(f) != 0) rc = 2;
    if (rc == 0) printf("saved     %s\n", out_path);
  }

done:
  free(logits);
  free(tokens);
  strata_session_free(sess);
  strata_model_free(model);
  strata_device_free(dev);
  return rc;
}
