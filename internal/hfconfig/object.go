package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Object is one JSON object of a config.json with the keys read so far, so that the keys nobody
// read can be reported (Unknown). Every read marks its key; a value of the wrong type is recorded
// as a problem (Fail) and the default is returned, so that one error can list every problem
// (Errors). JSON null counts as absent (transformers writes null for unset optional fields).
type Object struct {
	where string // "" for the top level, else e.g. "text_config"
	m     map[string]json.RawMessage
	used  map[string]bool
	errs  *[]string
}

// DecodeObject decodes data as one JSON object called where ("" for the top level, else e.g.
// "text_config"); its problems go to errs, shared by the objects nested in it. Errors wrap
// ErrConfig (not JSON, not an object, trailing data).
func DecodeObject(data []byte, where string, errs *[]string) (*Object, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, orTop(where), err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrConfig, orTop(where))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: trailing data after the JSON object", ErrConfig, orTop(where))
	}
	return &Object{where: where, m: m, used: map[string]bool{}, errs: errs}, nil
}

func orTop(where string) string {
	if where == "" {
		return "config"
	}
	return where
}

// Name is key's full name for messages, e.g. "text_config.hidden_size".
func (o *Object) Name(key string) string {
	if o.where == "" {
		return key
	}
	return o.where + "." + key
}

// Fail records a problem with key.
func (o *Object) Fail(key, format string, args ...any) {
	*o.errs = append(*o.errs, o.Name(key)+": "+fmt.Sprintf(format, args...))
}

// Get marks key as read and returns its raw value (absent or null: false).
func (o *Object) Get(key string) (json.RawMessage, bool) {
	o.used[key] = true
	v, ok := o.m[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

// Has marks key as read and reports whether it holds a value.
func (o *Object) Has(key string) bool { _, ok := o.Get(key); return ok }

// Int reads an integer (an integral float such as 4.0 too), or def.
func (o *Object) Int(key string, def int) int {
	v, ok := o.Get(key)
	if !ok {
		return def
	}
	n, err := parseInt(v)
	if err != nil {
		o.Fail(key, "%v", err)
		return def
	}
	return n
}

func parseInt(v json.RawMessage) (int, error) {
	s := string(bytes.TrimSpace(v))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Python writes 4.0 for a float-typed integer; accept integral floats only.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("want an integer, got %s", s)
		}
		return int(f), nil
	}
	return int(n), nil
}

// Float reads a number, or def.
func (o *Object) Float(key string, def float64) float64 {
	v, ok := o.Get(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	if err != nil {
		o.Fail(key, "want a number, got %s", v)
		return def
	}
	return f
}

// Bool reads true or false, or def.
func (o *Object) Bool(key string, def bool) bool {
	v, ok := o.Get(key)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		o.Fail(key, "want true or false, got %s", v)
		return def
	}
	return b
}

// Str reads a string, or def.
func (o *Object) Str(key, def string) string {
	v, ok := o.Get(key)
	if !ok {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.Fail(key, "want a string, got %s", v)
		return def
	}
	return s
}

// Ints reads a list of integers, or def.
func (o *Object) Ints(key string, def []int) []int {
	v, ok := o.Get(key)
	if !ok {
		return def
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		o.Fail(key, "want a list of integers, got %s", v)
		return def
	}
	out := make([]int, 0, len(raw))
	for _, r := range raw {
		n, err := parseInt(r)
		if err != nil {
			o.Fail(key, "%v", err)
			return def
		}
		out = append(out, n)
	}
	return out
}

// IntOrInts reads a field that is an int or a list of ints (eos_token_id).
func (o *Object) IntOrInts(key string) []int {
	v, ok := o.Get(key)
	if !ok {
		return nil
	}
	if n, err := parseInt(v); err == nil {
		return []int{n}
	}
	return o.Ints(key, nil)
}

// Strs reads a list of strings; false when absent or malformed.
func (o *Object) Strs(key string) ([]string, bool) {
	v, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	var s []string
	if err := json.Unmarshal(v, &s); err != nil {
		o.Fail(key, "want a list of strings, got %s", v)
		return nil, false
	}
	return s, true
}

// Unknown records the keys neither read nor in one of the ignore lists as one problem. Keys starting with "mtp_"
// belong to the multi-token-prediction head, which prefill does not run, and are accepted.
func (o *Object) Unknown(ignore ...map[string]bool) {
	var bad []string
	for k := range o.m {
		if o.used[k] || strings.HasPrefix(k, "mtp_") {
			continue
		}
		known := false
		for _, ig := range ignore {
			known = known || ig[k]
		}
		if !known {
			bad = append(bad, o.Name(k))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		*o.errs = append(*o.errs, "unknown fields "+strings.Join(bad, ", "))
	}
}

// Sub decodes the object under key (absent or null: nil, false), sharing o's problems.
// A value that is not an object is recorded as a problem.
func (o *Object) Sub(key string) (*Object, bool) {
	raw, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	sub, err := DecodeObject(raw, o.Name(key), o.errs)
	if err != nil {
		o.Fail(key, "want a JSON object, got %s", clip(raw))
		return nil, false
	}
	return sub, true
}

// Errors returns the problems recorded so far in o and the objects sharing its list, as one
// error wrapping ErrConfig, or nil.
func (o *Object) Errors() error {
	if len(*o.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrConfig, strings.Join(*o.errs, "; "))
}
