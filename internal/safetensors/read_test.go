package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

const testdata = "../../testdata"

// TestTinyCheckpoints opens both reference checkpoints and checks them against what their
// index files and the generating run report: tensor counts (report.txt / report_q4.txt), the
// index's total_size (sum of tensor bytes), bf16 everywhere, and that every tensor widens.
func TestTinyCheckpoints(t *testing.T) {
	cases := []struct {
		dir     string
		tensors int
	}{
		{"qwen3next-tiny", 202},
		{"qwen4exp-tiny", 108},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(testdata, c.dir)
			raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			var idx struct {
				Metadata struct {
					TotalSize int64 `json:"total_size"`
				} `json:"metadata"`
				WeightMap map[string]string `json:"weight_map"`
			}
			if err := json.Unmarshal(raw, &idx); err != nil {
				t.Fatal(err)
			}
			ck, err := OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			names := ck.Names()
			if len(names) != c.tensors || len(idx.WeightMap) != c.tensors {
				t.Fatalf("%d tensors (index %d), want %d", len(names), len(idx.WeightMap), c.tensors)
			}
			var total int64
			for _, n := range names {
				tn, err := ck.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				if tn.DType != BF16 {
					t.Errorf("%s is %s, want BF16", n, tn.DType)
				}
				if filepath.Base(tn.File) != idx.WeightMap[n] {
					t.Errorf("%s read from %s, index says %s", n, tn.File, idx.WeightMap[n])
				}
				v, err := tn.Float32()
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s[%d] = %v", n, i, x)
					}
				}
				total += int64(len(tn.Data))
			}
			if total != idx.Metadata.TotalSize {
				t.Fatalf("tensor bytes %d, index total_size %d", total, idx.Metadata.TotalSize)
			}
			emb, err := ck.Tensor("model.embed_tokens.weight")
			if err != nil || len(emb.Shape) != 2 || emb.Shape[0] != 512 || emb.Shape[1] != 256 {
				t.Fatalf("embed_tokens: %v %v", emb, err)
			}
		})
	}
}

