package op

import (
	"fmt"
	"reflect"
)

var tensorType = reflect.TypeFor[Tensor]()

// Exec runs one op over host memory on be: every Tensor field of the args struct a that holds a
// *Host is replaced by a tensor of be holding a copy of the same data (a backend whose tensors are
// host memory, such as the CPU's, uses them in place), call runs the op in a Pass of its own with
// those arguments, the Pass is committed, and every such tensor is copied back into its host
// memory (inputs too: they are unchanged) and freed. It serves the op entry points (the C ABI,
// Python, tools); a model runs all its ops in one Pass over device tensors instead.
//
// a must be an args struct of this package (a value, not a pointer). Errors are those of the op
// (it checks its arguments before any work) or of the backend.
func Exec[A any](be Backend, a A, call func(Pass, A) error) (Timing, error) {
	v := reflect.ValueOf(&a).Elem()
	if v.Kind() != reflect.Struct {
		return Timing{}, fmt.Errorf("op.Exec: %w: %T is not an args struct", ErrInvalidArgument, a)
	}
	probe, err := be.NewTensor(F32, 0)
	if err != nil {
		return Timing{}, err
	}
	_, inPlace := probe.(*Host)
	be.Free(probe)
	type pair struct {
		host *Host
		dev  Tensor
	}
	var pairs []pair
	defer func() {
		for _, p := range pairs {
			be.Free(p.dev)
		}
	}()
	if !inPlace {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Type() != tensorType || f.IsNil() {
				continue
			}
			h, ok := f.Interface().(*Host)
			if !ok || h == nil {
				continue
			}
			d, err := be.NewTensor(h.DType(), h.Len())
			if err != nil {
				return Timing{}, err
			}
			pairs = append(pairs, pair{h, d})
			copyTensor(d, h)
			f.Set(reflect.ValueOf(d))
		}
	}
	w, s := be.NewWeights(), be.NewScratch()
	defer w.Release()
	defer s.Release()
	p, err := be.Begin(w, s)
	if err != nil {
		return Timing{}, err
	}
	if err := call(p, a); err != nil {
		p.Abandon()
		return Timing{}, err
	}
	tm, err := p.Commit()
	if err != nil {
		return Timing{}, err
	}
	for _, pr := range pairs {
		copyTensor(pr.host, pr.dev)
	}
	return tm, nil
}

// copyTensor copies src's elements into dst (one dtype, one length) through their host views.
func copyTensor(dst, src Tensor) {
	if src.DType() == I32 {
		copy(dst.I32(), src.I32())
	} else {
		copy(dst.F32(), src.F32())
	}
}
