package strata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// A test-only GGUF converter: it writes a generated checkpoint's weights as llama.cpp's
// converter lays them out (docs/FORMATS.md, section GGUF: llama.cpp's names, norms as F32 1 + w,
// ssm_a as -exp(A_log), conv1d [C, K], Qwen3-Next's qkvz regrouped and Qwen3.5's value heads
// tiled, experts stacked), the matrices in BF16 as the checkpoint holds them. Loading that file
// must give the directory's logits: every transform the loader undoes is checked by the math.

type ggTensor struct {
	name string
	dims []uint64 // ne: contiguous first
	typ  op.GGMLType
	data []byte
}

type ggKV struct {
	key string
	typ uint32 // gguf value type
	val []byte // encoded value
}

func u32kv(k string, v uint32) ggKV {
	return ggKV{k, 4, binary.LittleEndian.AppendUint32(nil, v)}
}
func f32kv(k string, v float32) ggKV {
	return ggKV{k, 6, binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))}
}
func strkv(k, v string) ggKV {
	return ggKV{k, 8, append(binary.LittleEndian.AppendUint64(nil, uint64(len(v))), v...)}
}
func i32arr(k string, v []int32) ggKV {
	b := binary.LittleEndian.AppendUint32(nil, 5)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return ggKV{k, 9, b}
}

func writeGGUF(path string, kvs []ggKV, ts []ggTensor) error {
	str := func(b []byte, s string) []byte {
		return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
	}
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ts)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kvs)))
	for _, kv := range kvs {
		b = str(b, kv.key)
		b = binary.LittleEndian.AppendUint32(b, kv.typ)
		b = append(b, kv.val...)
	}
	var off uint64
	offs := make([]uint64, len(ts))
	for i, t := range ts {
		offs[i] = off
		off = (off + uint64(len(t.data)) + 31) / 32 * 32
		b = str(b, t.name)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.dims)))
		for _, d := range t.dims {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t.typ))
		b = binary.LittleEndian.AppendUint64(b, offs[i])
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	start := len(b)
	for i, t := range ts {
		for len(b) < start+int(offs[i]) {
			b = append(b, 0)
		}
		b = append(b, t.data...)
	}
	return os.WriteFile(path, b, 0o644)
}

