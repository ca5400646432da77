/*
 * strata.h: the C interface of libstrata, a prefill engine for hybrid Gated DeltaNet /
 * attention mixture-of-experts language models (Qwen3.8-Flash-Next, Qwen3-Next).
 *
 * Build the library with
 *     go build -buildmode=c-shared -o libstrata.so ./capi        (Linux)
 *     go build -buildmode=c-shared -o libstrata.dylib ./capi     (macOS)
 * and compile hosts with  cc -std=c11 -I include host.c -L. -lstrata.
 *
 * Conventions (every function follows them):
 *  - Every function except the version, default-params and last-error functions returns a
 *    strata_status; STRATA_OK (0) is success. On failure nothing the caller passed is
 *    modified unless the function says otherwise, and strata_last_error() returns a message.
 *  - Handles (strata_device*, strata_model*, strata_session*, strata_snapshot*,
 *    strata_prompt_cache*, strata_tokenizer*) are opaque
 *    values; they do not point to memory the caller may read. A handle of the wrong kind, an
 *    unknown or an already freed handle gives STRATA_ERR_INVALID_HANDLE, never a crash. Handle
 *    values are never reused within a process.
 *  - Every *_open/_load/_new/_snapshot has exactly one *_free; passing NULL to *_free is a
 *    no-op that returns STRATA_OK; freeing twice returns STRATA_ERR_INVALID_HANDLE.
 *  - Callers own every buffer they pass. Outputs are written into caller buffers whose sizes are
 *    passed in and checked before any work. Pointers are used only during the call: the
 *    library keeps none of them after it returns.
 *  - Params structs start with struct_size; fill them with the matching *_default_params()
 *    and change the fields you need, so that fields appended in later versions keep their
 *    defaults. A NULL params pointer means the defaults.
 *  - Thread safety: devices, models, snapshots and prompt caches may be used from many threads at once. A
 *    session is used by one thread at a time: a call on a session that another thread is
 *    using returns STRATA_ERR_BUSY and changes nothing (strata_session_cancel is the
 *    exception: it may be called from any thread).
 *  - The library never exits the process and never prints; errors are statuses and messages,
 *    and log messages go to the callback set with strata_set_log_callback (none by default).
 */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this interface. Increases when functions, struct fields or codes are added, or when
 * a declaration changes (version 2: the op-level entry points take the device they run on
 * first; prefill steps and pipeline stages; version 3: session state files, the session's token
 * ids and the prompt cache; version 4: the session written as an mlx-lm prompt-cache file;
 * version 5: strata_model_params.compute and strata_model_compute, so a host built against an
 * older header passes a smaller struct_size and gets INVALID_ARGUMENT until rebuilt); status
 * codes and struct layouts of one version never change. */
#define STRATA_ABI_VERSION 5

/* strata_prefill_params.step by default: tokens run at once within a prefill call. */
#define STRATA_DEFAULT_STEP 1024

/* strata_prompt_cache_params defaults: the memory budget in bytes (2 GiB) and the checkpoint
 * spacing in tokens. */
#define STRATA_DEFAULT_PROMPT_CACHE_BYTES 2147483648LL
#define STRATA_DEFAULT_CHECKPOINT_EVERY 1024

/* Where strata_prompt_cache_prefill resumed (strata_prompt_cache_result.source). */
#define STRATA_CACHE_MISS    0  /* nothing reused: the whole prompt was prefilled */
#define STRATA_CACHE_SESSION 1  /* the session's own state (its tokens were a prefix) */
#define STRATA_CACHE_MEMORY  2  /* a checkpoint held in memory */
#define STRATA_CACHE_DISK    3  /* a state file of the cache directory */

/* Status codes. Stable; new codes are only appended. */
typedef int32_t strata_status;
#define STRATA_OK                     0
#define STRATA_ERR_INVALID_ARGUMENT   1  /* NULL pointer, value out of range, bad option */
#define STRATA_ERR_INVALID_HANDLE     2  /* NULL, unknown, freed or wrong-kind handle */
#define STRATA_ERR_SHAPE              3  /* tensor shapes or buffer lengths do not match */
#define STRATA_ERR_DTYPE              4  /* unsupported element type */
#define STRATA_ERR_CAPACITY           5  /* the session's context would be exceeded */
#define STRATA_ERR_CHECKPOINT         6  /* missing, corrupt or inconsistent checkpoint */
#define STRATA_ERR_BACKEND            7  /* backend unavailable or a kernel failed */
#define STRATA_ERR_OUT_OF_MEMORY      8  /* an allocation the library (or the device) could not make */
#define STRATA_ERR_CANCELLED          9  /* cancelled (strata_session_cancel); state unchanged */
#define STRATA_ERR_INTERNAL          10  /* a bug in strata, recovered; the message says where */
#define STRATA_ERR_BUSY              11  /* the session is in use by another thread */
#define STRATA_ERR_UNSUPPORTED       12  /* a valid format, setting or shape strata does not run (named in the message) */

