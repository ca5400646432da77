package family

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/stratakernels/strata/internal/hfconfig"
)

// RandomSource draws the tensors of a plan at random, each as its Spec.Init says (the
// distributions internal/modelgen draws: Linear N(0, 1/in), Embed N(0, 1), Gain0 N(0, 0.1^2),
// Gain1 N(1, 0.1^2), Conv N(0, 0.5^2), ALog log(1 + 15u), DtBias 0.5 + u), rounded to bfloat16
// as a bf16 checkpoint holds them. Each tensor's values depend only on the seed and its name
// (runs of 65536 values from their own PCG stream, drawn in parallel), so a tensor can be drawn
// alone, in any order, at any model size; they are not the values modelgen.Generate draws (one
// stream through the whole checkpoint).
type RandomSource struct {
	specs map[string]Spec
	seed  uint64
}

// NewRandomSource is the random source of plan p's tensors.
func NewRandomSource(p *Plan, seed uint64) *RandomSource {
	r := &RandomSource{specs: map[string]Spec{}, seed: seed}
	for _, s := range p.Tensors {
		r.specs[s.Name] = s
	}
	return r
}

// Float32 draws tensor name. Errors: a name the plan does not hold.
func (r *RandomSource) Float32(name string) ([]float32, error) {
	s, ok := r.specs[name]
	if !ok {
		return nil, fmt.Errorf("%w: the random model has no tensor %q", hfconfig.ErrTensors, name)
	}
	n := int64(1)
	for _, d := range s.Shape {
		n *= d
	}
	in := float64(s.Shape[len(s.Shape)-1])
	h := fnv.New64a()
	h.Write([]byte(name))
	key := h.Sum64()
	const run = 1 << 16
	out := make([]float32, n)
	runs := int((n + run - 1) / run)
	workers := min(runtime.GOMAXPROCS(0), runs)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < runs; k += workers {
				rng := rand.New(rand.NewPCG(r.seed^key, uint64(k)))
				for i := int64(k) * run; i < min(n, int64(k+1)*run); i++ {
					var v float64
					switch s.Init {
					case InitLinear:
						v = rng.NormFloat64() / math.Sqrt(in)
					case InitEmbed:
						v = rng.NormFloat64()
					case InitGain0:
						v = 0.1 * rng.NormFloat64()
					case InitGain1:
						v = 1 + 0.1*rng.NormFloat64()
					case InitConv:
						v = 0.5 * rng.NormFloat64()
					case InitALog:
						v = math.Log(1 + 15*rng.Float64())
					case InitDtBias:
						v = 0.5 + rng.Float64()
					}
					u := math.Float32bits(float32(v))
					u += 0x7fff + (u>>16)&1
					out[i] = math.Float32frombits(u &^ 0xffff)
				}
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// WriteGGUFRandom writes a model of random weights (RandomSource, seed) described by the
// config.json configJSON straight to a GGUF file at path (WriteGGUF with opt), one tensor in
// memory at a time: no checkpoint is written or held, whatever the model's size. The source
// layout is the family's first non-MLX prefix with fused experts (Qwen3.5) or per-expert tensors
// (Qwen3-Next), as their releases store them. Errors: the config's (family.Parse), the plan's,
// WriteGGUF's.
func WriteGGUFRandom(path string, configJSON []byte, seed uint64, opt GGUFWriteOptions) error {
	c, err := Parse(configJSON)
	if err != nil {
		return err
	}
	f := Of(c)
	l := Layout{Experts: Fused}
	for _, pr := range f.Prefixes() {
		if !pr.MLXOnly {
			l.Prefix = pr
			break
		}
	}
	if c.Family == "qwen3_next" {
		l.Experts = PerExpert
	}
	p, err := f.Plan(c, l)
	if err != nil {
		return err
	}
	return WriteGGUF(path, c, l, NewRandomSource(p, seed), opt)
}
