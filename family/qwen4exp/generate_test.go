package qwen4exp_test

import (
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

// TestGenerateText: the main job's default model (qwen4exp-small, model_type qwen4_exp_text: the
// text model at the top level, prefix model.), reduced to a few megabytes, generates a checkpoint
// that passes the config and tensor checks of a real one, its experts fused and its n-gram table
// whole.
func TestGenerateText(t *testing.T) {
	s := modelgen.Presets["qwen4exp-small"]
	s.D, s.Layers, s.Vocab, s.Experts, s.MoEI, s.SharedI, s.HCRank = 64, 4, 300, 6, 16, 16, 8
	s.Hk, s.Hv, s.Dk, s.Dv, s.HeadDim = 1, 2, 32, 32, 64
	s.PLEEmbedDim, s.TopK = 32, 4
	dir := t.TempDir()
	if err := modelgen.Generate(dir, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	res, err := family.CheckCheckpoint(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	if l := res.Plan.Layout; cfg.ModelType != "qwen4_exp_text" || l.Text != "model." || l.Experts != family.Fused || l.NGramParts != 0 {
		t.Fatalf("model_type %s, layout %+v", cfg.ModelType, l)
	}
}