// hfToGGUF converts the generated checkpoint in dir to path as llama.cpp's converter would.
func hfToGGUF(t *testing.T, dir, path string, edit func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor)) {
	t.Helper()
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
	pre := res.Plan.Layout.Text
	get := func(name string) *safetensors.Tensor {
		tn, err := ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	f32 := func(name string) []float32 {
		x, err := get(name).Float32()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	u16 := func(name string) []uint16 {
		x, err := get(name).Uint16s()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	var ts []ggTensor
	vec := func(name string, x []float32, dims ...uint64) {
		b := make([]byte, 0, 4*len(x))
		for _, v := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		ts = append(ts, ggTensor{name, dims, op.GGMLF32, b})
	}
	mat := func(name string, x []uint16, dims ...uint64) {
		b := make([]byte, 0, 2*len(x))
		for _, v := range x {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
		ts = append(ts, ggTensor{name, dims, op.GGMLBF16, b})
	}
	plus1 := func(x []float32) []float32 {
		for i := range x {
			x[i]++
		}
		return x
	}
	D := uint64(cfg.D)
	Hk, Hv, dk, dv := cfg.Hk, cfg.Hv, cfg.Dk, cfg.Dv
	r := Hv / Hk
	tiled := cfg.Family == "qwen3_5" && Hk != Hv
	// vhead maps a grouped value head to its place in the converter's tiled order.
	vhead := func(h int) int {
		if !tiled {
			return h
		}
		return (h%r)*Hk + h/r
	}
	permRows := func(x []uint16, k, rowsPerHead, base int) []uint16 { // rows [base, base + Hv*rowsPerHead) reordered
		out := append([]uint16(nil), x...)
		for h := 0; h < Hv; h++ {
			copy(out[(base+vhead(h)*rowsPerHead)*k:(base+(vhead(h)+1)*rowsPerHead)*k], x[(base+h*rowsPerHead)*k:(base+(h+1)*rowsPerHead)*k])
		}
		return out
	}
	mat("token_embd.weight", u16(pre+"embed_tokens.weight"), D, uint64(cfg.Vocab))
	if !cfg.TieWordEmbeddings {
		mat("output.weight", u16(res.Plan.Layout.LMHead), D, uint64(cfg.Vocab))
	}
	vec("output_norm.weight", plus1(f32(pre+"norm.weight")), D)
	C := 2*Hk*dk + Hv*dv
	for i := 0; i < cfg.Layers; i++ {
		L := func(s string) string { return fmt.Sprintf("%slayers.%d.%s", pre, i, s) }
		B := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		vec(B("attn_norm.weight"), plus1(f32(L("input_layernorm.weight"))), D)
		vec(B("post_attention_norm.weight"), plus1(f32(L("post_attention_layernorm.weight"))), D)
		if cfg.LayerTypes[i] == hfconfig.LinearAttention {
			var qkv, z, bw, aw []uint16
			if cfg.Family == "qwen3_next" {
				qkvz, ba := u16(L("linear_attn.in_proj_qkvz.weight")), u16(L("linear_attn.in_proj_ba.weight"))
				grp := 2*dk + 2*r*dv
				var q, k, v []uint16
				for h := 0; h < Hk; h++ {
					row := func(o, n int) []uint16 { return qkvz[(h*grp+o)*cfg.D : (h*grp+o+n)*cfg.D] }
					q = append(q, row(0, dk)...)
					k = append(k, row(dk, dk)...)
					v = append(v, row(2*dk, r*dv)...)
					z = append(z, row(2*dk+r*dv, r*dv)...)
				}
				qkv = append(append(q, k...), v...)
				mat(B("ssm_ba.weight"), ba, D, uint64(2*Hv))
			} else {
				qkv = permRows(u16(L("linear_attn.in_proj_qkv.weight")), cfg.D, dv, 2*Hk*dk)
				z = permRows(u16(L("linear_attn.in_proj_z.weight")), cfg.D, dv, 0)
				bw = permRows(u16(L("linear_attn.in_proj_b.weight")), cfg.D, 1, 0)
				aw = permRows(u16(L("linear_attn.in_proj_a.weight")), cfg.D, 1, 0)
			}
			mat(B("attn_qkv.weight"), qkv, D, uint64(C))
			mat(B("attn_gate.weight"), z, D, uint64(Hv*dv))
			if bw != nil {
				mat(B("ssm_beta.weight"), bw, D, uint64(Hv))
				mat(B("ssm_alpha.weight"), aw, D, uint64(Hv))
			}
			conv := f32(L("linear_attn.conv1d.weight"))
			cv := append([]float32(nil), conv...)
			K := cfg.ConvK
			for h := 0; h < Hv; h++ {
				base := 2 * Hk * dk
				copy(cv[(base+vhead(h)*dv)*K:(base+(vhead(h)+1)*dv)*K], conv[(base+h*dv)*K:(base+(h+1)*dv)*K])
			}
			vec(B("ssm_conv1d.weight"), cv, uint64(K), uint64(C))
			alog, dt := f32(L("linear_attn.A_log")), f32(L("linear_attn.dt_bias"))
			sa, sd := make([]float32, Hv), make([]float32, Hv)
			for h := 0; h < Hv; h++ {
				sa[vhead(h)] = float32(-math.Exp(float64(alog[h])))
				sd[vhead(h)] = dt[h]
			}
			vec(B("ssm_a"), sa, uint64(Hv))
			vec(B("ssm_dt.bias"), sd, uint64(Hv))
			vec(B("ssm_norm.weight"), f32(L("linear_attn.norm.weight")), uint64(dv))
			out := u16(L("linear_attn.out_proj.weight")) // [D, Hv*dv]: columns by value head
			oc := append([]uint16(nil), out...)
			for row := 0; row < cfg.D; row++ {
				for h := 0; h < Hv; h++ {
					copy(oc[row*Hv*dv+vhead(h)*dv:row*Hv*dv+(vhead(h)+1)*dv], out[row*Hv*dv+h*dv:row*Hv*dv+(h+1)*dv])
				}
			}
			mat(B("ssm_out.weight"), oc, uint64(Hv*dv), D)
		} else {
			hd := uint64(cfg.HeadDim)
			mat(B("attn_q.weight"), u16(L("self_attn.q_proj.weight")), D, uint64(cfg.Hq)*hd*2)
			mat(B("attn_k.weight"), u16(L("self_attn.k_proj.weight")), D, uint64(cfg.Hkv)*hd)
			mat(B("attn_v.weight"), u16(L("self_attn.v_proj.weight")), D, uint64(cfg.Hkv)*hd)
			mat(B("attn_output.weight"), u16(L("self_attn.o_proj.weight")), uint64(cfg.Hq)*hd, D)
			vec(B("attn_q_norm.weight"), plus1(f32(L("self_attn.q_norm.weight"))), hd)
			vec(B("attn_k_norm.weight"), plus1(f32(L("self_attn.k_norm.weight"))), hd)
		}
		if cfg.IsMoELayer(i) {
			E, I := uint64(cfg.Experts), uint64(cfg.MoEI)
			mat(B("ffn_gate_inp.weight"), u16(L("mlp.gate.weight")), D, E)
			var gate, up, down []uint16
			if res.Plan.Layout.Experts == family.Fused {
				gu, dn := u16(L("mlp.experts.gate_up_proj")), u16(L("mlp.experts.down_proj"))
				for e := 0; e < cfg.Experts; e++ {
					s := gu[e*2*cfg.MoEI*cfg.D:]
					gate = append(gate, s[:cfg.MoEI*cfg.D]...)
					up = append(up, s[cfg.MoEI*cfg.D:2*cfg.MoEI*cfg.D]...)
				}
				down = dn
			} else {
				for e := 0; e < cfg.Experts; e++ {
					gate = append(gate, u16(L(fmt.Sprintf("mlp.experts.%d.gate_proj.weight", e)))...)
					up = append(up, u16(L(fmt.Sprintf("mlp.experts.%d.up_proj.weight", e)))...)
					down = append(down, u16(L(fmt.Sprintf("mlp.experts.%d.down_proj.weight", e)))...)
				}
			}
			mat(B("ffn_gate_exps.weight"), gate, D, I, E)
			mat(B("ffn_up_exps.weight"), up, D, I, E)
			mat(B("ffn_down_exps.weight"), down, I, D, E)
			S := uint64(cfg.SharedI)
			mat(B("ffn_gate_shexp.weight"), u16(L("mlp.shared_expert.gate_proj.weight")), D, S)
			mat(B("ffn_up_shexp.weight"), u16(L("mlp.shared_expert.up_proj.weight")), D, S)
			mat(B("ffn_down_shexp.weight"), u16(L("mlp.shared_expert.down_proj.weight")), S, D)
			// llama-quantize's 1-D form on even layers, the converter's [D, 1] on odd ones
			if i%2 == 0 {
				mat(B("ffn_gate_inp_shexp.weight"), u16(L("mlp.shared_expert_gate.weight")), D)
			} else {
				mat(B("ffn_gate_inp_shexp.weight"), u16(L("mlp.shared_expert_gate.weight")), D, 1)
			}
		} else {
			I := uint64(cfg.DenseI)
			mat(B("ffn_gate.weight"), u16(L("mlp.gate_proj.weight")), D, I)
			mat(B("ffn_up.weight"), u16(L("mlp.up_proj.weight")), D, I)
			mat(B("ffn_down.weight"), u16(L("mlp.down_proj.weight")), I, D)
		}
	}
	arch := map[string]string{"qwen3_next": "qwen3next", "qwen3_5_text": "qwen35", "qwen3_5": "qwen35", "qwen3_5_moe": "qwen35moe", "qwen3_5_moe_text": "qwen35moe"}[cfg.ModelType]
	k := func(s string) string { return arch + "." + s }
	kvs := []ggKV{strkv("general.architecture", arch), u32kv(k("block_count"), uint32(cfg.Layers)),
		u32kv(k("context_length"), uint32(cfg.MaxPositions)), u32kv(k("embedding_length"), uint32(cfg.D)),
		u32kv(k("attention.head_count"), uint32(cfg.Hq)), u32kv(k("attention.head_count_kv"), uint32(cfg.Hkv)),
		u32kv(k("attention.key_length"), uint32(cfg.HeadDim)), u32kv(k("attention.value_length"), uint32(cfg.HeadDim)),
		f32kv(k("rope.freq_base"), float32(cfg.RopeTheta)), f32kv(k("attention.layer_norm_rms_epsilon"), float32(cfg.Eps)),
		u32kv(k("rope.dimension_count"), uint32(cfg.RotaryDim)),
		u32kv(k("ssm.conv_kernel"), uint32(cfg.ConvK)), u32kv(k("ssm.state_size"), uint32(dk)), u32kv(k("ssm.group_count"), uint32(Hk)),
		u32kv(k("ssm.time_step_rank"), uint32(Hv)), u32kv(k("ssm.inner_size"), uint32(Hv*dv)),
		u32kv(k("full_attention_interval"), uint32(cfg.FullAttentionInterval))}
	if cfg.Experts > 0 {
		kvs = append(kvs, u32kv(k("expert_count"), uint32(cfg.Experts)), u32kv(k("expert_used_count"), uint32(cfg.TopK)),
			u32kv(k("expert_feed_forward_length"), uint32(cfg.MoEI)), u32kv(k("expert_shared_feed_forward_length"), uint32(cfg.SharedI)))
	}
	if cfg.DenseI > 0 {
		kvs = append(kvs, u32kv(k("feed_forward_length"), uint32(cfg.DenseI)))
	}
	if len(cfg.MRoPESection) > 0 {
		s := []int32{}
		for _, v := range cfg.MRoPESection {
			s = append(s, int32(v))
		}
		kvs = append(kvs, i32arr(k("rope.dimension_sections"), append(s, 0)))
	}
	if edit != nil {
		kvs, ts = edit(kvs, ts)
	}
	if err := writeGGUF(path, kvs, ts); err != nil {
		t.Fatal(err)
	}
}

func genTiny(t *testing.T, preset string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), preset)
	if err := modelgen.Generate(dir, modelgen.Presets[preset]); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGGUFMatchesDirectory: a GGUF file laid out as llama.cpp's converter writes it (BF16
// matrices) loads to the logits of the checkpoint directory it came from, within 1e-4, in one
// shot and in chunks of 37 + 1 + rest, for Qwen3-Next (qkvz regrouped, ssm_ba, per-expert
// tensors stacked), Qwen3.5 dense and Qwen3.5-MoE (value heads tiled, fused experts split).
func TestGGUFMatchesDirectory(t *testing.T) {
	ids := make([]int32, 90)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 512)
	}
	for _, preset := range []string{"qwen3next-fmt", "qwen35-tiny", "qwen35moe-tiny"} {
		t.Run(preset, func(t *testing.T) {
			dir := genTiny(t, preset)
			path := filepath.Join(t.TempDir(), "m.gguf")
			hfToGGUF(t, dir, path, nil)
			md, mg := loadDir(t, dir), loadDir(t, path)
			if mg.Info().UsedTensors == 0 || mg.Info().Shards != 1 || !strings.HasPrefix(mg.Info().Layout, "GGUF") {
				t.Errorf("info: %+v", mg.Info())
			}
			sd, _ := md.NewSession(SessionOptions{MaxContext: 256})
			want := prefillAll(t, sd, ids, nil)
			for _, splits := range [][]int{nil, {37, 1}} {
				sg, _ := mg.NewSession(SessionOptions{MaxContext: 256})
				d, scale := maxAbsDiff(prefillAll(t, sg, ids, splits), want)
				t.Logf("chunks %v: GGUF vs directory logits max|diff| %.3g (max|logit| %.3g)", splits, d, scale)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
			fd, _ := md.Fingerprint()
			fg, err := mg.Fingerprint()
			if err != nil || fg == fd || len(fg) != 64 {
				t.Errorf("fingerprints: GGUF %q (%v), directory %q", fg, err, fd)
			}
		})
	}
}

// TestGGUFRefused: GGUF files whose metadata disagrees with their tensors, of an architecture
// strata does not map, or with a tensor type strata does not run are refused with an error
// naming the file and the problem, and nothing stays mapped.
func TestGGUFRefused(t *testing.T) {
	dir := genTiny(t, "qwen35-tiny")
	cases := []struct {
		name string
		edit func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor)
		want string
		is   error
	}{
		{"interval", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			for i := range kvs {
				if kvs[i].key == "qwen35.full_attention_interval" {
					kvs[i] = u32kv(kvs[i].key, 2)
				}
			}
			return kvs, ts
		}, "qwen35.full_attention_interval 2 makes layer 1 an attention layer, but its tensors hold a GDN layer", ErrCheckpoint},
		{"architecture", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			kvs[0] = strkv("general.architecture", "llama")
			return kvs, ts
		}, `GGUF architecture "llama" is not supported: strata maps qwen35, qwen35moe, qwen3next`, ErrUnsupported},
		{"qwen4", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			kvs[0] = strkv("general.architecture", "qwen4exp")
			return kvs, ts
		}, "Qwen3.8-Flash-Next", ErrUnsupported},
		{"type", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			for i := range ts {
				if ts[i].name == "blk.0.ssm_out.weight" { // [256, 512]: rows of two IQ2_XXS blocks
					ts[i].typ = op.GGMLIQ2_XXS
					ts[i].data = make([]byte, 256*2*66)
				}
			}
			return kvs, ts
		}, "1 IQ2_XXS", ErrUnsupported},
		{"key type", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			for i := range kvs {
				if kvs[i].key == "qwen35.embedding_length" {
					kvs[i] = strkv(kvs[i].key, "256")
				}
			}
			return kvs, ts
		}, "qwen35.embedding_length in", ErrCheckpoint},
		{"missing tensor", func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
			return kvs, ts[:len(ts)-1]
		}, "1 missing: blk.3.ffn_down.weight", ErrCheckpoint},
	}
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.gguf")
			hfToGGUF(t, dir, path, c.edit)
			m, err := LoadModel(dev, path, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v\nwant %v naming %s and %q", err, c.is, path, c.want)
			}
			if maps, _ := os.ReadFile("/proc/self/maps"); strings.Contains(string(maps), path) {
				t.Error("the file stays mapped")
			}
		})
	}
}

