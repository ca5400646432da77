package op

import (
	"fmt"
	"math"
)

// AttnParams describes one attention prefill call.
//
//	T     new query tokens, at absolute positions Pos0..Pos0+T-1
//	Hq    query heads; Hkv KV heads; HPG = Hq/Hkv query heads per KV head (query head h reads KV head h/HPG)
//	D     head dim (256 in both real models)
//	Pos0  tokens already in the cache before this call
//	Scale score scale (1/sqrt(D) = 1/16 in the real models)
type AttnParams struct {
	T, Hq, Hkv, D, Pos0 int
	Scale               float32
}

// Selection lists, per query row t, the key positions that row may attend (the QSA indexer's
// output). A row is either dense (Dense[t]: every position 0..pos0+t, no tokens listed, so long
// dense prompts cost no index memory) or sparse: the absolute positions
// Tokens[Offsets[t]:Offsets[t+1]], strictly ascending, each in 0..pos0+t, at least one.
//
// Shapes: Dense [T], Offsets [T+1] with Offsets[0] = 0 and Offsets[T] = len(Tokens). Dense rows
// list no tokens (Offsets[t+1] = Offsets[t]). In the ops of a Pass the layout (T, Dense,
// Offsets) is host bookkeeping (QSALayout) and the tokens live in a device tensor; Tokens is the
// host form the CPU kernels and the op entry points use.
type Selection struct {
	T       int
	Dense   []bool
	Offsets []int32
	Tokens  []int32
}

// checkLayout validates the layout for T query rows against a token count n.
func (s *Selection) checkLayout(op string, T, n int) error {
	if s.T != T || len(s.Dense) != T || len(s.Offsets) != T+1 {
		return fmt.Errorf("%s: selection T=%d len(Dense)=%d len(Offsets)=%d, want T=%d and %d offsets: %w",
			op, s.T, len(s.Dense), len(s.Offsets), T, T+1, ErrInvalidArgument)
	}
	if s.Offsets[0] != 0 || int(s.Offsets[T]) != n {
		return fmt.Errorf("%s: selection offsets run %d..%d, want 0..%d (the token count): %w",
			op, s.Offsets[0], s.Offsets[T], n, ErrInvalidArgument)
	}
	for t := 0; t < T; t++ {
		a, b := s.Offsets[t], s.Offsets[t+1]
		if b < a || int(b) > n {
			return fmt.Errorf("%s: selection offsets of row %d (%d..%d) decrease or exceed %d tokens: %w", op, t, a, b, n, ErrInvalidArgument)
		}
		if s.Dense[t] && b != a {
			return fmt.Errorf("%s: dense selection row %d lists %d tokens: %w", op, t, b-a, ErrInvalidArgument)
		}
		if !s.Dense[t] && b == a {
			return fmt.Errorf("%s: sparse selection row %d lists no tokens: %w", op, t, ErrInvalidArgument)
		}
	}
	return nil
}

// CheckTokens validates a host selection's tokens against its layout for T query rows at
// positions pos0..pos0+T-1: every sparse row strictly ascending within 0..pos0+t. Ops inside a
// Pass check only the layout (their tokens come from QSAIndex on the device); the op entry
// points that take a caller's selection check its tokens with this too.
// Errors wrap ErrInvalidArgument.
func (s *Selection) CheckTokens(op string, T, pos0 int, tokens []int32) error {
	if err := s.checkLayout(op, T, len(tokens)); err != nil {
		return err
	}
	for t := 0; t < T; t++ {
		if s.Dense[t] {
			continue
		}
		limit := int64(pos0 + t)
		prev := int64(-1)
		for _, tok := range tokens[s.Offsets[t]:s.Offsets[t+1]] {
			if int64(tok) <= prev || int64(tok) > limit {
				return fmt.Errorf("%s: selection row %d (position %d): token %d after %d is not ascending within 0..%d: %w",
					op, t, limit, tok, prev, limit, ErrInvalidArgument)
			}
			prev = int64(tok)
		}
	}
	return nil
}

// HeadMap says which qk head a value head reads when Hv > Hk (r = Hv/Hk value heads per qk head).
type HeadMap int

const (
	// Grouped: value head h reads qk head h / r (transformers' repeat_interleave order).
	Grouped HeadMap = iota
	// Tiled: value head h reads qk head h % Hk (the order of GGUF conversions).
	Tiled
)

// ScanMode selects the algorithm of GDNScan. Both compute the same recurrence; they differ only
// in float32 rounding (agreement about 1e-6 relative to max |o|).
type ScanMode int

const (
	// ScanAuto is the backend's default: Chunked on the CPU, the recurrent gdn_scan kernel on
	// Metal (whose chunked kernel is chosen with Prefer). Kernel reports name what ran.
	ScanAuto ScanMode = iota
	// Chunked is the WY / UT-transform form over chunks of GDNChunk tokens: small dense
	// matrix products on [C, dk], [dk, dv] and [C, C] blocks.
	Chunked
	// Recurrent applies the recurrence token by token (two passes over the state per token).
	Recurrent
)

