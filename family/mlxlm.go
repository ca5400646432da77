package family

import (
	"fmt"

	"github.com/stratakernels/strata/internal/hfconfig"
)

// MLXLM is implemented by a family whose models mlx-lm runs with a prompt-cache layout strata
// writes (strata's Session.SaveMLXLMCache): per GDN layer an ArraysCache holding the conv state
// [1, ConvK-1, channels] (the [q | k | v] projection rows before the conv, oldest first) and the
// recurrent state [1, Hv, Dv, Dk], per attention layer a KVCache of keys (after k_norm and RoPE)
// and values [1, Hkv, T, HeadDim], with no other state. A family mlx-lm has no model for does not
// implement it.
type MLXLM interface {
	// MLXLMModel names mlx-lm's model module that runs c (mlx_lm/models/NAME.py).
	MLXLMModel(c *hfconfig.Config) string
}

// MLXLMLayout returns the mlx-lm model module that runs c, after checking that mlx-lm lays out
// c's layers as strata runs them: mlx-lm makes layer i an attention layer iff
// (i+1) % full_attention_interval == 0 and never reads layer_types, so a config whose
// layer_types place the attention layers elsewhere describes another model to mlx-lm. Errors
// wrap hfconfig.ErrUnsupported and name the family, or the first layer that disagrees.
func MLXLMLayout(c *hfconfig.Config) (string, error) {
	f, ok := Of(c).(MLXLM)
	if !ok {
		return "", fmt.Errorf("%w: the %s family (model_type %s) has no mlx-lm model, so no mlx-lm prompt-cache layout is pinned for it",
			hfconfig.ErrUnsupported, c.Family, c.ModelType)
	}
	mod := f.MLXLMModel(c)
	n := c.FullAttentionInterval
	if n <= 0 {
		return "", fmt.Errorf("%w: full_attention_interval %d: mlx-lm's %s places attention layers by (i+1) %% full_attention_interval",
			hfconfig.ErrUnsupported, n, mod)
	}
	for i, t := range c.LayerTypes {
		if attn := (i+1)%n == 0; attn != (t != hfconfig.LinearAttention) {
			return "", fmt.Errorf("%w: layer_types makes layer %d %s, but mlx-lm's %s ignores layer_types and makes it %s ((i+1) %% full_attention_interval %d): mlx-lm would run another model",
				hfconfig.ErrUnsupported, i, t, mod, map[bool]string{true: "an attention layer", false: "a GDN layer"}[attn], n)
		}
	}
	return mod, nil
}
