package qdot

import (
	"math"
	"sync"
	"unsafe"
)

// The assembly int8 kernels multiply a tile of R activation rows by a packed panel of 32 weight
// columns. A panel holds, for each word-row (4 elements of every column: a dword lane per
// column), 32 little-endian uint32 words, one per column:
//
//   - nibble form (4-bit MLX, and Int8Rows with Nibbles): word j of a column is the column's
//     code word j as stored (codes 8j..8j+7); the kernel takes its low nibbles (elements 8j+0,
//     2, 4, 6) and its high nibbles (8j+1, 3, 5, 7) as two word-rows, matching the activations'
//     octet order, and corrects the sums by i8plan.off (Int8Rows.NibbleOff);
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
	ldo    int      // 88: bytes between result rows (i8plan.strided kernels; the others 128)
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
	// strided: the kernel stores its result rows ldo bytes apart (and only stores them), so a
	// whole tile goes straight into y.
	strided bool
}

// i8packer packs panels of one weight for one plan.
type i8packer struct {
	src  *i8src
	plan i8plan
	q    []int32
	s, b []float32
	rows []uint32 // byte form from src.row: the panel's columns in octet order, [32][wr]
	// sc, bc are the panel's columns' group scales and biases ([32][groups]) from src.codes
	// or src.nibRow, t their transpose.
	sc, bc []float32
	t      []uint32
}

// wordRows is the panel's word-rows: K/8 in the nibble form, K/4 in the byte form.
func (p *i8packer) wordRows() int {
	if p.plan.nibbles {
		return p.src.K / 8
	}
	return p.src.K / 4
}

// pack writes the panel of columns [c0, c0+32) (columns past N zero) into words and wsb. MLX
// 4-bit and 8-bit code words are transposed straight from the weight (transposeCols, wr words a
// row as stored); FP8 codes are mapped row by row into the columns' byte words (FP8.octetRow),
// other weights decoded row by row (src.row) into them, and then transposed.
func (p *i8packer) pack(words []uint32, wsb []float32, c0 int) {
	K, G := p.src.K, p.src.group
	ng := K / G
	wr := p.wordRows()
	cols := min(panelCols, p.src.N-c0)
	if cols < panelCols || p.src.codes == nil {
		// (The rows of codes write every scale, and every bias the kernel reads.)
		clear(wsb[:ng*2*panelCols])
	}
	p.s, p.b = grow(p.s, ng), grow(p.b, ng)
	if w := p.src.aff; w != nil {
		// 4-bit: the words as stored; 8-bit: each pair of words' bytes into octet order.
		transposeCols(words, w.Codes[c0*wr:(c0+cols)*wr], wr, wr, cols, w.Bits == 8, p.plan.xor)
		w.panelScales(wsb, c0, cols)
		return
	}
	p.rows = grow(p.rows, panelCols*wr)
	if p.src.nibRow != nil || p.src.codes != nil {
		// Codes as bytes in natural order (wr words a column), transposed into octet order, or
		// 4-bit codes in MLX's words, transposed as they are; the columns' scales and biases
		// ([cols][ng]) transposed the same way into the panel's [groups][2][32].
		p.sc, p.bc = grow(p.sc, panelCols*ng), grow(p.bc, panelCols*ng)
		for col := 0; col < cols; col++ {
			row := p.rows[col*wr : (col+1)*wr]
			s, b := p.sc[col*ng:(col+1)*ng], p.bc[col*ng:(col+1)*ng]
			if p.plan.nibbles {
				p.src.nibRow(c0+col, unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), 4*wr), s, b)
			} else {
				p.src.codes(c0+col, unsafe.Slice((*int8)(unsafe.Pointer(&row[0])), 4*wr), s, b)
			}
		}
		transposeCols(words, p.rows[:cols*wr], wr, wr, cols, !p.plan.nibbles, p.plan.xor)
		p.scaleCols(wsb, cols)
		return
	}
	p.q = grow(p.q, K)
	for col := 0; col < cols; col++ {
		row := p.rows[col*wr : (col+1)*wr]
		if f := p.src.fp8; f != nil {
			f.octetRow(c0+col, row, p.s, p.plan.xor)
			for g := 0; g < ng; g++ {
				wsb[g*2*panelCols+col] = p.s[g]
			}
			continue
		}
		p.src.row(c0+col, p.q, p.s, p.b)
		for k := 0; k < K; k += 8 {
			q := p.q[k : k+8 : k+8]
			lo := uint32(uint8(q[0])) | uint32(uint8(q[2]))<<8 | uint32(uint8(q[4]))<<16 | uint32(uint8(q[6]))<<24
			hi := uint32(uint8(q[1])) | uint32(uint8(q[3]))<<8 | uint32(uint8(q[5]))<<16 | uint32(uint8(q[7]))<<24
			row[k/4], row[k/4+1] = lo^p.plan.xor, hi^p.plan.xor
		}
		for g := 0; g < ng; g++ {
			wsb[g*2*panelCols+col] = p.s[g]
			if p.src.bias {
				wsb[g*2*panelCols+panelCols+col] = p.b[g]
			}
		}
	}
	transposeCols(words, p.rows[:cols*wr], wr, wr, cols, false, 0)
}