/* Element types of strata_tensor. */
#define STRATA_F32   0
#define STRATA_F16   1
#define STRATA_BF16  2
#define STRATA_I32   3
#define STRATA_U8    4

/* Log levels passed to the log callback. */
#define STRATA_LOG_DEBUG 0
#define STRATA_LOG_INFO  1
#define STRATA_LOG_WARN  2
#define STRATA_LOG_ERROR 3

/* Backends for strata_device_params.backend. */
#define STRATA_BACKEND_AUTO  0  /* metal where its GPU and OS run the kernels (Apple7+, MSL 3.1), else cpu; the choice is logged, and the kernels line says why metal was not taken */
#define STRATA_BACKEND_CPU   1
#define STRATA_BACKEND_METAL 2  /* Apple GPUs (macOS) */
#define STRATA_BACKEND_EMU   3  /* the Metal kernels on the MSL emulator (needs clang; for tests and
                                   kernel debugging, far slower than a GPU) */

/* Value-head to qk-head mapping of strata_gdn_scan (r = Hv/Hk value heads per qk head). */
#define STRATA_GDN_GROUPED 0  /* value head h reads qk head h / r (transformers' order) */
#define STRATA_GDN_TILED   1  /* value head h reads qk head h % Hk (GGUF conversions' order) */

/* Scan algorithm of strata_gdn_scan; both compute the same recurrence (they differ in float32
 * rounding only, about 1e-6 relative). */
#define STRATA_GDN_CHUNKED   0
#define STRATA_GDN_RECURRENT 1

typedef struct strata_device strata_device;
typedef struct strata_model strata_model;
typedef struct strata_session strata_session;
typedef struct strata_snapshot strata_snapshot;
typedef struct strata_prompt_cache strata_prompt_cache;

/* A tensor in host memory for the op-level entry points: row-major, dims shape[0..ndim-1].
 * Only C-contiguous layouts are accepted in this version: strides must be NULL or equal to the
 * contiguous strides (in elements). data must be aligned to the element size and non-NULL; the
 * element count must be below 2^31 (kernels index with 32-bit offsets). */
typedef struct strata_tensor {
  void*          data;
  int32_t        dtype;    /* STRATA_F32, ... */
  int32_t        ndim;     /* 1..8 */
  const int64_t* shape;    /* ndim entries, each >= 1 */
  const int64_t* strides;  /* in elements; NULL = C-contiguous */
} strata_tensor;

/* ---- types of the functions below ------------------------------------------------------ */

/* Receives log messages: level is STRATA_LOG_*, msg a NUL-terminated string valid only during
 * the call. It may be called from any thread, and from several at once; it must not call back
 * into strata. */
typedef void (*strata_log_fn)(int32_t level, const char* msg, void* user_data);

typedef struct strata_device_params {
  size_t  struct_size;  /* sizeof(strata_device_params) */
  int32_t backend;      /* STRATA_BACKEND_*; default AUTO */
} strata_device_params;

typedef struct strata_device_props {
  size_t struct_size;    /* set by the caller: sizeof(strata_device_props) */
  char   backend[16];    /* "cpu", "metal" or "emu", NUL-terminated */
  char   kernels[256];   /* the kernels in use (e.g. which BLAS serves GEMM), truncated, NUL-terminated */
} strata_device_props;

/* Load progress: bytes of tensor data read so far, the checkpoint's total, and the tensor just
 * read (valid only during the call). Called on the loading thread. */
typedef void (*strata_progress_fn)(int64_t done, int64_t total, const char* tensor, void* user_data);

typedef struct strata_model_params {
  size_t             struct_size;  /* sizeof(strata_model_params) */
  strata_progress_fn progress;     /* optional; default NULL */
  void*              progress_user_data;
  /* A pipeline stage: load only decoder layers [layer_lo, layer_hi) (plus the embedding when
   * layer_lo is 0 and the final norm and head when layer_hi is the model's layer count). Both 0
   * (default): the whole model. A stage that starts after layer 0 takes the previous stage's
   * residual streams (strata_prefill_params.hidden_in); one that ends before the last layer
   * returns its own (hidden_out) instead of logits. */
  int64_t            layer_lo;
  int64_t            layer_hi;
  /* The compute mode of the linear layers' products, a NUL-terminated name (copied during
   * strata_model_load): NULL or "f32" (default: float32, today's results), "bf16" (activations
   * rounded to bfloat16, BF16/FP8/MLX weights as bfloat16, float32 sums: VDPBF16PS or its FMA
   * emulation) or "int8" (activations quantized per row and block of 32, MLX affine and FP8
   * codes as integers, int32 sums; weights read as stored, none packed at load). Weights a
   * mode does not take run in f32. A CPU option: another name, or a mode other than f32 on metal or emu, is
   * INVALID_ARGUMENT naming it. strata_model_compute says what ran. */
  const char*        compute;
} strata_model_params;

