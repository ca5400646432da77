//go:build cgo

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/strata"
)

// TestSessionSaveLoad: a session saved to a file and loaded into another continues bitwise with
// its token ids; a damaged file is refused (STRATA_ERR_CHECKPOINT) with the session unchanged.
func TestSessionSaveLoad(t *testing.T) {
	_, model := openTiny(t)
	ids, _ := goldenPrompt(t)
	a := newSession(t, model, 128)
	defer sessionFree(a)
	prefill(t, a, ids[:40], false, 512)
	path := filepath.Join(t.TempDir(), "a.state")
	if err := sessionSave(a, path); err != nil {
		t.Fatal(err)
	}
	b := newSession(t, model, 128)
	defer sessionFree(b)
	if err := sessionLoad(b, path); err != nil {
		t.Fatal(err)
	}
	if got, err := sessionTokens(b); err != nil || !slices.Equal(got, ids[:40]) {
		t.Fatalf("tokens after load: %v %v", got, err)
	}
	if !slicesEqual(prefill(t, b, ids[40:], true, 512), prefill(t, a, ids[40:], true, 512)) {
		t.Fatal("a loaded session continues differently")
	}
	raw, _ := os.ReadFile(path)
	bad := filepath.Join(t.TempDir(), "bad.state")
	os.WriteFile(bad, raw[:len(raw)-3], 0o644)
	err := sessionLoad(b, bad)
	if !sameStatus(err, strata.ErrCheckpoint) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a truncated file: %v, want STRATA_ERR_CHECKPOINT naming it", err)
	}
	if pos, _ := sessionPosition(b); pos != int64(len(ids)) {
		t.Fatalf("a refused file moved the session to %d", pos)
	}
	if err := sessionSave(b, filepath.Join(bad, "x")); !sameStatus(err, strata.ErrInvalidArgument) {
		t.Fatalf("saving under a file: %v", err)
	}
}

