//go:build cgo

package main

import (
	"fmt"

	"github.com/stratakernels/strata/strata"
)

// The Go side of the session state files and the prompt cache (export_state.go reads their C
// arguments).

func sessionSave(h uintptr, path string) error {
	return withSession(h, func(so *sessionObj) error { return so.s.SaveStateFile(path) })
}

func sessionLoad(h uintptr, path string) error {
	return withSession(h, func(so *sessionObj) error { return so.s.LoadStateFile(path) })
}

func sessionSaveMLXLM(h uintptr, path string, opts strata.MLXLMOptions) error {
	return withSession(h, func(so *sessionObj) error { return so.s.SaveMLXLMCache(path, opts) })
}

func sessionTokens(h uintptr) ([]int32, error) {
	var ids []int32
	err := withSession(h, func(so *sessionObj) error {
		var err error
		ids, err = so.s.Tokens()
		return err
	})
	return ids, err
}

// promptCacheObj holds a reference to its model, released when the cache is freed.
type promptCacheObj struct {
	c     *strata.PromptCache
	model *modelObj
}

func promptCacheNew(model uintptr, opts strata.PromptCacheOptions) (uintptr, error) {
	mo, err := getObj[*modelObj](model, kindModel)
	if err != nil {
		return 0, err
	}
	if err := mo.acquire(); err != nil {
		return 0, err
	}
	c, err := strata.NewPromptCache(mo.m, opts)
	if err != nil {
		mo.release()
		return 0, err
	}
	return handles.add(kindPromptCache, &promptCacheObj{c: c, model: mo}), nil
}

func promptCacheFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	obj, err := handles.remove(h, kindPromptCache)
	if err != nil {
		return err
	}
	obj.(*promptCacheObj).model.release()
	return nil
}

// promptCachePrefill runs tokens through the cache in the session and writes the logits to out
// (checked before any work to hold n_tokens rows with all logits, one without); it returns the
// floats written and what the cache did.
func promptCachePrefill(ch, sh uintptr, tokens []int32, req prefillReq, out prefillOut) (int, *strata.PromptCacheResult, error) {
	co, err := getObj[*promptCacheObj](ch, kindPromptCache)
	if err != nil {
		return 0, nil, err
	}
	if req.hiddenIn != nil || req.hiddenOut.have {
		return 0, nil, fmt.Errorf("%w: hidden_in and hidden_out are for pipeline stages; a prompt cache runs whole models", strata.ErrInvalidArgument)
	}
	written := 0
	var res *strata.PromptCacheResult
	err = withSession(sh, func(so *sessionObj) error {
		vocab := so.s.Model().Vocab()
		rows := 1
		if req.all {
			rows = len(tokens)
		}
		if need := rows * vocab; out.have && out.capacity < uint64(need) {
			return fmt.Errorf("%w: logits_cap %d floats is too small: %d rows x %d vocab = %d needed", strata.ErrShape, out.capacity, rows, vocab, need)
		}
		ctx, done := so.cancellable()
		defer done()
		lg, r, err := co.c.Prefill(ctx, so.s, tokens, strata.PrefillOptions{AllLogits: req.all, Step: req.step})
		if err != nil {
			return err
		}
		if out.have {
			written = copy(out.buf(len(lg.Data)), lg.Data)
		}
		res = r
		return nil
	})
	return written, res, err
}