typedef struct strata_model_props {
  size_t  struct_size;   /* set by the caller: sizeof(strata_model_props) */
  char    arch[32];      /* "qwen4_exp" or "qwen3_next", NUL-terminated */
  int64_t vocab;         /* logits per token */
  int64_t layers;        /* decoder layers of the checkpoint */
  int64_t layer_lo;      /* the loaded stage [layer_lo, layer_hi); [0, layers) for a whole model */
  int64_t layer_hi;
  int64_t hidden_size;   /* floats per token of hidden_in / hidden_out: S*D (S residual streams) */
} strata_model_props;

typedef struct strata_session_params {
  size_t  struct_size;   /* sizeof(strata_session_params) */
  int64_t max_context;   /* cache capacity in tokens; 0 (default): 4096 or the model's maximum */
} strata_session_params;

typedef struct strata_prefill_params {
  size_t  struct_size;   /* sizeof(strata_prefill_params) */
  int32_t all_logits;    /* nonzero: logits for every new token; 0 (default): the last only */
  /* The most tokens run at once: a longer prompt runs in consecutive steps of step tokens within
   * the call, so activation memory is bounded by the step, not the prompt; the results equal
   * separate calls of step tokens each. Default 1024 (STRATA_DEFAULT_STEP); 0: the whole prompt
   * in one step; negative: INVALID_ARGUMENT. */
  int64_t step;
  /* Pipeline stages (strata_model_params.layer_lo/layer_hi). hidden_in: for a stage with
   * layer_lo > 0, the residual streams [n_tokens, hidden_size] float32 the previous stage wrote
   * for the same tokens (hidden_in_len floats, exactly n_tokens * hidden_size); NULL otherwise.
   * hidden_out: for a stage with layer_hi < layers, receives its residual streams
   * [n_tokens, hidden_size] (hidden_out_cap floats, at least that, checked before any work); such
   * a stage writes no logits (logits_out NULL, logits_cap 0). */
  const float* hidden_in;
  size_t       hidden_in_len;
  float*       hidden_out;
  size_t       hidden_out_cap;
} strata_prefill_params;

typedef struct strata_prompt_cache_params {
  size_t      struct_size;  /* sizeof(strata_prompt_cache_params) */
  /* NULL or "" (default): checkpoints in memory only. Else a directory (created if missing)
   * where every checkpoint is also kept as a session state file; processes that share it share
   * the checkpoints. Copied during strata_prompt_cache_new. */
  const char* dir;
  int64_t     bytes;        /* memory budget in bytes; 0: 2 GiB; default STRATA_DEFAULT_PROMPT_CACHE_BYTES */
  int64_t     disk_bytes;   /* budget of dir's state files (of every model sharing it); 0 (default): bytes */
  /* checkpoint spacing in tokens: a prefill through the cache runs in steps that end at every
   * multiple of every (absolute positions; at most every tokens long) and keeps a checkpoint at
   * each of them and at the end of each call; 0: the default, STRATA_DEFAULT_CHECKPOINT_EVERY */
  int64_t     every;
} strata_prompt_cache_params;

typedef struct strata_mlx_lm_params {
  size_t      struct_size;  /* sizeof(strata_mlx_lm_params) */
  /* "new" (NULL or "", the default: mlx-lm after PR #1632 of 2026-08-22; mlx >= 0.32.1 loads its
   * empty arrays) or "legacy" (mlx-lm before it). */
  const char* format;
  /* dtype of keys, values and conv states: "bfloat16", "float16" or "float32" (the session's
   * float32 states exactly); NULL or "" (default): the model's dtype as mlx-lm runs it (its
   * embedding table's, or that table's scales' when MLX-quantized). The recurrent states are
   * float32 in every case. */
  const char* dtype;
  /* the metadata "model": the model mlx_lm.generate loads (Hugging Face id or directory); NULL
   * or "" (default): the absolute path of the checkpoint directory. */
  const char* model;
} strata_mlx_lm_params;

typedef struct strata_prompt_cache_result {
  size_t  struct_size;         /* set by the caller: sizeof(strata_prompt_cache_result) */
  int64_t reused;              /* prompt tokens restored from a checkpoint (or held by the session) */
  int64_t tokens;              /* prompt tokens */
  int32_t source;              /* STRATA_CACHE_* */
  int64_t checkpoints;         /* checkpoints taken by this call */
  int64_t checkpoint_bytes;    /* their bytes (states, token ids, logits) */
  int64_t skipped;             /* checkpoints kept nowhere: larger than the budgets */
  double  restore_seconds;     /* putting the checkpoint into the session */
  double  checkpoint_seconds;  /* taking the checkpoints (copies and disk writes) */
  double  total_seconds;       /* the whole call */
  int64_t memory_checkpoints;  /* after the call: checkpoints in memory and their bytes */
  int64_t memory_bytes;
  int64_t disk_checkpoints;    /* this model's state files in dir, and the bytes of all of dir's */
  int64_t disk_bytes;
} strata_prompt_cache_result;