func openGolden(t *testing.T, name string) *File {
	t.Helper()
	f, err := Open(filepath.Join(testdata, "goldens", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func tensor(t *testing.T, f *File, name string, dt DType, shape ...int64) *Tensor {
	t.Helper()
	tn, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	if tn.DType != dt || len(tn.Shape) != len(shape) {
		t.Fatalf("%s: %s %v, want %s %v", name, tn.DType, tn.Shape, dt, shape)
	}
	for i := range shape {
		if tn.Shape[i] != shape[i] {
			t.Fatalf("%s: shape %v, want %v", name, tn.Shape, shape)
		}
	}
	return tn
}

// TestOpGoldenMoECombine reads op_attn_moe.safetensors and recomputes the MoE combine output
// from its inputs in float64 (the README's definition), which only agrees if every tensor
// (F32 and I32) is read at the right offset with the right shape.
func TestOpGoldenMoECombine(t *testing.T) {
	f := openGolden(t, "op_attn_moe.safetensors")
	ye, _ := tensor(t, f, "moe.ye", F32, 320, 2560).Float32()
	rk, err := tensor(t, f, "moe.rk", I32, 32, 10).Int32()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tensor(t, f, "moe.w", F32, 32, 10).Float32()
	out, _ := tensor(t, f, "moe.out", F32, 32, 2560).Float32()
	const n = 2560
	var maxDiff, maxAbs float64
	empty := 0
	for tok := 0; tok < 32; tok++ {
		for c := 0; c < n; c++ {
			var acc float64
			for j := 0; j < 10; j++ {
				r := rk[tok*10+j]
				if r < 0 {
					if c == 0 {
						empty++
					}
					continue
				}
				acc += float64(w[tok*10+j]) * float64(ye[int(r)*n+c])
			}
			maxDiff = math.Max(maxDiff, math.Abs(acc-float64(out[tok*n+c])))
			maxAbs = math.Max(maxAbs, math.Abs(acc))
		}
	}
	if maxAbs == 0 || maxDiff > 1e-6*maxAbs {
		t.Fatalf("moe.out max |diff| %g (max |out| %g)", maxDiff, maxAbs)
	}
	t.Logf("moe.out recomputed: max |diff| %.3g of max |out| %.3g; %d empty slots", maxDiff, maxAbs, empty)

	tensor(t, f, "attn.q", F32, 96, 24, 256)
	tensor(t, f, "attn.k", F32, 296, 2, 256)
	tensor(t, f, "attn.lse", F32, 96, 24)
}

// TestOpGoldenGDNShapes checks the GDN op golden's tensors against the README and one invariant
// of the data: g is a log decay, so g <= 0 everywhere, and beta lies in [0, 1].
func TestOpGoldenGDNShapes(t *testing.T) {
	f := openGolden(t, "op_gdn.safetensors")
	tensor(t, f, "q", F32, 100, 16, 128)
	tensor(t, f, "k", F32, 100, 16, 128)
	tensor(t, f, "v", F32, 100, 48, 128)
	tensor(t, f, "o", F32, 100, 48, 128)
	tensor(t, f, "state_in", F32, 48, 128, 128)
	tensor(t, f, "state_out", F32, 48, 128, 128)
	g, _ := tensor(t, f, "g", F32, 100, 48).Float32()
	beta, _ := tensor(t, f, "beta", F32, 100, 48).Float32()
	for i := range g {
		if g[i] > 0 || beta[i] < 0 || beta[i] > 1 {
			t.Fatalf("element %d: g %v beta %v", i, g[i], beta[i])
		}
	}
}

// TestModelGoldens reads both model golden files: token ids in range, and qwen4exp's QSA
// selection mask obeys causality and is dense while p+1 <= budget+ratio-1 = 35 (README).
func TestModelGoldens(t *testing.T) {
	for _, name := range []string{"model_goldens.safetensors", "q4_model_goldens.safetensors"} {
		f := openGolden(t, name)
		for prompt, T := range map[string]int64{"a": 96, "b": 300} {
			ids, err := tensor(t, f, prompt+".input_ids", I32, T).Int32()
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if id < 0 || id >= 512 {
					t.Fatalf("%s %s: token id %d", name, prompt, id)
				}
			}
			tensor(t, f, prompt+".logits", F32, T, 512)
		}
	}
	q4 := openGolden(t, "q4_model_goldens.safetensors")
	ids, _ := tensor(t, q4, "a.input_ids", I32, 96).Int32()
	if ids[50] != 511 {
		t.Fatalf("prompt a position 50 holds %d, README says eos 511", ids[50])
	}
	const T = 300
	sel, err := tensor(t, q4, "b.qsa_selected.3", U8, T, T).Int32()
	if err != nil {
		t.Fatal(err)
	}
	maxRow := 0
	for q := 0; q < T; q++ {
		row := 0
		for s := 0; s < T; s++ {
			v := sel[q*T+s]
			if v != 0 && v != 1 || s > q && v != 0 {
				t.Fatalf("selected[%d][%d] = %d", q, s, v)
			}
			row += int(v)
		}
		if q+1 <= 35 && row != q+1 {
			t.Fatalf("query %d selects %d tokens, want all %d", q, row, q+1)
		}
		maxRow = max(maxRow, row)
	}
	if maxRow != 35 {
		t.Fatalf("max tokens per query %d, report says 35", maxRow)
	}
}

// bf16Ref decodes a bfloat16 bit pattern from its fields (sign, 8-bit exponent, 7-bit
// mantissa), independently of the bit-shift used by Float32.
func bf16Ref(h uint16) float64 { return floatRef(uint64(h), 8, 7) }

// f16Ref decodes an IEEE half (5-bit exponent, 10-bit mantissa).
func f16Ref(h uint16) float64 { return floatRef(uint64(h), 5, 10) }

func floatRef(bits uint64, ebits, mbits uint) float64 {
	sign := 1.0
	if bits>>(ebits+mbits)&1 == 1 {
		sign = -1
	}
	e := int(bits >> mbits & (1<<ebits - 1))
	m := float64(bits & (1<<mbits - 1))
	bias := 1<<(ebits-1) - 1
	switch e {
	case 0:
		return sign * math.Ldexp(m, 1-bias-int(mbits))
	case 1<<ebits - 1:
		if m != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+m/float64(uint64(1)<<mbits), e-bias)
}

// TestWidening writes every BF16 and F16 bit pattern and a set of F32 values to a file and
// compares Float32 with the field-wise decoders above (exact: every value is a float32).
func TestWidening(t *testing.T) {
	var bf, hf []byte
	for i := 0; i < 1<<16; i++ {
		bf = binary.LittleEndian.AppendUint16(bf, uint16(i))
		hf = binary.LittleEndian.AppendUint16(hf, uint16(i))
	}
	f32 := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(-1)), 1e-40, 3.14159}
	var fb []byte
	for _, v := range f32 {
		fb = binary.LittleEndian.AppendUint32(fb, math.Float32bits(v))
	}
	p := filepath.Join(t.TempDir(), "widen.safetensors")
	if err := WriteFile(p, []WriteTensor{
		{"bf", BF16, []int64{256, 256}, bf},
		{"hf", F16, []int64{1 << 16}, hf},
		{"f", F32, []int64{int64(len(f32))}, fb},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		ref  func(uint16) float64
	}{{"bf", bf16Ref}, {"hf", f16Ref}} {
		tn, _ := f.Tensor(c.name)
		got, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tn.Uint16s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			want := c.ref(uint16(i))
			if raw[i] != uint16(i) {
				t.Fatalf("%s Uint16s[%d] = %#x", c.name, i, raw[i])
			}
			if math.IsNaN(want) {
				if !math.IsNaN(float64(got[i])) {
					t.Fatalf("%s %#04x: got %v, want NaN", c.name, i, got[i])
				}
				continue
			}
			if float64(got[i]) != want || math.Signbit(float64(got[i])) != math.Signbit(want) {
				t.Fatalf("%s %#04x: got %v, want %v", c.name, i, got[i], want)
			}
		}
	}
	tn, _ := f.Tensor("f")
	got, _ := tn.Float32()
	for i, v := range f32 {
		if math.Float32bits(got[i]) != math.Float32bits(v) {
			t.Fatalf("f32[%d] = %v, want %v", i, got[i], v)
		}
	}
	if _, err := tn.Int32(); !errors.Is(err, ErrDType) {
		t.Fatalf("Int32 of F32: %v", err)
	}
	if _, err := tn.Uint16s(); !errors.Is(err, ErrDType) {
		t.Fatalf("Uint16s of F32: %v", err)
	}
	if err := tn.Float32Into(make([]float32, 3)); !errors.Is(err, ErrDType) {
		t.Fatalf("Float32Into with a short destination: %v", err)
	}
}

