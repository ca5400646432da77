// Package strata is the public Go API of strata, a prefill engine for hybrid
// linear/full-attention MoE language models (Qwen3.8-Flash-Next, transformers qwen4_exp, and
// Qwen3-Next): open a Device (cpu or metal backend), load a Hugging Face checkpoint into a
// Model, and prefill prompts through Sessions that own the KV, indexer, Gated DeltaNet and PLE
// caches.
//
// Backends: cpu runs the ops of package kernels; metal runs the Metal kernels of package metal
// on the system's Metal device (macOS) or on a device passed in Options.MetalDevice (the MSL
// emulator of metal/emu in tests). The model runner is the same for both (forward.go over the
// unexported backend interface). On metal every op is one command buffer over host slices:
// inputs are uploaded and outputs read back, and the session cache (K/V, index keys, GDN and
// PLE states) stays in host memory, which keeps Snapshot/Restore and the failed-prefill
// guarantee identical to cpu. A device-resident cache and weights, with one command buffer per
// prefill chunk, are the next step. Token embedding rows and the PLE n-gram hash ids are
// computed on the host on both backends (a row gather and integer bookkeeping).
package strata