typedef struct strata_attention_params {
  size_t  struct_size;                /* sizeof(strata_attention_params) */
  int64_t pos0;                       /* tokens already in the cache before q; default 0 */
  float   scale;                      /* score scale; 0 (default): 1/sqrt(D) */
  /* Optional QSA selection (all three NULL: causal). Row t is dense (attends 0..pos0+t) when
   * sel_dense[t] != 0, else it attends the absolute positions
   * sel_tokens[sel_offsets[t] .. sel_offsets[t+1]-1], strictly ascending, within 0..pos0+t,
   * at least one. Dense rows list no tokens. sel_dense may be NULL (every row sparse). */
  const strata_tensor* sel_dense;     /* [T] STRATA_U8 */
  const strata_tensor* sel_offsets;   /* [T+1] STRATA_I32, sel_offsets[0] = 0 */
  const strata_tensor* sel_tokens;    /* [n] STRATA_I32, n = sel_offsets[T] >= 1 */
} strata_attention_params;

typedef struct strata_gdn_params {
  size_t  struct_size;     /* sizeof(strata_gdn_params) */
  int32_t head_map;        /* STRATA_GDN_GROUPED (default) or STRATA_GDN_TILED */
  int32_t mode;            /* STRATA_GDN_CHUNKED (default) or STRATA_GDN_RECURRENT */
  int32_t normalize_qk;    /* nonzero (default 0): l2-normalise q and k per head,
                              x / sqrt(sum x^2 + 1e-6), and scale q by Dk^-1/2 before the scan
                              (on copies: q and k are not modified) */
} strata_gdn_params;

typedef struct strata_moe_params {
  size_t               struct_size;  /* sizeof(strata_moe_params) */
  const strata_tensor* shared;       /* optional [T,D]: the (gated) shared-expert output, added */
  const strata_tensor* beta;         /* optional [T,S]: fused GatedResidual write (see below) */
} strata_moe_params;

/* Building libstrata itself defines STRATA_TYPES_ONLY: the Go toolchain then declares the
 * functions (with the same ABI, without const qualifiers). Hosts never define it. */
#ifndef STRATA_TYPES_ONLY

/* ---- versions, errors, logging --------------------------------------------------------- */

/* Returns STRATA_ABI_VERSION of the built library (compare with the header's macro). */
int32_t strata_abi_version(void);

/* Returns the library version, e.g. "strata 0.1.0 (abi 1)": a static NUL-terminated string the
 * caller must not free. */
const char* strata_version_string(void);

/* Copies the message of the last failed call made on the calling thread into buf (NUL-
 * terminated, truncated to cap-1 bytes; buf may be NULL when cap is 0) and returns the full
 * message length in bytes without the NUL, so a caller can size a buffer (returns 0 and writes
 * "" when no call on this thread has failed). Successful calls do not clear the message. */
size_t strata_last_error(char* buf, size_t cap);

/* Returns a static name for a status code ("STRATA_ERR_SHAPE", ...; "unknown" otherwise). */
const char* strata_status_name(strata_status status);

/* Sets the process-wide log callback (NULL: silent, the default) and the minimum level passed
 * to it. Takes effect for messages logged after the call, from every device. Thread-safe. */
strata_status strata_set_log_callback(strata_log_fn fn, int32_t min_level, void* user_data);

/* ---- device ----------------------------------------------------------------------------- */

/* Returns the default device parameters (struct_size set). */
strata_device_params strata_device_default_params(void);

/* Opens a compute device. params may be NULL (defaults). On success *out receives a handle that
 * the caller frees with strata_device_free. Errors: INVALID_ARGUMENT (out NULL, bad params),
 * BACKEND (the backend is not available on this machine or in this build). */
strata_status strata_device_open(const strata_device_params* params, strata_device** out);

/* Releases the device handle. Models loaded on it keep working until they are freed; the device
 * itself (an emulator it opened, say) is closed after the last of them. */
strata_status strata_device_free(strata_device* device);

/* Fills *info (the caller sets info->struct_size first). Errors: INVALID_HANDLE,
 * INVALID_ARGUMENT (info NULL or struct_size smaller than this version's struct). */
strata_status strata_device_info(strata_device* device, strata_device_props* info);

/* Copies the device's whole kernel report (strata_device_props.kernels is truncated to 255
 * bytes; on metal and emu the report lists every kernel variant dispatched so far with its
 * count) into buf like strata_last_error does, and stores the full length (without the NUL) in
 * *len when len is not NULL. Errors: INVALID_HANDLE, INVALID_ARGUMENT (buf NULL with cap > 0).
 * Thread-safe. */
strata_status strata_device_kernels(strata_device* device, char* buf, size_t cap, size_t* len);

/* ---- model ------------------------------------------------------------------------------ */

/* Returns the default model parameters (struct_size set). */
strata_model_params strata_model_default_params(void);

/* Loads a Hugging Face checkpoint directory (config.json, model.safetensors or sharded
 * safetensors with model.safetensors.index.json; model_type qwen3_next, qwen4_exp_text or
 * qwen4_exp) onto the device. checkpoint_dir is a NUL-terminated UTF-8 path: a checkpoint
 * directory, or a llama.cpp GGUF file (a path ending in .gguf; a split set by any of its parts;
 * architectures qwen3next, qwen35, qwen35moe), read by the same Go loader as strata.LoadModel
 * (docs/FORMATS.md, section GGUF). params may be NULL.
 * On success *out receives a handle the caller frees with strata_model_free. Errors:
 * INVALID_ARGUMENT (NULL pointers), INVALID_HANDLE (device), CHECKPOINT (the message names the
 * file and tensor), UNSUPPORTED (a quantized checkpoint, another model type or a setting strata
 * does not run, named in the message). */
