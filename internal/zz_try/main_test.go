package try

import (
	"os"
	"testing"
	"time"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

func TestTry(t *testing.T) {
	dir := "/work/scratch/load/q3n"
	if _, err := os.Stat(dir); err != nil {
		if err := modelgen.WriteHeaderOnly(dir, modelgen.Releases["qwen3-next-80b-a3b"], modelgen.HeaderOnly{}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := hfconfig.Load(dir)
	t0 := time.Now()
	ck, err := safetensors.OpenDirHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	_, err = c.CheckCheckpoint(ck)
	t2 := time.Now()
	t.Logf("open %v check %v %v", t1.Sub(t0), t2.Sub(t1), err)
}
