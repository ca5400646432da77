package strata_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/stratakernels/strata/strata"
)

// The examples run on the tiny generated checkpoints of the repository's testdata (4 layers,
// vocab 512) on the CPU backend. What they print holds on every CPU and thread count: shapes,
// token ids (the argmax of logits whose top two are far apart), and bitwise comparisons of the
// results that strata guarantees to be equal.

// tinyDir is the tiny Qwen3-Next checkpoint (3 Gated DeltaNet layers and one attention layer).
var tinyDir = filepath.Join("..", "testdata", "qwen3next-tiny")

// prompt returns n token ids of the tiny models' vocabulary (in a real host they come from
// package tokenizer).
func prompt(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 512)
	}
	return ids
}

// argmax is the id of the largest logit: the greedy next token. For the examples' prompts of 40
// and 48 tokens the top two logits are 0.057 and 0.117 apart, the CPU kernels (AVX-512F, AVX2,
// pure Go; any thread count) differ by about 1e-6: the printed ids are the same everywhere.
func argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

// loadTiny opens the CPU device and loads the tiny checkpoint; the caller closes both.
func loadTiny() (*strata.Device, *strata.Model) {
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := strata.LoadModel(dev, tinyDir, strata.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return dev, m
}

// Open a device and load a checkpoint directory (config.json and its safetensors shards; an MLX
// conversion loads the same way).
func ExampleLoadModel() {
	dev, err := strata.Open(strata.Options{Backend: "cpu"}) // "auto": Metal on a Mac, else the CPU
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	m, err := strata.LoadModel(dev, tinyDir, strata.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(m.Describe())
	fmt.Println("layers", m.Layers(), "vocab", m.Vocab(), "hidden size", m.HiddenSize())
	// Output:
	// qwen3_next (qwen3_next): D 256, 4 layers (3 GDN + 1 attention), Hq 12 / Hkv 1 x 256, GDN Hk 2 / Hv 6 x 128, 12 experts top-10, vocab 512, streams 1
	// layers 4 vocab 512 hidden size 256
}

// Prefill a prompt into a session and pick the next token from the last token's logits.
func ExampleSession_Prefill() {
	dev, m := loadTiny()
	defer dev.Close()
	defer m.Close()
	s, err := m.NewSession(strata.SessionOptions{MaxContext: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	lg, err := s.Prefill(context.Background(), prompt(40), strata.PrefillOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("logits [%d, %d] after position %d; session at %d\n", lg.Rows, lg.Vocab, lg.Pos0, s.Position())
	fmt.Println("next token", argmax(lg.Row(0)))

	// AllLogits: one row per new token.
	all, err := s.Prefill(context.Background(), prompt(8), strata.PrefillOptions{AllLogits: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("logits [%d, %d] for positions %d..%d\n", all.Rows, all.Vocab, all.Pos0, all.Pos0+all.Rows-1)
	// Output:
	// logits [1, 512] after position 39; session at 40
	// next token 167
	// logits [8, 512] for positions 40..47
}

// A prompt can be prefilled in chunks, in separate calls or in steps within one call
// (PrefillOptions.Step): the steps give the bits of the separate calls of that size, and both
// continue the session as one shot does up to float32 rounding.
func ExampleSession_Prefill_chunked() {
	dev, m := loadTiny()
	defer dev.Close()
	defer m.Close()
	ctx := context.Background()
	ids := prompt(48)
	run := func(chunks [][]int32, step int) []float32 {
		s, err := m.NewSession(strata.SessionOptions{MaxContext: 64})
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		var lg *strata.Logits
		for _, c := range chunks {
			if lg, err = s.Prefill(ctx, c, strata.PrefillOptions{Step: step}); err != nil {
				log.Fatal(err)
			}
		}
		return lg.Row(0)
	}
	oneShot := run([][]int32{ids}, strata.OneShot)
	steps := run([][]int32{ids}, 16)                            // one call, steps of 16 tokens
	calls := run([][]int32{ids[:16], ids[16:32], ids[32:]}, 16) // three calls of 16 tokens
	var d float64
	for i := range oneShot {
		d = math.Max(d, math.Abs(float64(steps[i]-oneShot[i])))
	}
	fmt.Println("steps == calls bitwise:", slices.Equal(steps, calls))
	fmt.Println("steps within 1e-4 of one shot:", d <= 1e-4)
	fmt.Println("next token", argmax(oneShot), argmax(steps))
	// Output:
	// steps == calls bitwise: true
	// steps within 1e-4 of one shot: true
	// next token 104 104
}

// A session's whole state goes to a writer (SaveStateFile: to a file, atomically) and comes back
// into a session of the same checkpoint, in this process or another one, on either backend; the
// loaded session continues with the bits of the original.
func ExampleSession_SaveState() {
	dev, m := loadTiny()
	defer dev.Close()
	defer m.Close()
	ctx := context.Background()
	a, err := m.NewSession(strata.SessionOptions{MaxContext: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Prefill(ctx, prompt(40), strata.PrefillOptions{}); err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.SaveState(&buf); err != nil {
		log.Fatal(err)
	}

	b, err := m.NewSession(strata.SessionOptions{MaxContext: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.LoadState(&buf); err != nil {
		log.Fatal(err)
	}
	ids, err := b.Tokens()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("loaded session at", b.Position(), "with", len(ids), "token ids")

	more := []int32{5, 6, 7}
	la, err := a.Prefill(ctx, more, strata.PrefillOptions{})
	if err != nil {
		log.Fatal(err)
	}
	lb, err := b.Prefill(ctx, more, strata.PrefillOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("continued bitwise:", slices.Equal(la.Data, lb.Data))
	// Output:
	// loaded session at 40 with 40 token ids
	// continued bitwise: true
}

// A PromptCache resumes a prompt from the deepest checkpoint whose tokens are a prefix of it:
// here the second turn of a chat reuses the first turn's state and prefills only the new tokens,
// with the bits of a session prefilled in the same two calls.
func ExamplePromptCache() {
	dev, m := loadTiny()
	defer dev.Close()
	defer m.Close()
	ctx := context.Background()
	pc, err := strata.NewPromptCache(m, strata.PromptCacheOptions{Bytes: 64 << 20}) // Dir: shared with other processes
	if err != nil {
		log.Fatal(err)
	}
	turn1 := prompt(40)
	turn2 := append(slices.Clone(turn1), 9, 8, 7, 6, 5, 4, 3, 2)

	s, err := m.NewSession(strata.SessionOptions{MaxContext: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var lg *strata.Logits
	for _, p := range [][]int32{turn1, turn2} {
		if err := s.Reset(); err != nil { // a new request: the cache finds the prefix
			log.Fatal(err)
		}
		var res *strata.PromptCacheResult
		if lg, res, err = pc.Prefill(ctx, s, p, strata.PrefillOptions{}); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d tokens: %d reused (from %q), %d prefilled\n", res.Tokens, res.Reused, res.From, res.Tokens-res.Reused)
	}

	// The same two calls on a plain session.
	ref, err := m.NewSession(strata.SessionOptions{MaxContext: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer ref.Close()
	if _, err := ref.Prefill(ctx, turn1, strata.PrefillOptions{}); err != nil {
		log.Fatal(err)
	}
	want, err := ref.Prefill(ctx, turn2[len(turn1):], strata.PrefillOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("bitwise the plain session's:", slices.Equal(lg.Data, want.Data))
	// Output:
	// 40 tokens: 0 reused (from ""), 40 prefilled
	// 48 tokens: 40 reused (from "memory"), 8 prefilled
	// bitwise the plain session's: true
}

// Write a session as the prompt-cache file of mlx-lm's save_prompt_cache, which
// `mlx_lm.generate --prompt-cache-file` continues. The file is safetensors: the example lists
// its tensors from the header.
func ExampleSession_SaveMLXLMCache() {
	dev, m := loadTiny()
	defer dev.Close()
	defer m.Close()
	if mod, err := m.MLXLMModel(); err != nil { // check before a long prefill
		log.Fatal(err)
	} else {
		fmt.Println("mlx-lm model:", mod)
	}
	s, err := m.NewSession(strata.SessionOptions{MaxContext: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill(context.Background(), prompt(40), strata.PrefillOptions{}); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "cache.safetensors")
	if err := s.SaveMLXLMCache(path, strata.MLXLMOptions{Model: "Qwen/Qwen3-Next-80B-A3B-Instruct"}); err != nil {
		log.Fatal(err)
	}

	// The safetensors header: 8 bytes of little-endian length, then JSON.
	f, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(f[:8])
	var header map[string]json.RawMessage
	if err := json.Unmarshal(f[8:8+n], &header); err != nil {
		log.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(header["__metadata__"], &meta); err != nil {
		log.Fatal(err)
	}
	fmt.Println("model:", meta["1.model"], "; layer 0:", meta["2.0"], "; layer 3:", meta["2.3"])
	for _, name := range []string{"0.0.0", "0.0.1", "3.0", "3.1"} {
		var t struct {
			DType string  `json:"dtype"`
			Shape []int64 `json:"shape"`
		}
		if err := json.Unmarshal(header[name], &t); err != nil {
			log.Fatal(err)
		}
		fmt.Println(name, t.DType, t.Shape)
	}
	// Output:
	// mlx-lm model: qwen3_next
	// model: Qwen/Qwen3-Next-80B-A3B-Instruct ; layer 0: ArraysCache ; layer 3: KVCache
	// 0.0.0 BF16 [1 3 1280]
	// 0.0.1 F32 [1 6 128 128]
	// 3.0 BF16 [1 1 40 256]
	// 3.1 BF16 [1 1 40 256]
}