// scaleCols transposes the group scales and biases of the panel's first cols columns, p.sc and
// p.bc ([cols][groups]), into wsb's [groups][2][32].
func (p *i8packer) scaleCols(wsb []float32, cols int) {
	ng := p.src.K / p.src.group
	p.t = grow(p.t, ng*panelCols)
	for h, v := range [2][]float32{p.sc, p.bc} {
		if h == 1 && !p.src.bias {
			break
		}
		transposeCols(p.t, unsafe.Slice((*uint32)(unsafe.Pointer(&v[0])), cols*ng), ng, ng, cols, false, 0)
		for g := 0; g < ng; g++ {
			copy(wsb[g*2*panelCols+h*panelCols:g*2*panelCols+h*panelCols+panelCols], unsafe.Slice((*float32)(unsafe.Pointer(&p.t[g*panelCols])), panelCols))
		}
	}
}

// packScales writes the scales and biases of the panel of columns [c0, c0+32) of a weight
// whose codes were packed at load (src.panels) into wsb, as pack does.
func (p *i8packer) packScales(wsb []float32, c0 int) {
	ng := p.src.K / p.src.group
	cols := min(panelCols, p.src.N-c0)
	if cols < panelCols {
		clear(wsb[:ng*2*panelCols])
	}
	p.sc, p.bc = grow(p.sc, panelCols*ng), grow(p.bc, panelCols*ng)
	for col := 0; col < cols; col++ {
		p.src.scales(c0+col, p.sc[col*ng:(col+1)*ng], p.bc[col*ng:(col+1)*ng])
	}
	p.scaleCols(wsb, cols)
}

// panelScales writes the scales and biases of rows [c0, c0+cols) of w as float32 into a panel's
// wsb ([groups][2][32]: scales, then biases; the columns from cols on are left as they are).
func (w *Affine) panelScales(wsb []float32, c0, cols int) {
	gpr := w.K / w.Group
	sc, bi := w.Scales[c0*gpr:(c0+cols)*gpr], w.Biases[c0*gpr:(c0+cols)*gpr]
	for g := 0; g < gpr; g++ {
		ds, db := wsb[g*2*panelCols:g*2*panelCols+cols], wsb[g*2*panelCols+panelCols:g*2*panelCols+panelCols+cols]
		if w.F16 {
			for c := range ds {
				ds[c], db[c] = widen16(sc[c*gpr+g], true), widen16(bi[c*gpr+g], true)
			}
			continue
		}
		for c := range ds {
			ds[c] = math.Float32frombits(uint32(sc[c*gpr+g]) << 16)
			db[c] = math.Float32frombits(uint32(bi[c*gpr+g]) << 16)
		}
	}
}