// TestPromptCacheCalls: the cache's defaults match the Go API's; a second prompt resumes from
// the first one's checkpoint with the bits of a prefill split there; the buffer, argument and
// handle checks; the cache keeps its model alive after strata_model_free; many threads share it.
func TestPromptCacheCalls(t *testing.T) {
	p := strata_prompt_cache_default_params()
	if int64(p.bytes) != strata.DefaultPromptCacheBytes || int(p.every) != strata.DefaultCheckpointEvery {
		t.Fatalf("C defaults %d bytes, every %d; Go %d, %d", int64(p.bytes), int(p.every), int64(strata.DefaultPromptCacheBytes), strata.DefaultCheckpointEvery)
	}
	dev, err := deviceOpen(1)
	if err != nil {
		t.Fatal(err)
	}
	defer deviceFree(dev)
	model, err := modelLoad(dev, testdata(tinyQ4), strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := goldenPrompt(t)
	if _, err := promptCacheNew(model, strata.PromptCacheOptions{Bytes: 1000}); !sameStatus(err, strata.ErrInvalidArgument) || !strings.Contains(err.Error(), "smaller than one checkpoint") {
		t.Fatalf("a 1000-byte budget: %v", err)
	}
	c, err := promptCacheNew(model, strata.PromptCacheOptions{Every: 32, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer promptCacheFree(c)
	s := newSession(t, model, 128)
	defer sessionFree(s)
	ref := newSession(t, model, 128)
	defer sessionFree(ref)
	run := func(s uintptr, prompt []int32, all bool) ([]float32, *strata.PromptCacheResult) {
		t.Helper()
		out := make([]float32, len(prompt)*512)
		n, res, err := promptCachePrefill(c, s, prompt, prefillReq{all: all, step: strata.DefaultStep}, goOut(out))
		if err != nil {
			t.Fatal(err)
		}
		return out[:n], res
	}
	run(s, ids[:70], false)
	B := append(slices.Clone(ids[:50]), ids[80:]...)
	got, res := run(s, B, true)
	if res.Reused != 32 || res.From != "memory" || len(got) != (len(B)-32)*512 {
		t.Fatalf("reused %d from %q, %d floats", res.Reused, res.From, len(got))
	}
	prefill(t, ref, B[:32], false, 512)
	want := make([]float32, (len(B)-32)*512)
	if _, err := sessionPrefill(ref, B[32:], prefillReq{all: true, step: 32}, goOut(want)); err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(got, want) {
		t.Fatal("resumed at 32 differs from a prefill split at 32")
	}
	small := make([]float32, 511)
	if _, _, err := promptCachePrefill(c, s, B, prefillReq{step: strata.DefaultStep}, goOut(small)); !sameStatus(err, strata.ErrShape) {
		t.Fatalf("a short logits buffer: %v", err)
	}
	if _, _, err := promptCachePrefill(c, s, B, prefillReq{step: strata.DefaultStep, hiddenIn: make([]float32, 4)}, prefillOut{}); !sameStatus(err, strata.ErrInvalidArgument) {
		t.Fatalf("hidden_in: %v", err)
	}
	if _, _, err := promptCachePrefill(s, s, B, prefillReq{step: strata.DefaultStep}, prefillOut{}); !errors.Is(err, errInvalidHandle) {
		t.Fatalf("a session as the cache: %v", err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sessionNew(model, 128)
			if err != nil {
				t.Error(err)
				return
			}
			defer sessionFree(s)
			p := append(slices.Clone(ids[:40]), ids[40+g:60+g]...)
			if _, _, err := promptCachePrefill(c, s, p, prefillReq{step: strata.DefaultStep}, prefillOut{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	modelFree(model) // the cache and the sessions keep the model
	if _, res := run(s, ids[:70], false); res.Reused != 70 {
		t.Fatalf("after strata_model_free: reused %d", res.Reused)
	}
	if err := promptCacheFree(c); err != nil {
		t.Fatal(err)
	}
	if err := promptCacheFree(c); !errors.Is(err, errInvalidHandle) {
		t.Fatalf("double free of a prompt cache: %v", err)
	}
}

// TestSessionSaveMLXLM: the C defaults are the Go API's (every string NULL); a Qwen3-Next
// session's file is the Go API's byte for byte; a qwen4_exp session, a bad dtype, an unknown
// handle and a freed session are refused with their statuses and no file.
func TestSessionSaveMLXLM(t *testing.T) {
	if p := strata_mlx_lm_default_params(); p.format != nil || p.dtype != nil || p.model != nil || p.struct_size == 0 {
		t.Fatal("strata_mlx_lm_default_params: want struct_size set and every string NULL")
	}
	dev, err := deviceOpen(1)
	if err != nil {
		t.Fatal(err)
	}
	defer deviceFree(dev)
	model, err := modelLoad(dev, testdata("qwen3next-tiny"), strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer modelFree(model)
	ids, _ := goldenPrompt(t)
	s := newSession(t, model, 128)
	defer sessionFree(s)
	prefill(t, s, ids[:40], false, 512)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.safetensors")
	opts := strata.MLXLMOptions{Format: "legacy", DType: "float32", Model: "org/model"}
	if err := sessionSaveMLXLM(s, path, opts); err != nil {
		t.Fatal(err)
	}
	so, err := getObj[*sessionObj](s, kindSession)
	if err != nil {
		t.Fatal(err)
	}
	goPath := filepath.Join(dir, "go.safetensors")
	if err := so.s.SaveMLXLMCache(goPath, opts); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(goPath)
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Fatal("the C call's file differs from the Go API's")
	}
	bad := filepath.Join(dir, "bad.safetensors")
	if err := sessionSaveMLXLM(s, bad, strata.MLXLMOptions{DType: "int8"}); !sameStatus(err, strata.ErrInvalidArgument) || !strings.Contains(err.Error(), `"int8"`) {
		t.Fatalf("dtype int8: %v", err)
	}
	_, q4 := openTiny(t)
	s4 := newSession(t, q4, 64)
	defer sessionFree(s4)
	prefill(t, s4, ids[:8], false, 512)
	if err := sessionSaveMLXLM(s4, bad, strata.MLXLMOptions{}); !sameStatus(err, strata.ErrUnsupported) || !strings.Contains(err.Error(), "qwen4_exp") {
		t.Fatalf("a qwen4_exp session: %v, want STRATA_ERR_UNSUPPORTED naming qwen4_exp", err)
	}
	if err := sessionSaveMLXLM(12345, bad, strata.MLXLMOptions{}); !sameStatus(err, errInvalidHandle) {
		t.Fatalf("an unknown handle: %v", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused export left %s", bad)
	}
}