strata_status strata_model_load(strata_device* device, const char* checkpoint_dir,
                                const strata_model_params* params, strata_model** out);

/* Releases the model handle. Sessions created from it stay valid; the weights are released when
 * the last of them is freed. */
strata_status strata_model_free(strata_model* model);

/* Fills *info (the caller sets info->struct_size first). Errors: INVALID_HANDLE,
 * INVALID_ARGUMENT. */
strata_status strata_model_info(strata_model* model, strata_model_props* info);

/* Copies a one-line description of the model (sizes, heads, experts) into buf like
 * strata_last_error does, and stores the full length (without the NUL) in *len when len is not
 * NULL. Errors: INVALID_HANDLE, INVALID_ARGUMENT (buf NULL with cap > 0). */
strata_status strata_model_describe(strata_model* model, char* buf, size_t cap, size_t* len);

/* Copies the model's compute report (strata_model_params.compute: the mode, the kernel each
 * weight format ran through, how many matrices, and why any ran in f32) into buf like
 * strata_model_describe does. Errors: INVALID_HANDLE, INVALID_ARGUMENT (buf NULL with cap > 0). */
strata_status strata_model_compute(strata_model* model, char* buf, size_t cap, size_t* len);

/* ---- session ---------------------------------------------------------------------------- */

/* Returns the default session parameters (struct_size set). */
strata_session_params strata_session_default_params(void);

/* Creates a session (an empty cache) on the model. params may be NULL. On success *out receives
 * a handle the caller frees with strata_session_free. Errors: INVALID_ARGUMENT (max_context out
 * of range, out NULL), INVALID_HANDLE. */
strata_status strata_session_new(strata_model* model, const strata_session_params* params,
                                 strata_session** out);

/* Releases the session and its cache. The model keeps one freed session's activation buffers
 * and cache (the cache for a session of the same max_context) for its next strata_session_new,
 * and frees them with the model. Returns BUSY (and frees nothing) while another thread is inside
 * a call on the session. */
strata_status strata_session_free(strata_session* session);

/* Returns the default prefill parameters (struct_size set). */
strata_prefill_params strata_prefill_default_params(void);

/* Runs n_tokens token ids through the model at positions position..position+n_tokens-1,
 * extending the session's cache. When logits_out is not NULL it receives float32 logits:
 * [vocab] for the last token, or [n_tokens, vocab] row-major with all_logits; logits_cap is its
 * length in floats and must be at least that (checked before any work). logits_out may be NULL
 * (logits_cap 0) to only extend the cache. *n_written, when not NULL, receives the number of
 * floats written. params may be NULL. A prompt longer than params->step runs in steps (see
 * strata_prefill_params). A pipeline stage (strata_model_params.layer_lo/layer_hi) reads
 * params->hidden_in and writes params->hidden_out as strata_prefill_params says.
 * A failed or cancelled call leaves the session exactly as it was, also when it fails in a
 * later step.
 * Errors: INVALID_ARGUMENT (tokens NULL, n_tokens 0, a token id outside [0, vocab), a negative
 * step, hidden_in or hidden_out given to a stage that does not take or return them or missing
 * where it does, hidden_in holding NaN or Inf), INVALID_HANDLE, SHAPE (logits_cap, hidden_in_len
 * or hidden_out_cap too small), CAPACITY (the context would be exceeded), OUT_OF_MEMORY (the
 * step's activations do not fit in the memory available: the message gives both sizes; lower
 * step), CANCELLED, BUSY, BACKEND. */
strata_status strata_session_prefill(strata_session* session, const int32_t* tokens, size_t n_tokens,
                                     const strata_prefill_params* params, float* logits_out,
                                     size_t logits_cap, size_t* n_written);

/* Asks a prefill running on the session in another thread to stop; it returns
 * STRATA_ERR_CANCELLED at its next layer boundary and leaves the session unchanged. Does nothing
 * when no prefill runs. May be called from any thread. Errors: INVALID_HANDLE. */
strata_status strata_session_cancel(strata_session* session);

/* Stores the number of tokens in the cache (the next prefill's first position) in *out.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (out NULL), BUSY. */
strata_status strata_session_position(strata_session* session, int64_t* out);

/* Empties the cache (position 0). Errors: INVALID_HANDLE, BUSY. */
strata_status strata_session_reset(strata_session* session);

/* Copies the session's whole state into a new snapshot (hybrid models cannot rewind a
 * recurrent state, so a branch point is a copy). *out receives a handle the caller frees with
 * strata_snapshot_free; it stays valid after the session is freed. Errors: INVALID_HANDLE,
 * INVALID_ARGUMENT, BUSY. */
