package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
)

// The Go twins of the kernel parameter structs of kernels/params.h (one definition per struct on
// each side; TestParamsMatchHeader compares their names, field order and the MSL offsets on the
// emulator). An MSL uint field is an int here (range-checked by guard32 before encoding), a
// flag an MSL uint and a Go bool (0/1), a float a float32. paramBytes encodes a twin as the 4-byte
// little-endian fields the kernel reads with setBytes.

// gdnPreParams is GDNPreParams of params.h.
type gdnPreParams struct {
	T  int
	Hk int
	Hv int
	Dk int
	Dv int
	K  int // conv kernel length
}

// gdnConvParams is GDNConvParams of params.h.
type gdnConvParams struct {
	T int
	C int
	K int
}

// gdnScanParams is GDNScanParams of params.h.
type gdnScanParams struct {
	T     int
	Hk    int
	Hv    int
	Dk    int
	Dv    int
	Tiled bool // value head h reads qk head h % Hk (else h / (Hv / Hk))
}

// gdnPostParams is GDNPostParams of params.h.
type gdnPostParams struct {
	Dv  int
	Eps float32
}

// gemmParams is GemmParams of params.h.
type gemmParams struct {
	Rows int // rows of x (all experts for the grouped form)
	N    int
	K    int
}

// swigluParams is SwiGLUParams of params.h.
type swigluParams struct {
	Rows int
	I    int
}

// moeCombParams is MoECombParams of params.h.
type moeCombParams struct {
	T int
	K int
	D int
}

// normParams is NormParams of params.h.
type normParams struct {
	D   int // elements per row (per stream)
	S   int // streams per token (1 for a plain RMSNorm1p)
	Eps float32
}

// grApplyParams is GRApplyParams of params.h.
type grApplyParams struct {
	T         int
	K         int
	S         int
	D         int
	Eps       float32
	HasShared bool // shared [T, D] (the gated shared-expert output) is added to u
}

// routeParams is RouteParams of params.h.
type routeParams struct {
	E    int
	K    int
	Norm bool // norm_topk_prob
}

// embedParams is EmbedParams of params.h.
type embedParams struct {
	T     int
	D     int
	S     int
	V     int
	Dtype int // table dtype: 0 float32 (table32), 1 bfloat16, 2 half (table16)
}

// actParams is ActParams of params.h.
type actParams struct {
	N   int
	Div float32 // the input is divided by div first
	Mul float32 // the output is multiplied by mul
	Act int     // 0 identity, 1 silu, 2 sigmoid
}

// ewParams is EwParams of params.h.
type ewParams struct {
	N    int
	D    int  // row length (row_sigmoid_scale)
	HasV bool // ew_add: v is added too
}

// streamParams is StreamParams of params.h.
type streamParams struct {
	D int
	S int
}

// pleGatherParams is PLEGatherParams of params.h.
type pleGatherParams struct {
	T     int
	Heads int
	Hd    int // head dim (table row length)
	Dtype int // 0 float32 (table32), 1 bfloat16, 2 half (table16)
}

// pleConvParams is PLEConvParams of params.h.
type pleConvParams struct {
	T   int
	C   int // channels S*D
	K   int // conv kernel (4)
	Dil int // dilation (3)
}

// moeSlotParams is MoESlotParams of params.h.
type moeSlotParams struct {
	T      int
	K      int
	E      int
	D      int
	Ntiles int // tile-table entries to fill (the host's upper bound)
}

// copyParams is CopyParams of params.h.
type copyParams struct {
	N int
}

// qsaPrepParams is QSAPrepParams of params.h.
type qsaPrepParams struct {
	T    int
	Hq   int
	Hkv  int
	D    int // head dim (256)
	Rot  int // rotary dims (64)
	Pos0 int // position of token 0 (rope table row)
	Row0 int // cache row of token 0
	Eps  float32
}

// qsaIndexParams is QSAIndexParams of params.h.
type qsaIndexParams struct {
	T     int
	Pos0  int // position of token 0
	Row0  int // key cache row of token 0
	Nh    int // index heads
	Dim   int // index head dim (128)
	Ratio int // tokens per block (4)
	Rot   int // rotary dims (64)
	Keep  int // blocks a sparse row keeps (budget / ratio)
	Nbmax int // blocks of the last sparse row: row stride of the score matrix
	Eps   float32
	Scale float32 // 1 / sqrt(dim)
}

// qsaFlashParams is QSAFlashParams of params.h.
type qsaFlashParams struct {
	T     int
	Hq    int
	Hkv   int
	D     int
	Pos0  int
	Scale float32
	Hpg   int // query heads per KV head
	Tq    int // query tokens per tile (hpg * tq <= QSA_RMAX); 1 when qsa_sparse
}

// qGatherParams is QGatherParams of params.h.
type qGatherParams struct {
	Rows int // table rows gathered (one id each)
	Rep  int // copies written per row (the S streams of Embed; 1 for PLE)
	K    int // row length
}

// paramTwins lists every twin with its MSL name (the header test walks it).
var paramTwins = map[string]any{
	"GDNPreParams":    gdnPreParams{},
	"GDNConvParams":   gdnConvParams{},
	"GDNScanParams":   gdnScanParams{},
	"GDNPostParams":   gdnPostParams{},
	"GemmParams":      gemmParams{},
	"SwiGLUParams":    swigluParams{},
	"MoECombParams":   moeCombParams{},
	"NormParams":      normParams{},
	"GRApplyParams":   grApplyParams{},
	"RouteParams":     routeParams{},
	"EmbedParams":     embedParams{},
	"ActParams":       actParams{},
	"EwParams":        ewParams{},
	"StreamParams":    streamParams{},
	"PLEGatherParams": pleGatherParams{},
	"PLEConvParams":   pleConvParams{},
	"MoESlotParams":   moeSlotParams{},
	"CopyParams":      copyParams{},
	"QSAPrepParams":   qsaPrepParams{},
	"QSAIndexParams":  qsaIndexParams{},
	"QSAFlashParams":  qsaFlashParams{},
	"QGatherParams":   qGatherParams{},
}

// paramBytes encodes a params twin (a struct of int, bool and float32 fields) as its MSL struct:
// each field 4 bytes little-endian in declaration order (int as a 32-bit integer, bool as 0/1,
// float32 as IEEE bits). Callers range-check ints with guard32 first.
func paramBytes(v any) []byte {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		panic(fmt.Sprintf("metal: params of type %T", v))
	}
	out := make([]byte, 0, 4*rv.NumField())
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		var u uint32
		switch f.Kind() {
		case reflect.Int:
			u = uint32(int32(f.Int()))
		case reflect.Bool:
			if f.Bool() {
				u = 1
			}
		case reflect.Float32:
			u = math.Float32bits(float32(f.Float()))
		default:
			panic(fmt.Sprintf("metal: params field %s of %T has kind %v", rv.Type().Field(i).Name, v, f.Kind()))
		}
		out = binary.LittleEndian.AppendUint32(out, u)
	}
	return out
}
