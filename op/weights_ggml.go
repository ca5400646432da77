package op

import (
	"fmt"
	"slices"
)

// GGMLType is a tensor type id of the GGUF format (ggml's enum ggml_type, as stored in a GGUF
// tensor-info entry). Source: ggml/include/ggml.h and ggml/src/ggml-common.h (the block structs)
// of llama.cpp; docs/FORMATS.md, section GGUF.
type GGMLType uint32

// The GGUF tensor types strata knows by name. The float types (F32, F16, BF16) load as the
// Matrix dtypes of the same name; the block types of GGMLBlockTypes load as a GGML Matrix; every
// other id is refused at load, named.
const (
	GGMLF32     GGMLType = 0
	GGMLF16     GGMLType = 1
	GGMLQ4_0    GGMLType = 2
	GGMLQ4_1    GGMLType = 3
	GGMLQ5_0    GGMLType = 6
	GGMLQ5_1    GGMLType = 7
	GGMLQ8_0    GGMLType = 8
	GGMLQ8_1    GGMLType = 9
	GGMLQ2_K    GGMLType = 10
	GGMLQ3_K    GGMLType = 11
	GGMLQ4_K    GGMLType = 12
	GGMLQ5_K    GGMLType = 13
	GGMLQ6_K    GGMLType = 14
	GGMLQ8_K    GGMLType = 15
	GGMLIQ2_XXS GGMLType = 16
	GGMLIQ2_XS  GGMLType = 17
	GGMLIQ3_XXS GGMLType = 18
	GGMLIQ1_S   GGMLType = 19
	GGMLIQ4_NL  GGMLType = 20
	GGMLIQ3_S   GGMLType = 21
	GGMLIQ2_S   GGMLType = 22
	GGMLIQ4_XS  GGMLType = 23
	GGMLI8      GGMLType = 24
	GGMLI16     GGMLType = 25
	GGMLI32     GGMLType = 26
	GGMLI64     GGMLType = 27
	GGMLF64     GGMLType = 28
	GGMLIQ1_M   GGMLType = 29
	GGMLBF16    GGMLType = 30
	GGMLTQ1_0   GGMLType = 34
	GGMLTQ2_0   GGMLType = 35
	GGMLMXFP4   GGMLType = 39
	GGMLNVFP4   GGMLType = 40
	GGMLQ1_0    GGMLType = 41
	GGMLQ2_0    GGMLType = 42
)

// ggmlTraits are a type's name, elements per block and bytes per block (ggml's type_traits).
var ggmlTraits = map[GGMLType]struct {
	name        string
	block, size int
}{
	GGMLF32: {"F32", 1, 4}, GGMLF16: {"F16", 1, 2}, GGMLBF16: {"BF16", 1, 2},
	GGMLQ4_0: {"Q4_0", 32, 18}, GGMLQ4_1: {"Q4_1", 32, 20},
	GGMLQ5_0: {"Q5_0", 32, 22}, GGMLQ5_1: {"Q5_1", 32, 24},
	GGMLQ8_0: {"Q8_0", 32, 34}, GGMLQ8_1: {"Q8_1", 32, 36},
	GGMLQ2_K: {"Q2_K", 256, 84}, GGMLQ3_K: {"Q3_K", 256, 110}, GGMLQ4_K: {"Q4_K", 256, 144},
	GGMLQ5_K: {"Q5_K", 256, 176}, GGMLQ6_K: {"Q6_K", 256, 210}, GGMLQ8_K: {"Q8_K", 256, 292},
	GGMLIQ2_XXS: {"IQ2_XXS", 256, 66}, GGMLIQ2_XS: {"IQ2_XS", 256, 74}, GGMLIQ3_XXS: {"IQ3_XXS", 256, 98},
	GGMLIQ1_S: {"IQ1_S", 256, 50}, GGMLIQ4_NL: {"IQ4_NL", 32, 18}, GGMLIQ3_S: {"IQ3_S", 256, 110},
	GGMLIQ2_S: {"IQ2_S", 256, 82}, GGMLIQ4_XS: {"IQ4_XS", 256, 136},
	GGMLI8: {"I8", 1, 1}, GGMLI16: {"I16", 1, 2}, GGMLI32: {"I32", 1, 4}, GGMLI64: {"I64", 1, 8},
	GGMLF64: {"F64", 1, 8}, GGMLIQ1_M: {"IQ1_M", 256, 56},
	GGMLTQ1_0: {"TQ1_0", 256, 54}, GGMLTQ2_0: {"TQ2_0", 256, 66},
	GGMLMXFP4: {"MXFP4", 32, 17}, GGMLNVFP4: {"NVFP4", 64, 36},
}