strata_status strata_session_snapshot(strata_session* session, strata_snapshot** out);

/* Replaces the session's state with a copy of the snapshot's (the snapshot is unchanged and may
 * be restored again). Errors: INVALID_HANDLE, INVALID_ARGUMENT (a snapshot of another model),
 * CAPACITY (the snapshot holds more tokens than the session's max_context), BUSY. */
strata_status strata_session_restore(strata_session* session, strata_snapshot* snapshot);

/* Stores the snapshot's position (tokens held) in *out. Errors: INVALID_HANDLE,
 * INVALID_ARGUMENT. */
strata_status strata_snapshot_position(strata_snapshot* snapshot, int64_t* out);

/* Releases the snapshot. */
strata_status strata_snapshot_free(strata_snapshot* snapshot);

/* ---- session state files and the prompt cache ---------------------------------------------
 * A session state file (safetensors; README.md describes it) holds a session's whole state: every
 * state by layer and role, the token ids it was made from, the position, the model's fingerprint
 * (its config, tensor table and a sample of its weights) and the stage's layer range, with
 * CRC-32C checksums of the header and the data. It loads into a session of the same checkpoint
 * and stage on any backend. */

/* Writes the session's state to path (NUL-terminated UTF-8) atomically: a temporary file in the
 * same directory (.NAME.tmp-PID-*), flushed to disk and renamed over path, so path never holds
 * a partial file; on failure the temporary is removed, and one left by a process killed while
 * writing (its PID no longer running) is removed by the next save to path. A path that exists
 * and is neither a regular file nor a directory (a device such as /dev/null, a FIFO) is written
 * in place, never replaced; a FIFO no process reads is refused (INVALID_ARGUMENT), not waited
 * on. Errors: INVALID_HANDLE, INVALID_ARGUMENT (path NULL, or the file cannot be written: the
 * message names it), CHECKPOINT (the model's files could not be read for its fingerprint),
 * BUSY. */
strata_status strata_session_save(strata_session* session, const char* path);

/* Replaces the session's state (position, token ids, every state) with the file's. The file is
 * read and checked whole before the session changes: on error the session is unchanged.
 * Errors (the message names the file and what does not match): CHECKPOINT (missing, not a state
 * file, truncated, a checksum mismatch), UNSUPPORTED (a newer format version),
 * INVALID_ARGUMENT (another model's, checkpoint's or stage's file; path NULL), CAPACITY (more
 * tokens than the session's max_context), OUT_OF_MEMORY, INVALID_HANDLE, BUSY. */
strata_status strata_session_load(strata_session* session, const char* path);

/* Stores the number of token ids the session's state was made from (its position) in *n_ids
 * and, when ids_out is not NULL, the ids in ids_out[0..*n_ids) (every successful prefill
 * appends its tokens; reset, restore and load set them). With ids_out NULL and cap 0 it only
 * counts; with cap < *n_ids it writes no id and returns SHAPE (*n_ids set). Errors:
 * INVALID_ARGUMENT (n_ids NULL, ids_out NULL with cap > 0), INVALID_HANDLE, SHAPE, BUSY. */
strata_status strata_session_tokens(strata_session* session, int32_t* ids_out, size_t cap, size_t* n_ids);

/* Returns the default strata_mlx_lm_params (struct_size set, every string NULL). */
strata_mlx_lm_params strata_mlx_lm_default_params(void);

/* Writes the session's state to path (NUL-terminated UTF-8, ending in ".safetensors") as the
 * prompt-cache file mlx-lm's save_prompt_cache writes for qwen3_next, qwen3_5 and qwen3_5_moe, so
 * that `mlx_lm.generate --prompt-cache-file path` continues after the session's tokens: per
 * attention layer a KVCache (keys after k_norm and RoPE, values, [1, Hkv, T, head_dim]), per
 * GDN layer an ArraysCache (conv state [1, K-1, channels]: the [q | k | v] projection rows before
 * the conv, oldest first; recurrent state [1, Hv, Dv, Dk] float32), metadata "model" and
 * "tokenizer_config" ("{}"). The values are the session's own states (read back from the device
 * on Metal), converted to the dtype only. Written atomically as strata_session_save writes; on
 * error nothing is written and the session is unchanged. params may be NULL (the defaults).
 * Errors: UNSUPPORTED (a family mlx-lm has no model for, e.g. qwen4_exp; layer_types that
 * disagree with full_attention_interval, by which mlx-lm places the attention layers; a
 * pipeline stage), INVALID_ARGUMENT (path NULL or not ending in .safetensors, an unknown format
 * or dtype, an empty session, a state the dtype cannot hold, a file that cannot be written),
 * INVALID_HANDLE, BUSY. */
strata_status strata_session_save_mlx_lm(strata_session* session, const char* path, const strata_mlx_lm_params* params);

/* Returns the default prompt cache parameters (struct_size set). */
strata_prompt_cache_params strata_prompt_cache_default_params(void);