// TestUnalignedUint16s: a header of odd length puts BF16 data at an odd address; Uint16s must
// still return the right values (as a copy).
func TestUnalignedUint16s(t *testing.T) {
	h := `{"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}} `
	if len(h)%2 == 0 {
		h += " "
	}
	body := []byte{1, 0, 2, 0, 0xff, 0xff}
	p := filepath.Join(t.TempDir(), "odd.safetensors")
	if err := os.WriteFile(p, image(h, body), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn, _ := f.Tensor("x")
	u, err := tn.Uint16s()
	if err != nil || len(u) != 3 || u[0] != 1 || u[1] != 2 || u[2] != 0xffff {
		t.Fatalf("Uint16s = %v, %v", u, err)
	}
}

// TestUint32s: U32 codes behind a BF16 tensor of an odd element count sit at an address that is
// 2 mod 4 and come back as a copy; aligned ones alias the mapping; other dtypes are ErrDType.
func TestUint32s(t *testing.T) {
	h := `{"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"c":{"dtype":"U32","shape":[2],"data_offsets":[2,10]},` +
		`"e":{"dtype":"BF16","shape":[1],"data_offsets":[10,12]},"d":{"dtype":"U32","shape":[1],"data_offsets":[12,16]}}`
	for (8+len(h))%8 != 0 {
		h += " "
	}
	body := []byte{7, 7, 0x10, 0x32, 0x54, 0x76, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 1, 0, 0, 0}
	p := filepath.Join(t.TempDir(), "u32.safetensors")
	if err := os.WriteFile(p, image(h, body), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _ := f.Tensor("c")
	u, err := c.Uint32s()
	if err != nil || len(u) != 2 || u[0] != 0x76543210 || u[1] != 0xddccbbaa {
		t.Fatalf("unaligned Uint32s = %#x, %v", u, err)
	}
	d, _ := f.Tensor("d")
	v, err := d.Uint32s()
	if err != nil || len(v) != 1 || v[0] != 1 || unsafe.Pointer(&v[0]) != unsafe.Pointer(&d.Data[0]) {
		t.Fatalf("aligned Uint32s = %v, %v (want a view of the data)", v, err)
	}
	a, _ := f.Tensor("a")
	if _, err := a.Uint32s(); !errors.Is(err, ErrDType) {
		t.Fatalf("Uint32s of BF16: %v", err)
	}
}

// TestInt32Conversions covers I64 narrowing (with its range check), U8 and BOOL widening.
func TestInt32Conversions(t *testing.T) {
	var i64 []byte
	for _, v := range []int64{-5, math.MaxInt32, math.MinInt32} {
		i64 = binary.LittleEndian.AppendUint64(i64, uint64(v))
	}
	big := binary.LittleEndian.AppendUint64(nil, uint64(math.MaxInt32+1))
	p := filepath.Join(t.TempDir(), "ints.safetensors")
	if err := WriteFile(p, []WriteTensor{
		{"i64", I64, []int64{3}, i64},
		{"big", I64, []int64{1}, big},
		{"u8", U8, []int64{2}, []byte{0, 255}},
		{"bool", BOOL, []int64{2}, []byte{1, 0}},
	}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]int32{"i64": {-5, math.MaxInt32, math.MinInt32}, "u8": {0, 255}, "bool": {1, 0}}
	for name, w := range want {
		tn, _ := f.Tensor(name)
		got, err := tn.Int32()
		if err != nil {
			t.Fatal(err)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s = %v, want %v", name, got, w)
			}
		}
	}
	tn, _ := f.Tensor("big")
	if _, err := tn.Int32(); !errors.Is(err, ErrDType) {
		t.Fatalf("I64 overflow: %v", err)
	}
	if _, err := tn.Float32(); !errors.Is(err, ErrDType) {
		t.Fatalf("Float32 of I64: %v", err)
	}
	hand := &Tensor{Name: "h", DType: F32, Shape: []int64{4}, Data: make([]byte, 8)}
	if _, err := hand.Float32(); !errors.Is(err, ErrFormat) {
		t.Fatalf("hand-built tensor with short data: %v", err)
	}
}
