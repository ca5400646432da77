package qdot

import "math"

// fma32 is the float32 fused multiply-add a*b + c rounded once to nearest even, as VFMADD and
// FMLA compute it. float32(math.FMA(a, b, c)) would round twice (to float64, then to float32)
// and can miss when the float64 sum lands exactly halfway between two float32 values; the sum
// a*b + c is therefore split into its float64 rounding s and the exact error e (a*b is exact in
// float64, and TwoSum recovers e), and e decides such a tie.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24 + 24 significant bits
	cc := float64(c)
	s := p + cc
	r := float32(s)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	// TwoSum (Knuth): p + cc = s + e exactly.
	bb := s - p
	e := (p - (s - bb)) + (cc - bb)
	if e == 0 {
		return r
	}
	r64 := float64(r)
	if r64 == s {
		// s is a float32 value and |e| is below half of its float64 ulp: s is the rounding.
		return r
	}
	// The float32 neighbour of r on s's side; s is a tie between them when it is their midpoint.
	other := math.Nextafter32(r, float32(math.Inf(1)))
	if s < r64 {
		other = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (r64+float64(other))/2 != s {
		return r // no tie: the float64 rounding did not cross a float32 midpoint
	}
	// A tie in float64 that the exact sum breaks: towards other when e points past s towards it.
	if (float64(other) > s) == (e > 0) {
		return other
	}
	return r
}
