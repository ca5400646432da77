package tokenizer

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// byteRune[b] is the character that byte b is written as in byte-level BPE vocabularies
// (GPT-2's bytes_to_unicode): the printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for
// themselves, the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
var byteRune, runeByte = func() (f [256]rune, r map[rune]byte) {
	r = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			f[b] = rune(b)
		} else {
			f[b] = 256 + n
			n++
		}
		r[f[b]] = byte(b)
	}
	return f, r
}()

// byteLevelDecode is the ByteLevel decoder on one token: the bytes its characters stand for,
// or the token's own UTF-8 bytes when a character is outside the byte-level alphabet (as
// tokenizers does for added tokens such as ones containing a space).
func byteLevelDecode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// merge is what a pair of adjacent tokens becomes: the merged token, at the pair's rank (its
// index in model.merges; lower merges first).
type merge struct{ rank, id int32 }

type bpe struct {
	vocab  map[string]int32 // byte-level token text -> id
	maxID  int32
	byteID [256]int32       // the single-byte tokens
	merges map[uint64]merge // pairKey(left, right) -> merge
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newBPE checks the vocabulary (ids unique and in int32, a token for every byte) and the merges
// (both sides and the result in the vocabulary; mergesKey names their list in errors). A pair
// listed twice takes its last rank, as tokenizers' merge map does.
func newBPE(vocab map[string]int64, merges [][2]string, mergesKey string) (*bpe, error) {
	b := &bpe{vocab: make(map[string]int32, len(vocab)), merges: make(map[uint64]merge, len(merges)), maxID: -1}
	seen := make(map[int32]string, len(vocab))
	for tok, id := range vocab {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("%w: vocab token %q has id %d outside [0, 2^31)", ErrFormat, tok, id)
		}
		if other, dup := seen[int32(id)]; dup {
			return nil, fmt.Errorf("%w: vocab tokens %q and %q share id %d", ErrFormat, other, tok, id)
		}
		seen[int32(id)] = tok
		b.vocab[tok] = int32(id)
		b.maxID = max(b.maxID, int32(id))
	}
	for c := 0; c < 256; c++ {
		id, ok := b.vocab[string(byteRune[c])]
		if !ok {
			return nil, fmt.Errorf("%w: vocab has no token for byte 0x%02x (%q): not a byte-level BPE vocabulary",
				ErrUnsupported, c, string(byteRune[c]))
		}
		b.byteID[c] = id
	}
	if len(merges) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d merges", ErrFormat, len(merges))
	}
	for i, m := range merges {
		var ids [3]int32
		for j, tok := range [3]string{m[0], m[1], m[0] + m[1]} {
			id, ok := b.vocab[tok]
			if !ok {
				return nil, fmt.Errorf("%w: %s[%d] (%q %q): token %q not in the vocabulary", ErrFormat, mergesKey, i, m[0], m[1], tok)
			}
			ids[j] = id
		}
		b.merges[pairKey(ids[0], ids[1])] = merge{rank: int32(i), id: ids[2]}
	}
	return b, nil
}

func (b *bpe) size() int { return int(b.maxID) + 1 }

// symbol is one token of a piece during merging: a doubly linked list over the piece's bytes.
// n == 0 marks a symbol merged into its left neighbour.
type symbol struct {
	id         int32
	prev, next int32 // indices; -1 at the ends
	n          int32 // bytes covered
}

// candidate is a merge waiting in the queue: the pair starting at symbol pos, to become id.
type candidate struct{ pos, rank, id int32 }

type queue []candidate

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *queue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// bpeScratch holds the buffers of one Encode call, reused across its pieces.
type bpeScratch struct {
	syms []symbol
	q    queue
}

// encode appends the ids of one pre-tokenized piece. The merge loop is tokenizers' (Word::
// merge_all): every adjacent pair with a merge is queued by (rank, position); the lowest is
// taken; an entry whose pair has changed since it was queued (its left symbol merged away, or
// the pair no longer merging to the queued token) is dropped; after a merge, the pairs the new
// symbol forms with its neighbours are queued.
func (b *bpe) encode(ids []int32, piece string, s *bpeScratch) []int32 {
	switch len(piece) {
	case 0:
		return ids
	case 1:
		return append(ids, b.byteID[piece[0]])
	}
	syms := s.syms[:0]
	for i := 0; i < len(piece); i++ {
		syms = append(syms, symbol{id: b.byteID[piece[i]], prev: int32(i) - 1, next: int32(i) + 1, n: 1})
	}
	syms[len(syms)-1].next = -1
	q := s.q[:0]
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := b.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q = append(q, candidate{pos: int32(i), rank: m.rank, id: m.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(candidate)
		cur := &syms[top.pos]
		if cur.n == 0 || cur.next < 0 {
			continue
		}
		right := syms[cur.next]
		if m, ok := b.merges[pairKey(cur.id, right.id)]; !ok || m.id != top.id {
			continue
		}
		cur.id = top.id
		cur.n += right.n
		syms[cur.next].n = 0
		cur.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if m, ok := b.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				heap.Push(&q, candidate{pos: cur.prev, rank: m.rank, id: m.id})
			}
		}
		if cur.next >= 0 {
			if m, ok := b.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				heap.Push(&q, candidate{pos: top.pos, rank: m.rank, id: m.id})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	s.syms, s.q = syms, q
	return ids
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal prefix of a valid UTF-8 sequence
// that is cut short (or a byte that starts none) becomes one U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		i += invalidPrefix(b[i:])
		sb.WriteRune(utf8.RuneError)
	}
	return sb.String()
}

// invalidPrefix is the length (1 to 3) of the invalid sequence at the start of b: the bytes
// that still form the beginning of a well-formed UTF-8 sequence (Unicode Table 3-7), at least
// the first.
func invalidPrefix(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF) // the range of the second byte
	var width int
	switch c := b[0]; {
	case 0xC2 <= c && c <= 0xDF:
		width = 2
	case c == 0xE0:
		width, lo = 3, 0xA0
	case c == 0xED:
		width, hi = 3, 0x9F
	case 0xE1 <= c && c <= 0xEF:
		width = 3
	case c == 0xF0:
		width, lo = 4, 0x90
	case c == 0xF4:
		width, hi = 4, 0x8F
	case 0xF1 <= c && c <= 0xF3:
		width = 4
	default:
		return 1
	}
	n := 1
	for ; n < width && n < len(b); n++ {
		if c := b[n]; c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
