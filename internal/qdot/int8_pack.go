package qdot

import (
	"fmt"
	"math"
	"sync"
)

// The assembly int8 kernels multiply a tile of R activation rows by a packed panel of 32 weight
// columns. A panel holds, for each word-row (4 elements of every column: a dword lane per
// column), 32 little-endian uint32 words, one per column:
//
//   - nibble form (4-bit MLX): word j of a column is the column's code word j as stored (codes
//     8j..8j+7); the kernel takes its low nibbles (elements 8j+0, 2, 4, 6) and its high nibbles
//     (8j+1, 3, 5, 7) as two word-rows, matching the activations' octet order;
//   - byte form (every other weight): one code per byte, each 8 elements as two words in octet
//     order (elements 0 2 4 6, then 1 3 5 7), XORed with 0x80808080 where the kernel's
//     storage recentres them (i8plan).
//
// After the codes come the group scales and biases as float32, [groups][2][32] (scales, then
// biases). The tile's side table holds, per activation block, the 8-row vectors of the block
// scales and of the integer corrections off * sum(q_x) (i8plan.off), and per group the 8-row
// vector of xb (bias sums).

// i8args is the argument block of the assembly kernels (offsets used by the .s files).
type i8args struct {
	w      *uint32  // 0: the panel's first word (+16 words for a kernel's second half)
	x      *int8    // 8: the tile's first activation row
	ldx    int      // 16: bytes between activation rows (K)
	xsc    *uint32  // 24: the tile's block table [blocks][16]: 8 scales, 8 corrections
	xb     *float32 // 32: the tile's bias sums [groups][8]
	wsb    *float32 // 40: the panel's scales and biases [groups][2][32] (+16 for a second half)
	out    *float32 // 48: result tile [R][32] (+16 for a second half)
	nchunk int      // 56: activation blocks per group
	cwords int      // 64: word-rows per activation block (Block/8 nibble words, Block/4 byte words)
	ngroup int      // 72: groups in K
	flags  int      // 80: flagCorr | flagBias
}

const (
	flagCorr = 1 // add the corrections of the block table to the integer sums
	flagBias = 2 // add b_g * xb_g after each group
)

// i8plan is how a kernel stores a weight: the panel form, the XOR applied to its byte codes,
// the integer correction off (the kernel's sum over stored codes plus off * sum(q_x) is the
// sum over the true codes), and the kernel (its tile rows, whether it handles 16 or 32
// columns).
type i8plan struct {
	nibbles bool
	xor     uint32
	off     int32
	fn      func(*i8args)
	rows    int
	half    bool // the kernel does 16 columns: two calls per panel
}

// i8packer packs panels of one weight for one plan.
type i8packer struct {
	src  *i8src
	plan i8plan
	q    []int32
	s, b []float32
}

// pack writes the panel of columns [c0, c0+32) (columns past N zero) into words and wsb.
func (p *i8packer) pack(words []uint32, wsb []float32, c0 int) {
	K, G := p.src.K, p.src.group
	ng := K / G
	wr := K / 4 // word-rows of the byte form
	if p.plan.nibbles {
		wr = K / 8
	}
	clear(words[:wr*panelCols])
	clear(wsb[:ng*2*panelCols])
	p.q = grow(p.q, K)
	p.s, p.b = grow(p.s, ng), grow(p.b, ng)
	for col := 0; col < panelCols && c0+col < p.src.N; col++ {
		n := c0 + col
		switch {
		case p.plan.nibbles:
			for j, v := range p.src.words(n) {
				words[j*panelCols+col] = v
			}
			p.src.row(n, nil, p.s, p.b)
		case p.src.wide && p.src.words != nil:
			// 8-bit MLX: bytes of word pairs into octet order without unpacking.
			row := p.src.words(n)
			for j := 0; j < len(row); j += 2 {
				w0, w1 := row[j], row[j+1]
				words[j*panelCols+col] = (even16(w0) | even16(w1)<<16) ^ p.plan.xor
				words[(j+1)*panelCols+col] = (even16(w0>>8) | even16(w1>>8)<<16) ^ p.plan.xor
			}
			p.src.row(n, nil, p.s, p.b)
		default:
			p.src.row(n, p.q, p.s, p.b)
			for k := 0; k < K; k += 8 {
				q := p.q[k : k+8 : k+8]
				lo := uint32(uint8(q[0])) | uint32(uint8(q[2]))<<8 | uint32(uint8(q[4]))<<16 | uint32(uint8(q[6]))<<24
				hi := uint32(uint8(q[1])) | uint32(uint8(q[3]))<<8 | uint32(uint8(q[5]))<<16 | uint32(uint8(q[7]))<<24
				words[(k/4)*panelCols+col] = lo ^ p.plan.xor
				words[(k/4+1)*panelCols+col] = hi ^ p.plan.xor
			}
		}
		for g := 0; g < ng; g++ {
			wsb[g*2*panelCols+col] = p.s[g]
			if p.src.bias {
				wsb[g*2*panelCols+panelCols+col] = p.b[g]
			}
		}
	}
}

// even16 is bytes 0 and 2 of w as a 16-bit value.
func even16(w uint32) uint32 { return w&0xff | w>>8&0xff00 }

// i8Scratch is one call's packed panel, side tables and result tile.
type i8Scratch struct {
	words []uint32
	wsb   []float32
	xsc   []uint32
	xb    []float32
	xbt   []float32
	out   [8 * panelCols]float32
}

var i8ScratchPool = sync.Pool{New: func() any { return new(i8Scratch) }}