// TestGGUFFixturesMatchSource: the BF16 files llama.cpp's own converter made of the
// qwen35-gguf, qwen35moe-gguf and qwen3next-gguf checkpoints (internal/gguf/testdata, README
// there) load to the logits of their source directories within 1e-4, in one shot and in chunks
// of 37 + 1 + rest: every transform of the real converter is undone (Qwen3.5's tiled value
// heads, Qwen3-Next's regrouped qkvz, stacked experts, norms, ssm_a, conv1d).
func TestGGUFFixturesMatchSource(t *testing.T) {
	ids := make([]int32, 80)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 128)
	}
	for _, c := range []struct{ preset, file string }{
		{"qwen35-gguf", "qwen35-BF16.gguf"}, {"qwen35moe-gguf", "qwen35moe-BF16.gguf"}, {"qwen3next-gguf", "qwen3next-BF16.gguf"},
	} {
		t.Run(c.file, func(t *testing.T) {
			md, mg := loadDir(t, genTiny(t, c.preset)), loadDir(t, filepath.Join("..", "internal", "gguf", "testdata", c.file))
			sd, _ := md.NewSession(SessionOptions{MaxContext: 256})
			want := prefillAll(t, sd, ids, nil)
			for _, splits := range [][]int{nil, {37, 1}} {
				sg, _ := mg.NewSession(SessionOptions{MaxContext: 256})
				d, scale := maxAbsDiff(prefillAll(t, sg, ids, splits), want)
				t.Logf("chunks %v: llama.cpp's BF16 file vs its source directory: logits max|diff| %.3g (max|logit| %.3g)", splits, d, scale)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
}

// TestInspectGGUFPublished: the header-only copies of published layouts pass InspectGGUF with
// their tensors by class and type, or are refused by name (Qwen3.8-Flash-Next's architecture).
func TestInspectGGUFPublished(t *testing.T) {
	dir := filepath.Join("..", "internal", "gguf", "testdata", "published")
	for file, arch := range map[string]string{"qwen3.6-35b-a3b-UD-Q4_K_XL-like.gguf": "qwen35moe", "qwen3.6-35b-a3b-Q4_K_M.gguf": "qwen35moe",
		"qwen3.5-27b-Q4_K_M.gguf": "qwen35", "qwen3-next-80b-a3b-Q4_K_M.gguf": "qwen3next"} {
		g, err := InspectGGUF(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d tensors, %.1f GB; %+v", file, g.Tensors, float64(g.TensorBytes)/1e9, g.Types)
		if g.Model == nil || g.Architecture != arch || len(g.Types) < 4 {
			t.Errorf("%s: model %v, refused %q, types %+v", file, g.Model != nil, g.Refused, g.Types)
		}
	}
	q, err := InspectGGUF(filepath.Join(dir, "qwen3.8-flash-next-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Model != nil || !strings.Contains(q.Refused, "Qwen3.8-Flash-Next") {
		t.Errorf("qwen3.8 Q8_0: refused %q", q.Refused)
	}
}

// q8Edit turns every BF16 matrix of a test conversion into Q8_0 blocks (quantized), or (asF32)
// into the F32 values those blocks hold: the two files hold the same weights.
func q8Edit(asF32 bool) func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
	return func(kvs []ggKV, ts []ggTensor) ([]ggKV, []ggTensor) {
		for i := range ts {
			t := &ts[i]
			if t.typ != op.GGMLBF16 || len(t.dims) < 2 || t.dims[0]%32 != 0 {
				continue
			}
			n := len(t.data) / 2
			var out []byte
			for b := 0; b < n; b += 32 {
				var x [32]float32
				amax := float32(0)
				for j := range x {
					x[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.data[2*(b+j):])) << 16)
					amax = max(amax, float32(math.Abs(float64(x[j]))))
				}
				dh := float16bits(amax / 127)
				d := float16val(dh)
				if asF32 {
					for j := range x {
						q := float32(0)
						if d != 0 {
							q = float32(math.Round(float64(x[j] / d)))
						}
						out = binary.LittleEndian.AppendUint32(out, math.Float32bits(q*d))
					}
					continue
				}
				out = binary.LittleEndian.AppendUint16(out, dh)
				for j := range x {
					q := 0.0
					if d != 0 {
						q = math.Round(float64(x[j] / d))
					}
					out = append(out, byte(int8(q)))
				}
			}
			t.data, t.typ = out, op.GGMLQ8_0
			if asF32 {
				t.typ = op.GGMLF32
			}
		}
		return kvs, ts
	}
}

func float16bits(f float32) uint16 { return float16.Fromfloat32(f).Bits() }
func float16val(h uint16) float32  { return float16.Frombits(h).Float32() }

// TestGGUFQ8MatchesF32: a GGUF file whose matrices are Q8_0 blocks (op.GGML views of the
// file: embedding, stacked experts, every projection) gives, within 1e-4, the logits of the same
// file with those blocks' values stored as F32.
func TestGGUFQ8MatchesF32(t *testing.T) {
	ids := make([]int32, 60)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 512)
	}
	for _, preset := range []string{"qwen35moe-tiny", "qwen3next-fmt"} {
		t.Run(preset, func(t *testing.T) {
			dir := genTiny(t, preset)
			pq, pf := filepath.Join(t.TempDir(), "q8.gguf"), filepath.Join(t.TempDir(), "f32.gguf")
			hfToGGUF(t, dir, pq, q8Edit(false))
			hfToGGUF(t, dir, pf, q8Edit(true))
			mq, mf := loadDir(t, pq), loadDir(t, pf)
			if ex := mq.layers[0].experts.GateUp[1]; ex.DType != op.GGML || ex.GG.Type != op.GGMLQ8_0 {
				t.Fatalf("experts loaded as %v", ex.DType)
			}
			sf, _ := mf.NewSession(SessionOptions{MaxContext: 256})
			want := prefillAll(t, sf, ids, nil)
			for _, splits := range [][]int{nil, {37, 1}} {
				sq, _ := mq.NewSession(SessionOptions{MaxContext: 256})
				d, scale := maxAbsDiff(prefillAll(t, sq, ids, splits), want)
				t.Logf("chunks %v: Q8_0 vs F32 of its values: logits max|diff| %.3g (max|logit| %.3g)", splits, d, scale)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
}

// TestGGUFStateFile: a state file made by a GGUF model continues in another load of the same
// file to the one-shot logits, and is refused by the model of the source directory (another
// fingerprint), as state files of directories are.
func TestGGUFStateFile(t *testing.T) {
	ids := make([]int32, 70)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % 128)
	}
	path := filepath.Join("..", "internal", "gguf", "testdata", "qwen35-BF16.gguf")
	m1, m2, md := loadDir(t, path), loadDir(t, path), loadDir(t, genTiny(t, "qwen35-gguf"))
	s1, _ := m1.NewSession(SessionOptions{MaxContext: 128})
	want := prefillAll(t, s1, ids, nil)
	s1, _ = m1.NewSession(SessionOptions{MaxContext: 128})
	prefillAll(t, s1, ids[:40], nil)
	state := filepath.Join(t.TempDir(), "s.state")
	if err := s1.SaveStateFile(state); err != nil {
		t.Fatal(err)
	}
	s2, _ := m2.NewSession(SessionOptions{MaxContext: 128})
	if err := s2.LoadStateFile(state); err != nil {
		t.Fatal(err)
	}
	got, err := s2.Prefill(t.Context(), ids[40:], PrefillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	V := got.Vocab
	if d, _ := maxAbsDiff(got.Data, want[len(want)-V:]); d > 1e-4 {
		t.Errorf("continued from the state file: last logits max|diff| %.3g", d)
	}
	sd, _ := md.NewSession(SessionOptions{MaxContext: 128})
	if err := sd.LoadStateFile(state); err == nil || !strings.Contains(err.Error(), "another checkpoint") {
		t.Errorf("the directory's model loaded the GGUF model's state: %v", err)
	}
}

// ggufGoldens is the float64 goldens file of the GGUF fixtures: `input_ids` and NAME.logits
// [T, vocab] for each NAME.gguf beside it, computed by internal/gguf/testdata/goldens.py from the
// values each file holds (its own GGUF reader and block decoders, the converter's transforms
// inverted, a float64 forward), never from strata.
var ggufGoldens = filepath.Join("..", "internal", "gguf", "testdata", "goldens.safetensors")

// TestGGUFGoldens: every GGUF fixture with goldens (BF16 and each quantized type llama-quantize
// wrote) matches its float64 logits within 1e-4 on the cpu backend, one shot and in chunks of
// 37 + 1 + rest.
func TestGGUFGoldens(t *testing.T) {
	checkGGUFGoldens(t, func(t *testing.T, path string) *Model { return loadDir(t, path) })
}

// TestGGUFGoldensMetal: the same on the metal backend (MSL emulator): every GGUF fixture (BF16
// and each quantized type llama-quantize wrote: Q8_0, Q6_K, Q4_K_M with its Q5_0 / Q4_K / Q6_K
// rows, Q4_0, IQ4_XS, MXFP4_MOE; qwen35, qwen35moe and qwen3next).
func TestGGUFGoldensMetal(t *testing.T) {
	checkGGUFGoldens(t, func(t *testing.T, path string) *Model { _, m := loadTinyMetal(t, path); return m })
}

// checkGGUFGoldens prefills the goldens' prompt through every fixture with NAME.logits in
// ggufGoldens, each loaded by load, one shot and in chunks of 37 + 1 + rest, and fails where the
// logits are more than 1e-4 from the float64 goldens.
func checkGGUFGoldens(t *testing.T, load func(t *testing.T, path string) *Model) {
	if _, err := os.Stat(ggufGoldens); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is absent: python3 internal/gguf/testdata/goldens.py internal/gguf/testdata writes it", ggufGoldens)
	}
	g := openGoldensFile(t, ggufGoldens)
	ids := g.i32("input_ids")
	n := 0
	for _, name := range g.f.Names() {
		file, ok := strings.CutSuffix(name, ".logits")
		if !ok {
			continue
		}
		n++
		t.Run(file, func(t *testing.T) {
			want := g.f32(name)
			m := load(t, filepath.Join(filepath.Dir(ggufGoldens), file+".gguf"))
			for _, splits := range [][]int{nil, {37, 1}} {
				s, _ := m.NewSession(SessionOptions{MaxContext: 128})
				d, scale := maxAbsDiff(prefillAll(t, s, ids, splits), want)
				t.Logf("chunks %v: logits max|diff| %.3g against the float64 goldens (max|logit| %.3g)", splits, d, scale)
				if d > 1e-4 {
					t.Errorf("chunks %v: max|diff| %.3g > 1e-4", splits, d)
				}
			}
		})
	}
	if n == 0 {
		t.Fatalf("%s holds no NAME.logits", ggufGoldens)
	}
}

// TestGGUFInt8Packed: in int8 mode the Q4_0 and Q4_K weights of the GGUF fixtures are packed at
// load into the kernels' panels (the report says so) and the mapped file's pages are let go:
// ResidentBytes stays within 1.15x of the f32 mode's (the file's blocks), and the logits, one
// shot and in chunks of 37 + 1 + rest, stay as near the float64 goldens as int8 compute of
// these files does (BENCHMARKS.md, "GGUF fixtures": max |diff| 0.08-0.58, mean 0.011-0.013; a
// wrong panel or scale is off by the logits' own size).
func TestGGUFInt8Packed(t *testing.T) {
	if _, err := os.Stat(ggufGoldens); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is absent", ggufGoldens)
	}
	g := openGoldensFile(t, ggufGoldens)
	ids := g.i32("input_ids")
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"qwen35-Q4_0", "qwen35-Q4_K_M", "qwen35moe-Q4_0", "qwen3next-Q4_0"} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(filepath.Dir(ggufGoldens), file+".gguf")
			f32 := loadDir(t, path)
			m, err := LoadModel(dev, path, LoadOptions{Compute: "int8"})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if r := m.Compute(); !strings.Contains(r, "packed at load into panels of their size") {
				t.Errorf("compute report %q does not name the packed weights", r)
			}
			if r := float64(m.Info().ResidentBytes) / float64(f32.Info().ResidentBytes); r < 1 || r > 1.15 {
				t.Errorf("int8 ResidentBytes %d, %.3fx the f32 mode's %d", m.Info().ResidentBytes, r, f32.Info().ResidentBytes)
			}
			want := g.f32(file + ".logits")
			for _, splits := range [][]int{nil, {37, 1}} {
				s, _ := m.NewSession(SessionOptions{MaxContext: 128})
				got := prefillAll(t, s, ids, splits)
				s.Close()
				d, _ := maxAbsDiff(got, want)
				var mean float64
				for i := range got {
					mean += math.Abs(float64(got[i]) - float64(want[i]))
				}
				mean /= float64(len(got))
				t.Logf("chunks %v: max|diff| %.3g, mean %.3g against the float64 goldens", splits, d, mean)
				if d > 1 || mean > 0.02 {
					t.Errorf("chunks %v: max|diff| %.3g (want <= 1), mean %.3g (want <= 0.02)", splits, d, mean)
				}
			}
		})
	}
}