// GDNChunk is the chunk length C of the Chunked scan.
const GDNChunk = 64

// GateAct is the activation of the output gate in GDNPost.
type GateAct int

const (
	// ActSilu: act(z) = z * sigmoid(z) (Qwen3-Next).
	ActSilu GateAct = iota
	// ActSigmoid: act(z) = sigmoid(z) (Qwen3.8-Flash-Next, output_gate_type "sigmoid").
	ActSigmoid
)

// GDNParams are the sizes of one Gated DeltaNet call.
//
//	T new tokens; Hk qk heads of size Dk; Hv value heads of size Dv (Hv a multiple of Hk);
//	ConvK the short-conv kernel size (gdn_pre only); Map the value-to-qk head mapping.
type GDNParams struct {
	T, Hk, Hv, Dk, Dv, ConvK int
	Map                      HeadMap
}

// Channels is the channel count of the conv input: [q Hk*Dk | k Hk*Dk | v Hv*Dv].
func (p GDNParams) Channels() int { return 2*p.Hk*p.Dk + p.Hv*p.Dv }

// ValueHead returns the m-th value head (m < Hv/Hk) that reads qk head j.
func (p GDNParams) ValueHead(j, m int) int {
	if p.Map == Tiled {
		return m*p.Hk + j
	}
	return j*(p.Hv/p.Hk) + m
}

func (p GDNParams) check(op string) error {
	if p.T <= 0 || p.Hk <= 0 || p.Hv <= 0 || p.Dk <= 0 || p.Dv <= 0 {
		return fmt.Errorf("%s: T=%d Hk=%d Hv=%d Dk=%d Dv=%d must be positive: %w",
			op, p.T, p.Hk, p.Hv, p.Dk, p.Dv, ErrShape)
	}
	if p.Hv%p.Hk != 0 {
		return fmt.Errorf("%s: Hv=%d is not a multiple of Hk=%d: %w", op, p.Hv, p.Hk, ErrInvalidArgument)
	}
	if p.Map != Grouped && p.Map != Tiled {
		return fmt.Errorf("%s: unknown head map %d: %w", op, int(p.Map), ErrInvalidArgument)
	}
	return nil
}

// IndexerParams describes one QSA indexer call (qwen4_exp's query-sparse attention).
//
//	T, Pos0  new query tokens at absolute positions Pos0..Pos0+T-1
//	NHeads   index heads (4); Dim index head dim (128)
//	Ratio    compress ratio: block b holds tokens Ratio*b..Ratio*b+Ratio-1 (4)
//	Budget   token budget (2048): a row keeps Budget/Ratio blocks plus its tail
//	Rot      rotary dims of the block keys (64); Theta the RoPE base (1e7)
//	Eps      epsilon of the k_layernorm RMSNorm1p (1e-6)
type IndexerParams struct {
	T, Pos0, NHeads, Dim, Ratio, Budget, Rot int
	Theta                                    float64
	Eps                                      float32
}

// Check validates the parameters. Errors wrap ErrShape or ErrInvalidArgument.
func (p IndexerParams) Check(op string) error {
	if p.T <= 0 || p.NHeads <= 0 || p.Dim <= 0 || p.Ratio <= 0 {
		return fmt.Errorf("%s: T=%d NHeads=%d Dim=%d Ratio=%d must be positive: %w", op, p.T, p.NHeads, p.Dim, p.Ratio, ErrShape)
	}
	const lim = 1 << 30
	if p.T > lim || p.NHeads > lim || p.Dim > lim || p.Pos0 > lim || p.Budget > lim ||
		float64(p.Pos0+p.T)*float64(max(p.NHeads, 1))*float64(p.Dim) > 1<<40 {
		return fmt.Errorf("%s: sizes T=%d pos0=%d NHeads=%d Dim=%d Budget=%d too large: %w", op, p.T, p.Pos0, p.NHeads, p.Dim, p.Budget, ErrShape)
	}
	if p.Pos0 < 0 {
		return fmt.Errorf("%s: pos0=%d is negative: %w", op, p.Pos0, ErrInvalidArgument)
	}
	if p.Budget < p.Ratio {
		return fmt.Errorf("%s: budget %d below one block of %d tokens: %w", op, p.Budget, p.Ratio, ErrInvalidArgument)
	}
	if p.Rot < 0 || p.Rot%2 != 0 || p.Rot > p.Dim {
		return fmt.Errorf("%s: rotary dim %d must be even and within 0..%d: %w", op, p.Rot, p.Dim, ErrInvalidArgument)
	}
	if !(p.Theta > 0) || math.IsInf(p.Theta, 1) {
		return fmt.Errorf("%s: theta %v must be finite and positive: %w", op, p.Theta, ErrInvalidArgument)
	}
	return checkEps(op, p.Eps)
}
