//go:build cgo

package main

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// errInvalidHandle is the sentinel of STRATA_ERR_INVALID_HANDLE: a NULL, unknown, freed or
// wrong-kind handle.
var errInvalidHandle = errors.New("strata: invalid handle")

// kind tags a handle with the type of object it names.
type kind uint8

const (
	kindDevice kind = 1 + iota
	kindModel
	kindSession
	kindSnapshot
	kindTokenizer
	kindPromptCache
)

func (k kind) String() string {
	switch k {
	case kindDevice:
		return "strata_device"
	case kindModel:
		return "strata_model"
	case kindSession:
		return "strata_session"
	case kindSnapshot:
		return "strata_snapshot"
	case kindTokenizer:
		return "strata_tokenizer"
	case kindPromptCache:
		return "strata_prompt_cache"
	}
	return "unknown"
}

const kindBits = 3

// handleTable maps the opaque handle values given to C to Go objects, so that no Go pointer
// crosses the boundary. A handle is seq<<kindBits | kind with seq increasing from 1 and never
// reused, so a stale handle cannot name a newer object and a handle of one kind is never
// accepted as another.
type handleTable struct {
	mu   sync.RWMutex
	next atomic.Uint64 // last sequence number issued
	objs map[uintptr]any
}

func newHandleTable() *handleTable { return &handleTable{objs: map[uintptr]any{}} }

// add stores obj and returns its new handle.
func (t *handleTable) add(k kind, obj any) uintptr {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := uintptr(t.next.Add(1)<<kindBits) | uintptr(k)
	t.objs[h] = obj
	return h
}

func (t *handleTable) check(h uintptr, k kind) error {
	if h == 0 {
		return fmt.Errorf("%w: NULL %s", errInvalidHandle, k)
	}
	if got := kind(h & (1<<kindBits - 1)); got != k {
		if got >= kindDevice && got <= kindPromptCache {
			return fmt.Errorf("%w: %#x is a %s handle, not a %s", errInvalidHandle, h, got, k)
		}
		return fmt.Errorf("%w: %#x is not a %s handle", errInvalidHandle, h, k)
	}
	return nil
}

// get returns the live object of handle h of kind k.
func (t *handleTable) get(h uintptr, k kind) (any, error) {
	if err := t.check(h, k); err != nil {
		return nil, err
	}
	t.mu.RLock()
	obj, ok := t.objs[h]
	t.mu.RUnlock()
	if !ok {
		return nil, t.missing(h, k)
	}
	return obj, nil
}

// remove deletes handle h of kind k and returns its object; exactly one of several concurrent
// removals of the same handle succeeds.
func (t *handleTable) remove(h uintptr, k kind) (any, error) {
	if err := t.check(h, k); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	obj, ok := t.objs[h]
	if !ok {
		return nil, t.missing(h, k)
	}
	delete(t.objs, h)
	if len(t.objs) == 0 {
		// A fresh map drops the deleted slots a long-lived process would otherwise accumulate.
		t.objs = map[uintptr]any{}
	}
	return obj, nil
}

// missing describes a handle absent from the table: freed before (handles are never reused,
// so a sequence number already issued was freed) or never issued.
func (t *handleTable) missing(h uintptr, k kind) error {
	if uint64(h>>kindBits) <= t.issued() {
		return fmt.Errorf("%w: %s %#x was already freed", errInvalidHandle, k, h)
	}
	return fmt.Errorf("%w: %s %#x was never issued by this library", errInvalidHandle, k, h)
}

func (t *handleTable) issued() uint64 { return t.next.Load() }

// live counts the objects of kind k in the table (tests: leak checks).
func (t *handleTable) live(k kind) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for h := range t.objs {
		if kind(h&(1<<kindBits-1)) == k {
			n++
		}
	}
	return n
}