// transposeCols writes words[j*32 + c] = f(src[c*stride + j]) for the cols columns c and the n
// words j of each, and zero for the columns from cols to 32: f is an XOR with xor, after (octet)
// the bytes of each pair of words (j even, j+1) taken into octet order (words j and j+1 of the
// column then hold its bytes 0 2 4 6 and 1 3 5 7; n even). A full panel goes through the
// assembly transpose where the build has one (transposeBulk), the rest in Go.
func transposeCols(words, src []uint32, stride, n, cols int, octet bool, xor uint32) {
	j0 := 0
	if cols == panelCols {
		j0 = transposeBulk(words, src, stride, n, octet, xor)
	} else {
		clear(words[:n*panelCols])
	}
	for c := 0; c < cols; c++ {
		col := src[c*stride : c*stride+n]
		if !octet {
			for j := j0; j < n; j++ {
				words[j*panelCols+c] = col[j] ^ xor
			}
			continue
		}
		for j := j0; j < n; j += 2 {
			w0, w1 := col[j], col[j+1]
			words[j*panelCols+c] = (even16(w0) | even16(w1)<<16) ^ xor
			words[(j+1)*panelCols+c] = (even16(w0>>8) | even16(w1>>8)<<16) ^ xor
		}
	}
}

// even16 is bytes 0 and 2 of w as a 16-bit value.
func even16(w uint32) uint32 { return w&0xff | w>>8&0xff00 }

// blockBytes bounds the codes of the panels int8Asm and bf16Asm pack at once (a block that
// stays in L2; one panel of a long K may exceed it).
const blockBytes = 384 << 10

// i8Scratch is one call's packed panels and result tile.
type i8Scratch struct {
	words []uint32
	wsb   []float32
	pk    i8packer // its buffers reused from call to call
	out   [8 * panelCols]float32
}

// i8Tables are the side tables of an Int8Act for the assembly kernels of one row tile R and
// correction off (i8plan) and, for a weight with biases, its group G (0: no bias table).
type i8Tables struct {
	R   int
	off int32
	G   int
	ok  bool     // made from the current codes
	xsc []uint32 // per row tile, per block: 8 scales (float32 bits), then 8 corrections off * sum
	xb  []float32
	xbt []float32 // per row tile, per group: the 8 rows' xbSums
}

