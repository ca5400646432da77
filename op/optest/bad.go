package optest

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
)

// badCase is one invalid call of an op: mut turns the op's valid arguments into invalid ones,
// which every backend must refuse with an error wrapping want (op.ErrShape, op.ErrDType or
// op.ErrInvalidArgument) before any work.
type badCase[A any] struct {
	name string
	want error
	mut  func(e *env, a *A)
}

// runBad runs an op's bad-argument table as the subtests "bad/valid" (the unmodified arguments
// must run: the table tests the checks, not a broken op) and "bad/<name>": each call must fail
// with its sentinel and leave every tensor of the call as it was.
func runBad[A any](t *testing.T, s *suite, be op.Backend, good func(e *env) A, call func(op.Pass, A) error, cases []badCase[A]) {
	s.run(t, "bad/valid", true, func(t *testing.T) {
		e := newEnv(t, be)
		a := good(e)
		e.pass(func(p op.Pass) error { return call(p, a) })
	})
	for _, c := range cases {
		if s.o.NoValueChecks && strings.HasPrefix(c.name, "value_") {
			continue
		}
		s.run(t, "bad/"+c.name, true, func(t *testing.T) {
			e := newEnv(t, be)
			a := good(e)
			c.mut(e, &a)
			before := snapshot(a)
			p, err := be.Begin(e.w, e.s)
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			err = call(p, a)
			p.Abandon()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, c.want)
			}
			if after := snapshot(a); !before.equal(after) {
				t.Fatalf("the refused call (%v) changed its tensors", err)
			}
		})
	}
}

// tensorState is the bits of every present tensor field of an args struct.
type tensorState [][]uint32

// snapshot records the host views of the tensor fields of args (a struct of an op).
func snapshot(args any) tensorState {
	var st tensorState
	v := reflect.ValueOf(args)
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Interface || f.IsNil() {
			continue
		}
		x, ok := f.Interface().(op.Tensor)
		if !ok || !op.Present(x) {
			continue
		}
		var bits []uint32
		for _, e := range x.F32() {
			bits = append(bits, math.Float32bits(e))
		}
		for _, e := range x.I32() {
			bits = append(bits, uint32(e))
		}
		st = append(st, bits)
	}
	return st
}

func (s tensorState) equal(o tensorState) bool {
	return slices.EqualFunc(s, o, func(a, b []uint32) bool { return slices.Equal(a, b) })
}

// Shorthands of the tables.
var (
	errShape       = op.ErrShape
	errDType       = op.ErrDType
	errArg         = op.ErrInvalidArgument
	errUnsupported = op.ErrUnsupported
	nan32          = float32(math.NaN())
)

// quantWith returns a copy of the QAffine weight m whose Quant mut has changed (m is untouched).
func quantWith(m *op.Matrix, mut func(q *op.Quant)) *op.Matrix {
	q := *m.Q
	mut(&q)
	c := *m
	c.Q = &q
	return &c
}

// shorter returns a new tensor of the dtype of x with n fewer (n < 0: more) elements.
func (e *env) shorter(x op.Tensor, n int) op.Tensor { return e.tensor(x.DType(), x.Len()-n) }

// retyped returns a new tensor of x's length in the other dtype (F32 <-> I32).
func (e *env) retyped(x op.Tensor) op.Tensor {
	if x.DType() == op.I32 {
		return e.tensor(op.F32, x.Len())
	}
	return e.tensor(op.I32, x.Len())
}

// noTensor is an absent tensor argument.
var noTensor op.Tensor
