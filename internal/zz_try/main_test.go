package try

import (
	"encoding/json"
	"testing"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
)

func TestTry(t *testing.T) {
	for _, q := range []map[string]any{
		{"quantization_config": map[string]any{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []int{128, 128}}},
		{"quantization_config": map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4"}},
		{"quantization": map[string]any{"group_size": 64, "bits": 4}},
		{"model_type": "qwen3_5_moe"},
	} {
		m := modelgen.Releases["qwen3.8-flash-next"].Config()
		for k, v := range q {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		_, err := hfconfig.Parse(b)
		t.Log(err)
	}
}
