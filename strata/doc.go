// Package strata is the public Go API of strata, a prefill engine for hybrid
// linear/full-attention MoE language models (Qwen3.8-Flash-Next, transformers qwen4_exp, and
// Qwen3-Next): open a Device (cpu or metal backend), load a Hugging Face checkpoint into a
// Model, and prefill prompts through Sessions that own the KV, indexer, Gated DeltaNet and PLE
// caches.
package strata
