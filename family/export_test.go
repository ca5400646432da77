package family

import "github.com/stratakernels/strata/internal/hfconfig"

// CheckTensors is checkTensors of the plan of c under l.
func CheckTensors(c *hfconfig.Config, l Layout, shapes map[string][]int64) error {
	p, err := Of(c).Plan(c, l)
	if err != nil {
		return err
	}
	return checkTensors(p, shapes)
}

// ExpectedTensors is the tensor list of the plan of c under l (nil on error).
func ExpectedTensors(c *hfconfig.Config, l Layout) []Spec {
	p, err := Of(c).Plan(c, l)
	if err != nil {
		return nil
	}
	return p.Tensors
}

// DetectNames is DetectLayout from names alone (no shapes, no files).
func DetectNames(c *hfconfig.Config, names []string) (Layout, error) {
	return DetectLayout(c, names, map[string][]int64{}, nil)
}
