package gguf

import (
	"fmt"
	"math"
)

func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return v, fmt.Errorf("%w %s is absent from %s", ErrKey, key, f.Path)
	}
	return v, nil
}

func (f *File) wrongType(key string, v Value, want string) error {
	got := v.Type.String()
	if v.Type == Array {
		got = "array of " + v.Elem.String()
	}
	return fmt.Errorf("%w %s in %s is %s, want %s", ErrKey, key, f.Path, got, want)
}

// asInt converts an integer scalar of any width to int64 (false for other types or a uint64
// above MaxInt64).
func asInt(x any) (int64, bool) {
	switch v := x.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		return int64(v), v <= math.MaxInt64
	}
	return 0, false
}

// Int returns an integer key (any of the eight integer types; writers differ in the width they
// use for counts). Errors wrap ErrKey: absent, another type, or a uint64 above MaxInt64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	n, ok := asInt(v.X)
	if !ok || v.Type == Array {
		return 0, f.wrongType(key, v, "an integer")
	}
	return n, nil
}

// Float returns a float32 or float64 key as float64. Errors wrap ErrKey.
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.X.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, f.wrongType(key, v, "float32 or float64")
}

// Bool returns a bool key. Errors wrap ErrKey.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.X.(bool)
	if !ok || v.Type != Bool {
		return false, f.wrongType(key, v, "bool")
	}
	return b, nil
}

// String returns a string key. Errors wrap ErrKey.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.X.(string)
	if !ok || v.Type != String {
		return "", f.wrongType(key, v, "string")
	}
	return s, nil
}

// Strings returns an array-of-strings key. Errors wrap ErrKey.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.X.([]string)
	if !ok {
		return nil, f.wrongType(key, v, "array of string")
	}
	return s, nil
}

// Ints returns an array of integers of any width as int64, or a single integer as an array of
// one (llama.cpp writes per-layer keys either way). Errors wrap ErrKey.
func (f *File) Ints(key string) ([]int64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	if n, ok := asInt(v.X); ok && v.Type != Array {
		return []int64{n}, nil
	}
	bad := f.wrongType(key, v, "an integer or an array of integers")
	var out []int64
	switch x := v.X.(type) {
	case []uint8:
		out = conv(x)
	case []int8:
		out = conv(x)
	case []uint16:
		out = conv(x)
	case []int16:
		out = conv(x)
	case []uint32:
		out = conv(x)
	case []int32:
		out = conv(x)
	case []int64:
		out = x
	case []uint64:
		out = make([]int64, len(x))
		for i, u := range x {
			if u > math.MaxInt64 {
				return nil, bad
			}
			out[i] = int64(u)
		}
	default:
		return nil, bad
	}
	return out, nil
}

// Bools returns an array of bools. Errors wrap ErrKey.
func (f *File) Bools(key string) ([]bool, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	b, ok := v.X.([]bool)
	if !ok {
		return nil, f.wrongType(key, v, "array of bool")
	}
	return b, nil
}

func conv[T uint8 | int8 | uint16 | int16 | uint32 | int32](x []T) []int64 {
	out := make([]int64, len(x))
	for i, v := range x {
		out[i] = int64(v)
	}
	return out
}