/* Makes a prompt cache for the sessions of a whole model (not a pipeline stage): checkpoints of
 * session states at step boundaries and at the end of every call, kept under a byte budget in
 * memory (and, with params->dir, on disk), the least recently used first out. params may be NULL.
 * On success *out receives a handle the caller frees with strata_prompt_cache_free; the cache
 * keeps the model alive until then. A cache may be used by many sessions from many threads at
 * once. Errors: INVALID_ARGUMENT (a negative budget or spacing, a budget smaller than one
 * checkpoint of 1 token: the message gives both sizes; a directory that cannot be created
 * or written: the message names it), UNSUPPORTED (a pipeline stage), INVALID_HANDLE, CHECKPOINT. */
strata_status strata_prompt_cache_new(strata_model* model, const strata_prompt_cache_params* params,
                                      strata_prompt_cache** out);

/* Releases the cache's memory (its files stay in the directory). */
strata_status strata_prompt_cache_free(strata_prompt_cache* cache);

/* Runs the prompt tokens[0..n_tokens) (the whole sequence, from position 0) in session, a
 * session of the cache's model: the session's state is replaced by the deepest checkpoint whose
 * tokens are a prefix of the prompt (its own state when its tokens are one), and only the rest
 * is prefilled, in steps that end at the multiples of the cache's every; the logits equal
 * bitwise those of prefill calls split at that checkpoint and at those multiples. logits_out receives the last token's logits [vocab], or
 * with params->all_logits those of every prefilled token, [n_tokens - result->reused, vocab]
 * (at least one token is then prefilled); logits_cap must hold [n_tokens, vocab] floats for
 * all_logits, [vocab] otherwise (checked before any work); *n_written (when not NULL) receives
 * the floats written. params may be NULL; hidden_in and hidden_out must be NULL. result, when
 * not NULL (its struct_size set), receives what the cache did. A failed or cancelled call
 * (strata_session_cancel) leaves the session as it was; checkpoints that cannot be kept or
 * written are skipped without failing the call. Errors: as strata_session_prefill, and
 * INVALID_ARGUMENT (a session of another model; a budget smaller than one checkpoint of
 * min(every, the session's max_context) tokens), INVALID_HANDLE (cache or session). */
strata_status strata_prompt_cache_prefill(strata_prompt_cache* cache, strata_session* session,
                                          const int32_t* tokens, size_t n_tokens,
                                          const strata_prefill_params* params, float* logits_out,
                                          size_t logits_cap, size_t* n_written,
                                          strata_prompt_cache_result* result);

/* One-shot prefill: opens the default device, loads checkpoint_dir, prefills n_tokens tokens in
 * a fresh session and releases everything. Arguments and errors as strata_model_load and
 * strata_session_prefill. */
strata_status strata_prefill(const char* checkpoint_dir, const int32_t* tokens, size_t n_tokens,
                             const strata_prefill_params* params, float* logits_out,
                             size_t logits_cap, size_t* n_written);

/* ---- op-level entry points ---------------------------------------------------------------
 * For hosts that run their own model and want strata's kernels. Each runs on the device passed
 * first: the CPU kernels on a cpu device (in place on the caller's memory), the Metal kernels on
 * a metal or emu device (inputs copied into device buffers, one command buffer, outputs copied
 * back); strata_device_info's kernels field then names the kernel variants that ran. All
 * tensors are float32 unless stated, C-contiguous, in host memory; outputs must not overlap
 * inputs. Every descriptor is checked (NULL data, ndim, dtype, shape against the op, overlap,
 * 32-bit offsets, index values) before any work, and on error no output is written. They are
 * thread-safe (calls on disjoint outputs may run at once) and deterministic on one device:
 * results are bitwise identical across runs and thread counts. Errors as listed, plus
 * INVALID_HANDLE (device), UNSUPPORTED (a shape the device's kernels do not take, e.g. HPG > 16
 * on metal) and BACKEND (a device failure). */

/* Returns the default attention parameters (struct_size set). */
strata_attention_params strata_attention_default_params(void);

/* Causal (optionally QSA-sparse) grouped-query attention for a prefill chunk:
 *   o[t,h] = sum_s softmax_s(scale * q[t,h] . k[s,h/HPG]) v[s,h/HPG],  HPG = Hq/Hkv,
 * over the positions s row t may attend (0..pos0+t, or its selection).
 * q [T,Hq,D]; k, v [N,Hkv,D] the cache including the new tokens, N >= pos0+T (rows past
 * pos0+T-1 are ignored); o [T,Hq,D] written; lse [T,Hq] (may be NULL) receives the natural
 * log-sum-exp of the scaled scores. params may be NULL.
 * Errors: INVALID_ARGUMENT (NULL descriptors or data, Hkv not dividing Hq, pos0 < 0, bad scale,
 * malformed selection, overlapping outputs), SHAPE, DTYPE. */
strata_status strata_attention(strata_device* device, const strata_tensor* q, const strata_tensor* k,
                               const strata_tensor* v, const strata_tensor* o, const strata_tensor* lse,
                               const strata_attention_params* params);

/* Returns the default Gated DeltaNet parameters (struct_size set). */
strata_gdn_params strata_gdn_default_params(void);