// tables returns the side tables of a for the layout (R, off, G, bias), making them on first
// use after QuantizeInt8; safe on any number of goroutines (the first one makes them while the
// others wait), and read-only once returned.
func (a *Int8Act) tables(R int, off int32, G int, bias bool) (xsc []uint32, xbt []float32) {
	if !bias {
		G = 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var tb *i8Tables
	for i := range a.tabs {
		if t := &a.tabs[i]; t.R == R && t.off == off && t.G == G {
			tb = t
			break
		}
	}
	if tb == nil {
		a.tabs = append(a.tabs, i8Tables{R: R, off: off, G: G})
		tb = &a.tabs[len(a.tabs)-1]
	}
	if !tb.ok {
		tb.make(a)
		tb.ok = true
	}
	return tb.xsc, tb.xbt
}

// make fills the tables from a's scales and sums; the rows of the last tile beyond T are zero.
func (tb *i8Tables) make(a *Int8Act) {
	R, nb := tb.R, a.K/a.Block
	tiles := ceilDiv(a.T, R)
	tb.xsc = grow(tb.xsc, tiles*nb*16)
	clear(tb.xsc)
	for t := 0; t < a.T; t++ {
		i, r := t/R, t%R
		for c := 0; c < nb; c++ {
			e := tb.xsc[(i*nb+c)*16:]
			e[r] = math.Float32bits(a.scale[t*nb+c])
			e[8+r] = uint32(tb.off * a.sum[t*nb+c])
		}
	}
	if tb.G == 0 {
		return
	}
	ng := a.K / tb.G
	tb.xb = xbSums(tb.xb, a, tb.G)
	tb.xbt = grow(tb.xbt, tiles*ng*8)
	clear(tb.xbt)
	for t := 0; t < a.T; t++ {
		for g := 0; g < ng; g++ {
			tb.xbt[(t/R*ng+g)*8+t%R] = tb.xb[t*ng+g]
		}
	}
}

var i8ScratchPool = sync.Pool{New: func() any { return new(i8Scratch) }}

// int8Asm runs an assembly kernel over columns [n0, n1): the side tables once, then panel by
// panel, every row tile.
func int8Asm(y []float32, ldy int, a *Int8Act, src *i8src, n0, n1 int, k Kernel) {
	plan := planInt8(k, src, a.Block)
	sc := i8ScratchPool.Get().(*i8Scratch)
	defer i8ScratchPool.Put(sc)
	K, G, B, R := src.K, src.group, a.Block, plan.rows
	nb, ng := K/B, K/G
	tiles := ceilDiv(a.T, R)
	flags := 0
	if plan.off != 0 {
		flags |= flagCorr
	}
	if src.bias {
		flags |= flagBias
	}
	xsc, xbt := a.tables(plan.rows, plan.off, G, src.bias)
	wr := K / 4
	cwords := B / 4
	if plan.nibbles {
		wr, cwords = K/8, B/8
	}
	// Panels are packed a block at a time (at most blockBytes of codes), and each row tile
	// runs over the whole block: the tile's activations stay in L1 across the block's panels,
	// and the tile's rows of y are written in runs of the block's width.
	bp := max(1, min(ceilDiv(n1-n0, panelCols), blockBytes/(4*wr*panelCols)))
	pw, ps := wr*panelCols, ng*2*panelCols // words and scales of one panel
	packed := src.panels != nil && plan.nibbles && n0%panelCols == 0
	if !packed {
		sc.words = grow(sc.words, bp*pw)
	}
	sc.wsb = grow(sc.wsb, bp*ps)
	pk := &sc.pk
	pk.src, pk.plan = src, plan
	defer func() { pk.src, pk.plan = nil, i8plan{} }()
	args := i8args{ldx: K, nchunk: G / B, cwords: cwords, ngroup: ng, flags: flags}
	words, wsb := sc.words, sc.wsb
	for b0 := n0; b0 < n1; b0 += bp * panelCols {
		np := min(bp, ceilDiv(n1-b0, panelCols))
		for p := range np {
			if packed {
				pk.packScales(wsb[p*ps:(p+1)*ps], b0+p*panelCols)
				continue
			}
			pk.pack(words[p*pw:(p+1)*pw], wsb[p*ps:(p+1)*ps], b0+p*panelCols)
		}
		if packed {
			words = src.panels[b0/panelCols*pw : (b0/panelCols+np)*pw]
		}
		for i := 0; i < tiles; i++ {
			args.x = &a.q[i*R*K]
			args.xsc = &xsc[i*nb*16]
			if src.bias {
				args.xb = &xbt[i*ng*8]
			}
			rows := min(R, a.T-i*R)
			for p := range np {
				c0 := b0 + p*panelCols
				cols := min(panelCols, n1-c0)
				if plan.strided && rows == R && cols == panelCols {
					args.w, args.wsb, args.out, args.ldo = &words[p*pw], &wsb[p*ps], &y[i*R*ldy+c0-n0], 4*ldy
					plan.fn(&args)
					continue
				}
				for h := 0; h < 2; h++ {
					if h == 1 && (!plan.half || cols <= 16) {
						break
					}
					args.w, args.wsb, args.out, args.ldo = &words[p*pw+16*h], &wsb[p*ps+16*h], &sc.out[16*h], 4*panelCols
					plan.fn(&args)
				}
				for r := 0; r < rows; r++ {
					copy(y[(i*R+r)*ldy+c0-n0:(i*R+r)*ldy+c0-n0+cols], sc.out[r*panelCols:r*panelCols+cols])
				}
			}
		}
	}
}
