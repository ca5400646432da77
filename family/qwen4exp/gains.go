package qwen4exp

import (
	"fmt"
	"strings"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
)

// gainsThreshold splits the two conventions by the mean of the stored zero-centred gains: trained
// gains average about 0.15 to 0.22 stored as w and 1.15 to 1.22 stored as 1 + w (mlx-vlm PR #2114,
// measured on the release and on pre-shifted Hub conversions); random test gains 0 and 1.
const gainsThreshold = 0.5

// gainSignal is one signal of how a checkpoint stores its zero-centred gains.
type gainSignal struct {
	shifted bool   // the signal reads the gains as stored 1 + w
	what    string // the signal and its value, for reports
}

func (s gainSignal) reading() string {
	if s.shifted {
		return "1 + w"
	}
	return "w"
}

// detectGains decides how the checkpoint stores the zero-centred gains (every hc_norm, the
// attention q/k norms, the indexer's q/k layernorms, the PLE norms: transformers applies them as
// 1 + w), from every signal it has:
//   - provenance: a Hugging Face layout stores w (transformers saves the parameter); an mlx-vlm
//     conversion may store either (1 + w before mlx-vlm's PR #2032, w since), so it says nothing;
//   - config.json's preshifted_norm_weights (mlx-vlm PR #2114's override), where present;
//   - the stored values: the mean of all the zero-centred gains over their elements (as PR #2114's
//     detector), below gainsThreshold for w, above for 1 + w; the hc_norm mean is reported beside
//     it (a pre-shifted file's is near 1, a correct one's near 0). Values that cannot be read (a
//     truncated header-only file) give no signal.
//
// The signals must agree: a file whose signals disagree is refused, naming each signal and its
// reading, as is an mlx-vlm conversion with no signal at all (strata does not guess: reading one
// convention as the other moves the logits by O(1)). It sets l.ShiftedGains and l.GainsWhy.
// Errors wrap hfconfig.ErrTensors.
func detectGains(f Family, c *hfconfig.Config, l *family.Layout, t family.Table) error {
	var sig []gainSignal
	if !l.MLX {
		sig = append(sig, gainSignal{false, "provenance: a Hugging Face checkpoint (transformers stores the gains as w)"})
	}
	if v := c.NormsPreshifted; v != nil {
		sig = append(sig, gainSignal{*v, fmt.Sprintf("config.json preshifted_norm_weights %v", *v)})
	}
	if s, ok := valueSignal(f, c, *l, t); ok {
		sig = append(sig, s)
	}
	var whys []string
	for _, s := range sig {
		whys = append(whys, fmt.Sprintf("%s (reads %s)", s.what, s.reading()))
	}
	why := strings.Join(whys, "; ")
	if len(sig) == 0 {
		return fmt.Errorf("%w: cannot tell how this mlx-vlm conversion stores its zero-centred norm gains (as w, or as 1 + w as mlx-vlm wrote them before its PR #2032): config.json has no preshifted_norm_weights and the gains' values cannot be read", hfconfig.ErrTensors)
	}
	for _, s := range sig[1:] {
		if s.shifted != sig[0].shifted {
			return fmt.Errorf("%w: the checkpoint's signals disagree on how its zero-centred norm gains are stored (as w or as 1 + w; reading one as the other moves the logits by O(1)): %s", hfconfig.ErrTensors, why)
		}
	}
	l.ShiftedGains = sig[0].shifted
	l.GainsWhy = fmt.Sprintf("stored as %s: %s", sig[0].reading(), why)
	return nil
}

// valueSignal reads the zero-centred gains of the plan of c under l (the specs drawn as
// family.InitGain0) and returns the signal of their mean, false when there is none (no values,
// or one cannot be read).
func valueSignal(f Family, c *hfconfig.Config, l family.Layout, t family.Table) (gainSignal, bool) {
	if t.Values == nil {
		return gainSignal{}, false
	}
	p, err := f.Plan(c, l)
	if err != nil {
		return gainSignal{}, false
	}
	var sum, hcSum float64
	var n, hcN, tensors, hcTensors int
	for _, s := range p.Tensors {
		if s.Init != family.InitGain0 {
			continue
		}
		if _, ok := t.Shapes[s.Name]; !ok {
			continue // missing: the tensor check names it
		}
		v, err := t.Values(s.Name)
		if err != nil {
			return gainSignal{}, false
		}
		hc := strings.HasSuffix(s.Name, "hc_norm.weight")
		for _, x := range v {
			sum += float64(x)
			if hc {
				hcSum += float64(x)
			}
		}
		n += len(v)
		tensors++
		if hc {
			hcN += len(v)
			hcTensors++
		}
	}
	if n == 0 {
		return gainSignal{}, false
	}
	mean := sum / float64(n)
	what := fmt.Sprintf("stored values: the zero-centred gains' mean is %.3f over %d tensors", mean, tensors)
	if hcN > 0 {
		what += fmt.Sprintf(" (hc_norm %.3f over %d)", hcSum/float64(hcN), hcTensors)
	}
	what += fmt.Sprintf("; w gives about 0.2, 1 + w about 1.2, split at %.1f", gainsThreshold)
	return gainSignal{mean >= gainsThreshold, what}, true
}