// int8Asm runs an assembly kernel over columns [n0, n1): the side tables once, then panel by
// panel, every row tile.
func int8Asm(y []float32, ldy int, a *Int8Act, src *i8src, n0, n1 int, k Kernel) {
	plan := planInt8(k, src, a.Block) // a packed weight's panels have this plan's storage
	sc := i8ScratchPool.Get().(*i8Scratch)
	defer i8ScratchPool.Put(sc)
	K, G, B, R := src.K, src.group, a.Block, plan.rows
	nb, ng := K/B, K/G
	tiles := ceilDiv(a.T, R)
	// Block tables: per tile, per block, 8 scales then 8 corrections.
	sc.xsc = grow(sc.xsc, tiles*nb*16)
	clear(sc.xsc)
	for t := 0; t < a.T; t++ {
		i, r := t/R, t%R
		for c := 0; c < nb; c++ {
			e := sc.xsc[(i*nb+c)*16:]
			e[r] = math.Float32bits(a.scale[t*nb+c])
			e[8+r] = uint32(plan.off * a.sum[t*nb+c])
		}
	}
	flags := 0
	if plan.off != 0 {
		flags |= flagCorr
	}
	if src.bias {
		flags |= flagBias
		sc.xb = xbSums(sc.xb, a, G)
		sc.xbt = grow(sc.xbt, tiles*ng*8)
		clear(sc.xbt)
		for t := 0; t < a.T; t++ {
			for g := 0; g < ng; g++ {
				sc.xbt[(t/R*ng+g)*8+t%R] = sc.xb[t*ng+g]
			}
		}
	}
	wr := K / 4
	cwords := B / 4
	if plan.nibbles {
		wr, cwords = K/8, B/8
	}
	sc.words = grow(sc.words, wr*panelCols)
	sc.wsb = grow(sc.wsb, ng*2*panelCols)
	pk := i8packer{src: src, plan: plan}
	args := i8args{ldx: K, nchunk: G / B, cwords: cwords, ngroup: ng, flags: flags}
	words, wsb := sc.words, sc.wsb
	for c0 := n0; c0 < n1; c0 += panelCols {
		if pw := src.packed; pw != nil {
			p := c0 / panelCols
			words, wsb = pw.words[p*wr*panelCols:(p+1)*wr*panelCols], pw.wsb[p*ng*2*panelCols:(p+1)*ng*2*panelCols]
		} else {
			pk.pack(words, wsb, c0)
		}
		cols := min(panelCols, n1-c0)
		for i := 0; i < tiles; i++ {
			args.x = &a.q[i*R*K]
			args.xsc = &sc.xsc[i*nb*16]
			if src.bias {
				args.xb = &sc.xbt[i*ng*8]
			}
			for h := 0; h < 2; h++ {
				if h == 1 && (!plan.half || cols <= 16) {
					break
				}
				args.w, args.wsb, args.out = &words[16*h], &wsb[16*h], &sc.out[16*h]
				plan.fn(&args)
			}
			rows := min(R, a.T-i*R)
			for r := 0; r < rows; r++ {
				copy(y[(i*R+r)*ldy+c0-n0:(i*R+r)*ldy+c0-n0+cols], sc.out[r*panelCols:r*panelCols+cols])
			}
		}
	}
}

// Int8Packed is a weight packed once for one int8 kernel: its panels as that kernel reads them,
// so that products with few rows (an expert's share of a prefill) do not repack the weight on
// every call, and an FP8 weight is mapped to int8 once. It takes about the memory of the codes
// it came from (4-bit: the code words transposed; 8-bit and FP8: one byte per element) plus
// two float32 per group and 32 columns. The products are bitwise those of the weight it was
// packed from.
type Int8Packed struct {
	src   *i8src // the weight's description; packed points back here
	plan  i8plan
	k     Kernel
	words []uint32 // [panels][word-rows][32]
	wsb   []float32
}

// PackInt8 packs w for kernel k (a kernel of Int8Kernels other than Go, which reads the
// weight as it is). MatMulInt8 then takes the result with that kernel only, and column ranges
// that start on a multiple of 32. Errors wrap ErrShape or ErrUnsupported.
func PackInt8(w Int8Weights, k Kernel) (*Int8Packed, error) {
	if err := checkKernel("int8", k, int8Kernels); err != nil {
		return nil, err
	}
	if k == Go {
		return nil, fmt.Errorf("%w: PackInt8 for the portable kernel, which reads weights as they are", ErrUnsupported)
	}
	src, err := w.int8Source()
	if err != nil {
		return nil, err
	}
	plan := planInt8(k, src, 0)
	wr := src.K / 4
	if plan.nibbles {
		wr = src.K / 8
	}
	ng := src.K / src.group
	panels := ceilDiv(src.N, panelCols)
	p := &Int8Packed{plan: plan, k: k, words: make([]uint32, panels*wr*panelCols), wsb: make([]float32, panels*ng*2*panelCols)}
	// Panels are independent: packed on up to GOMAXPROCS goroutines (a large weight takes
	// seconds on one core).
	parallelRows(panels, 8, func(i0, i1 int) {
		pk := i8packer{src: src, plan: plan}
		for i := i0; i < i1; i++ {
			pk.pack(p.words[i*wr*panelCols:(i+1)*wr*panelCols], p.wsb[i*ng*2*panelCols:(i+1)*ng*2*panelCols], i*panelCols)
		}
	})
	ps := *src
	ps.row, ps.words, ps.packed = nil, nil, p
	p.src = &ps
	return p, nil
}

func (p *Int8Packed) int8Source() (*i8src, error) { return p.src, nil }

// Bytes is the memory of the packed panels: the code words and the per-panel scales (and
// biases) as float32.
func (p *Int8Packed) Bytes() int64 { return 4 * int64(len(p.words)+len(p.wsb)) }
