package op

import (
	"fmt"
	"reflect"
)

var tensorType = reflect.TypeFor[Tensor]()

// Exec runs ops over host memory on be, in one Pass: args are pointers to args structs of this
// package; every Tensor field holding a *Host is replaced by a tensor of be holding a copy of the
// same data (one device tensor per host tensor, so ops that share a host tensor share its device
// copy; a backend whose tensors are host memory, such as the CPU's, uses them in place). run
// then calls the Pass's ops with the structs, the Pass is committed, every such tensor is copied
// back into its host memory (inputs too: they are unchanged) and freed, and the structs get their
// host tensors back. It serves the op entry points (the C ABI, Python, tools); a model runs all
// its ops in one Pass over device tensors instead.
//
// Errors are those of the ops (each checks its arguments before any work) or of the backend;
// host memory is written only when everything succeeded (on a backend without copies the ops
// write it as they run).
func Exec(be Backend, run func(Pass) error, args ...any) (Timing, error) {
	probe, err := be.NewTensor(F32, 0)
	if err != nil {
		return Timing{}, err
	}
	_, inPlace := probe.(*Host)
	be.Free(probe)
	type field struct {
		v    reflect.Value
		host *Host
	}
	var fields []field
	dev := map[*Host]Tensor{}
	defer func() {
		for _, f := range fields {
			f.v.Set(reflect.ValueOf(Tensor(f.host)))
		}
		for _, d := range dev {
			be.Free(d)
		}
	}()
	for _, a := range args {
		v := reflect.ValueOf(a)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return Timing{}, fmt.Errorf("op.Exec: %w: %T is not a pointer to an args struct", ErrInvalidArgument, a)
		}
		if inPlace {
			continue
		}
		v = v.Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Type() != tensorType || f.IsNil() {
				continue
			}
			h, ok := f.Interface().(*Host)
			if !ok || h == nil {
				continue
			}
			d, ok := dev[h]
			if !ok {
				if d, err = be.NewTensor(h.DType(), h.Len()); err != nil {
					return Timing{}, err
				}
				dev[h] = d
				copyTensor(d, h)
			}
			fields = append(fields, field{f, h})
			f.Set(reflect.ValueOf(d))
		}
	}
	w, s := be.NewWeights(WeightOptions{}), be.NewScratch()
	defer w.Release()
	defer s.Release()
	p, err := be.Begin(w, s)
	if err != nil {
		return Timing{}, err
	}
	if err := run(p); err != nil {
		p.Abandon()
		return Timing{}, err
	}
	tm, err := p.Commit()
	if err != nil {
		return Timing{}, err
	}
	for h, d := range dev {
		copyTensor(h, d)
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