// GGMLBlockTypes are the block-quantized GGUF types a GGML Matrix holds (kernels for each on
// every backend).
var GGMLBlockTypes = []GGMLType{
	GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0,
	GGMLQ2_K, GGMLQ3_K, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K,
	GGMLIQ4_NL, GGMLIQ4_XS, GGMLMXFP4,
}

// String is ggml's name of the type ("Q4_K"), or "type N" for an id ggml does not define.
func (t GGMLType) String() string {
	if tr, ok := ggmlTraits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// Known reports whether t is an id of ggml's enum that strata knows the block layout of.
func (t GGMLType) Known() bool {
	_, ok := ggmlTraits[t]
	return ok
}

// BlockSize is the number of elements one block of the type holds along a row (1 for the
// float and integer types, 32 or 256 for the block types); 0 for an unknown id.
func (t GGMLType) BlockSize() int { return ggmlTraits[t].block }

// TypeSize is the number of bytes one block of the type takes; 0 for an unknown id.
func (t GGMLType) TypeSize() int { return ggmlTraits[t].size }

// RowBytes is the size in bytes of a row of k elements (ggml_row_size), or an error when the
// type is unknown or its block size does not divide k.
func (t GGMLType) RowBytes(k int) (int, error) {
	tr, ok := ggmlTraits[t]
	if !ok {
		return 0, fmt.Errorf("%w: GGUF tensor type %v", ErrUnsupported, t)
	}
	if k%tr.block != 0 {
		return 0, fmt.Errorf("%w: a row of %d elements is not a whole number of %v blocks of %d", ErrShape, k, t, tr.block)
	}
	return k / tr.block * tr.size, nil
}

// GGMLBlocks is a GGML weight [N, K] in one of GGMLBlockTypes, kept as the GGUF file stores it
// (a view of the mapped file): row n is the K/BlockSize blocks of TypeSize bytes at
// Data[n*RowBytes(K):], each block's layout ggml's block_<type> struct (little-endian), its
// elements dequantized as ggml's dequantize_row_<type> does (docs/FORMATS.md, section GGUF).
// A 3-D GGUF tensor of stacked experts is E such matrices, one view each.
type GGMLBlocks struct {
	Type GGMLType
	Data []byte // [N, RowBytes(K)]
}

// NewMatrixGGML wraps b (not copied) as a GGML Matrix [n, k]. Errors wrap ErrShape,
// ErrUnsupported or ErrInvalidArgument (Validate).
func NewMatrixGGML(n, k int, b *GGMLBlocks) (*Matrix, error) {
	m := &Matrix{N: n, K: k, DType: GGML, GG: b}
	return m, m.Validate("NewMatrixGGML")
}

func (b *GGMLBlocks) validate(op string, N, K int) error {
	if b == nil {
		return fmt.Errorf("%s: %w: GGML weight [%d, %d] without its blocks", op, ErrInvalidArgument, N, K)
	}
	if !slices.Contains(GGMLBlockTypes, b.Type) {
		return fmt.Errorf("%s: %w: GGML weight [%d, %d] of type %v (want one of %v)", op, ErrUnsupported, N, K, b.Type, GGMLBlockTypes)
	}
	row, err := b.Type.RowBytes(K)
	if err != nil {
		return fmt.Errorf("%s: weight [%d, %d]: %w", op, N, K, err)
	}
	if len(b.Data) != N*row {
		return fmt.Errorf("%s: %w: %v weight [%d, %d] has %d bytes, want %d", op, ErrShape, b.Type, N, K, len(b.Data), N*row)
	}
	return nil
}

func (b *GGMLBlocks) bytes() int64 {
	if b == nil {
		return 0
	}
	return int64(len(b.Data))
}
