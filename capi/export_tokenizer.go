package main

/*
#include "strata.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/stratakernels/strata/strata"
	"github.com/stratakernels/strata/tokenizer"
)

// The tokenizer section of the C ABI: Hugging Face tokenizer.json files (package tokenizer)
// behind strata_tokenizer handles.

type tokenizerObj struct{ t *tokenizer.Tokenizer }

// tokenizerLoad loads path: a tokenizer.json file, or a checkpoint directory holding one. A
// missing, malformed or unsupported file is a checkpoint error.
func tokenizerLoad(path string) (uintptr, error) {
	var t *tokenizer.Tokenizer
	var err error
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		t, err = tokenizer.LoadDir(path)
	} else {
		t, err = tokenizer.Load(path)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", strata.ErrCheckpoint, err)
	}
	return handles.add(kindTokenizer, &tokenizerObj{t: t}), nil
}

func tokenizerFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	_, err := handles.remove(h, kindTokenizer)
	return err
}

// argErr maps the tokenizer's input errors (invalid UTF-8, unknown ids) onto invalid
// arguments.
func argErr(err error) error {
	if errors.Is(err, tokenizer.ErrInvalidText) || errors.Is(err, tokenizer.ErrInvalidID) {
		return fmt.Errorf("%w: %w", strata.ErrInvalidArgument, err)
	}
	return err
}

func tokenizerEncode(h uintptr, text string) ([]int32, error) {
	to, err := getObj[*tokenizerObj](h, kindTokenizer)
	if err != nil {
		return nil, err
	}
	ids, err := to.t.Encode(text)
	return ids, argErr(err)
}

func tokenizerDecode(h uintptr, ids []int32) (string, error) {
	to, err := getObj[*tokenizerObj](h, kindTokenizer)
	if err != nil {
		return "", err
	}
	s, err := to.t.Decode(ids)
	return s, argErr(err)
}

func tokenizerVocabSize(h uintptr) (int, error) {
	to, err := getObj[*tokenizerObj](h, kindTokenizer)
	if err != nil {
		return 0, err
	}
	return to.t.VocabSize(), nil
}

//export strata_tokenizer_load
func strata_tokenizer_load(path *C.char, out **C.strata_tokenizer) (st C.strata_status) {
	defer guard("strata_tokenizer_load", &st)
	if path == nil || out == nil {
		return statusOf(errArg("strata_tokenizer_load: path or out is NULL"))
	}
	h, err := tokenizerLoad(C.GoString(path))
	if err != nil {
		return statusOf(err)
	}
	putHandle(unsafe.Pointer(out), h)
	return C.STRATA_OK
}

//export strata_tokenizer_free
func strata_tokenizer_free(tok *C.strata_tokenizer) (st C.strata_status) {
	defer guard("strata_tokenizer_free", &st)
	return statusOf(tokenizerFree(handle(unsafe.Pointer(tok))))
}

//export strata_tokenizer_vocab_size
func strata_tokenizer_vocab_size(tok *C.strata_tokenizer, out *C.int64_t) (st C.strata_status) {
	defer guard("strata_tokenizer_vocab_size", &st)
	if out == nil {
		return statusOf(errArg("strata_tokenizer_vocab_size: out is NULL"))
	}
	n, err := tokenizerVocabSize(handle(unsafe.Pointer(tok)))
	if err != nil {
		return statusOf(err)
	}
	*out = C.int64_t(n)
	return C.STRATA_OK
}

//export strata_tokenizer_encode
func strata_tokenizer_encode(tok *C.strata_tokenizer, text *C.char, length C.size_t, ids *C.int32_t, cap C.size_t,
	nIDs *C.size_t) (st C.strata_status) {
	defer guard("strata_tokenizer_encode", &st)
	switch {
	case nIDs == nil:
		return statusOf(errArg("strata_tokenizer_encode: n_ids is NULL"))
	case text == nil && length > 0:
		return statusOf(errArg("strata_tokenizer_encode: text is NULL with len %d", uint64(length)))
	case ids == nil && cap > 0:
		return statusOf(errArg("strata_tokenizer_encode: ids_out is NULL with cap %d", uint64(cap)))
	case uint64(length) > 1<<31:
		return statusOf(errArg("strata_tokenizer_encode: len %d exceeds 2^31 bytes", uint64(length)))
	}
	var s string
	if length > 0 {
		s = C.GoStringN(text, C.int(length))
	}
	got, err := tokenizerEncode(handle(unsafe.Pointer(tok)), s)
	if err != nil {
		return statusOf(err)
	}
	*nIDs = C.size_t(len(got))
	if cap == 0 && ids == nil {
		return C.STRATA_OK
	}
	if uint64(cap) < uint64(len(got)) {
		return statusOf(fmt.Errorf("%w: strata_tokenizer_encode: ids_out holds %d ids, the text has %d", strata.ErrShape, uint64(cap), len(got)))
	}
	copy(unsafe.Slice((*int32)(unsafe.Pointer(ids)), len(got)), got)
	return C.STRATA_OK
}

//export strata_tokenizer_decode
func strata_tokenizer_decode(tok *C.strata_tokenizer, ids *C.int32_t, n C.size_t, buf *C.char, cap C.size_t,
	length *C.size_t) (st C.strata_status) {
	defer guard("strata_tokenizer_decode", &st)
	switch {
	case ids == nil && n > 0:
		return statusOf(errArg("strata_tokenizer_decode: ids is NULL with n %d", uint64(n)))
	case buf == nil && cap > 0:
		return statusOf(errArg("strata_tokenizer_decode: buf is NULL with cap %d", uint64(cap)))
	case uint64(n) > 1<<31:
		return statusOf(errArg("strata_tokenizer_decode: n %d exceeds 2^31 ids", uint64(n)))
	}
	var in []int32
	if n > 0 {
		in = unsafe.Slice((*int32)(unsafe.Pointer(ids)), int(n))
	}
	s, err := tokenizerDecode(handle(unsafe.Pointer(tok)), in)
	if err != nil {
		return statusOf(err)
	}
	full := copyCString(s, buf, cap)
	if length != nil {
		*length = full
	}
	return C.STRATA_OK
}