/* The gated delta rule over T tokens for every value head h (qk head j per head_map):
 *   S = exp(g_t) S;  delta = beta_t (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = S^T q_t
 * q, k [T,Hk,Dk] (normalised and q scaled, unless normalize_qk); v [T,Hv,Dv]; g (log decay) and
 * beta [T,Hv]; state [Hv,Dk,Dv] holds the initial state and receives the final one; o
 * [T,Hv,Dv] written. Hv must be a multiple of Hk. params may be NULL.
 * Errors: INVALID_ARGUMENT (NULL, unknown head_map or mode, overlap), SHAPE, DTYPE. */
strata_status strata_gdn_scan(strata_device* device, const strata_tensor* q, const strata_tensor* k,
                              const strata_tensor* v, const strata_tensor* g, const strata_tensor* beta,
                              const strata_tensor* state, const strata_tensor* o,
                              const strata_gdn_params* params);

/* Returns the default MoE combine parameters (struct_size set). */
strata_moe_params strata_moe_default_params(void);

/* Combines expert outputs per token: u[t] = sum over slots j with rk[t,j] >= 0 (in slot order)
 * of w[t,j] * ye[rk[t,j]]  (+ shared[t] when given).
 * ye [rows,D] expert-output rows; rk [T,K] STRATA_I32 row per slot, -1 = empty; w [T,K].
 * Without beta, out is [T,D] and receives u. With beta [T,S], out is the residual stream H
 * [T,S,D], read and updated in place: H[t,s] += beta[t,s] * u[t] (the GatedResidual write of
 * Qwen3.8-Flash-Next, fused). params may be NULL.
 * Errors: INVALID_ARGUMENT (NULL, rk outside [-1, rows), overlap), SHAPE, DTYPE. */
strata_status strata_moe_combine(strata_device* device, const strata_tensor* ye, const strata_tensor* rk,
                                 const strata_tensor* w, const strata_tensor* out, const strata_moe_params* params);

#endif /* STRATA_TYPES_ONLY */

/* ---- tokenizer ---------------------------------------------------------------------------
 * Text to token ids and back with a checkpoint's Hugging Face tokenizer.json (byte-level BPE of
 * Qwen3 / Qwen3-Next: NFC, the Qwen split pattern, byte-level merges, added tokens such as
 * <|im_start|> matched first), giving the ids Hugging Face tokenizers gives. A tokenizer is
 * immutable: it may be used from many threads at once. */
typedef struct strata_tokenizer strata_tokenizer;

#ifndef STRATA_TYPES_ONLY

/* Loads path: a tokenizer.json file, or a checkpoint directory holding one (NUL-terminated
 * UTF-8). On success *out receives a handle the caller frees with strata_tokenizer_free.
 * Errors: INVALID_ARGUMENT (NULL pointers), CHECKPOINT (no such file; malformed JSON; a model
 * other than byte-level BPE, such as WordPiece or Unigram; a missing merges list; any component
 * not implemented: the message names it). */
strata_status strata_tokenizer_load(const char* path, strata_tokenizer** out);

/* Releases the tokenizer. */
strata_status strata_tokenizer_free(strata_tokenizer* tokenizer);

/* Stores the size of the id space (one more than the largest id, added tokens included) in
 * *out. A model's vocabulary may be larger (padded rows). Errors: INVALID_HANDLE,
 * INVALID_ARGUMENT. */
strata_status strata_tokenizer_vocab_size(strata_tokenizer* tokenizer, int64_t* out);

/* Encodes text[0..len) (UTF-8; it need not be NUL-terminated and may hold NUL) and stores the
 * number of ids in *n_ids. With ids_out NULL and cap 0 it only counts; else it writes the ids
 * to ids_out[0..*n_ids), or, when cap < *n_ids, writes nothing and returns SHAPE (with *n_ids
 * set, so the caller can size the buffer; len ids always suffice). No special tokens are added.
 * Errors: INVALID_ARGUMENT (n_ids NULL, text NULL with len > 0, ids_out NULL with cap > 0, text
 * not valid UTF-8: the message gives the byte offset), INVALID_HANDLE, SHAPE. */
strata_status strata_tokenizer_encode(strata_tokenizer* tokenizer, const char* text, size_t len,
                                      int32_t* ids_out, size_t cap, size_t* n_ids);

/* Decodes ids[0..n) to UTF-8 text (invalid UTF-8 from partial characters replaced by U+FFFD
 * as Hugging Face tokenizers does; added tokens as their text), copies it into buf like
 * strata_last_error does (NUL-terminated, truncated to cap-1 bytes; the text may hold NUL bytes),
 * and stores its full length in bytes in *len when len is not NULL. Errors: INVALID_ARGUMENT
 * (ids NULL with n > 0, buf NULL with cap > 0, an id not in the tokenizer), INVALID_HANDLE. */
strata_status strata_tokenizer_decode(strata_tokenizer* tokenizer, const int32_t* ids, size_t n,
                                      char* buf, size_t cap, size_t* len);

#endif /* STRATA_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* STRATA_H */
