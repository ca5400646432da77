package op

import "math"

// RoPEInvFreq returns inv_freq_j = theta^(-2j/rot) for j < rot/2 in float64: the rotary
// frequencies of partial RoPE (transformers' default rope_init over the first rot dims), which
// every backend and the QSA indexer evaluate angles from (angle = pos * inv_freq_j, in float64).
func RoPEInvFreq(rot int, theta float64) []float64 {
	inv := make([]float64, rot/2)
	for j := range inv {
		inv[j] = math.Pow(theta, -float64(2*j)/float64(rot))
	}
	return inv
}
