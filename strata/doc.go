// Package strata is the public Go API of strata, a prefill engine for hybrid
// linear/full-attention MoE language models (Qwen3.8-Flash-Next, Qwen3-Next, Qwen3.5 / Qwen3.6:
// the model families of package family): open a Device (backend cpu, metal or emu), load a
// checkpoint (Hugging Face or MLX) into a Model, and prefill prompts through Sessions that own
// the KV, indexer, Gated DeltaNet and PLE caches. Hosts that run their own model call single ops on a Device (Device.Attention,
// GDNScan, MoECombine, GRApplyMoEC).
//
// A Device is an op.Backend: package kernels on the CPU, package metal on an Apple GPU or on
// the MSL emulator (backend emu: the same Metal host code and .metal files, run on the CPU).
// The model runner (forward.go) is written once over op tensors and op.Pass calls, from the
// model's family plan (family.Plan: each layer's blocks and the tensors they read): on the CPU
// every op runs when it is called, on Metal a prefill chunk is one Pass, committed as command
// buffers split by a work budget (metal.CommandBufferBudget). Weights stay in the checkpoint's
// dtype (memory-mapped; a Metal device uploads them once per model), the session
// state lives in the device's memory as one list of tensors (cache.go) that every operation
// walks the same way, and a failed or cancelled prefill restores the fixed-size states from host
// backups on every backend. The token ids and the PLE n-gram ids are computed on the host
// (integer bookkeeping) and written into device tensors before the ops that read them.
//
// Memory. A prompt longer than PrefillOptions.Step (DefaultStep, 1024 tokens) runs in steps
// within the call, so activations are O(step) whatever the prompt length; the results are those
// of separate calls of that size. Before a step, and before a session's cache is allocated, the
// bytes needed are compared with the memory available, the smallest of: on Linux MemAvailable,
// the headroom of RLIMIT_AS (ulimit -v) and RLIMIT_DATA (ulimit -d), and that of every memory
// cgroup the process is in (v2 memory.max, v1 memory.limit_in_bytes, less current use); on
// macOS hw.memsize; and a Go memory limit (GOMEMLIMIT): a prefill or session that would not fit
// fails with ErrOutOfMemory naming both figures and the limit that applied instead of the
// process running out of memory.
//
// State that outlives the call. A session's whole state (with the token ids it was made from)
// goes to a session state file (Session.SaveState, SaveStateFile: safetensors, tied to the
// checkpoint by Model.Fingerprint and to the stage, checksummed) and comes back in another
// process or on another backend (LoadState, LoadStateFile), continuing bitwise. A PromptCache
// keeps checkpoints of session states at step boundaries and at the end of every call, in
// memory and in a directory, under byte budgets, and resumes a prompt from the deepest one whose
// tokens are a prefix of it, with the bits of a prefill split there. Session.SaveMLXLMCache
// writes the session as the prompt-cache file mlx-lm's save_prompt_cache writes (Qwen3-Next and
// Qwen3.5 / Qwen3.6, both mlx-lm formats), which `mlx_lm.generate --prompt-cache-file`
// continues.
//
// Pipeline stages. LoadOptions.Layers loads a half-open range of decoder layers (the
// embedding with the first, the head with the last); chained through PrefillOptions.Hidden and
// Logits.Hidden (the residual streams [T, S*D]) the stages give the whole model's logits
// bitwise.
package strata
