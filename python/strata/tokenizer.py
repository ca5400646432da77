"""Text to token ids and back with a checkpoint's tokenizer.json (strata_tokenizer_*)."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_int32, c_int64, c_size_t, c_void_p
from typing import Iterable, List, Union

import numpy as np

from . import _lib
from .api import _Handle, _path
from .errors import InvalidArgumentError, check


class Tokenizer(_Handle):
    """A Hugging Face tokenizer.json (byte-level BPE of Qwen3 / Qwen3-Next), giving the ids the
    Hugging Face tokenizers library gives. path is the tokenizer.json file or a checkpoint
    directory holding one. Raises CheckpointError for a missing, malformed or unsupported file
    (the message names what is not implemented). Immutable: usable from many threads.

        tok = strata.Tokenizer("path/to/checkpoint")
        ids = tok.encode("<|im_start|>user\\nHello<|im_end|>\\n")   # list of int
        text = tok.decode(ids)
    """

    _free = "strata_tokenizer_free"

    def __init__(self, path: Union[str, bytes, os.PathLike]) -> None:
        lib = _lib.load()
        h = c_void_p()
        check(lib.strata_tokenizer_load(_path(path, "path"), byref(h)), lib)
        super().__init__(lib, h.value)

    @property
    def vocab_size(self) -> int:
        """One more than the largest token id (added tokens included)."""
        n = c_int64()
        check(self._lib.strata_tokenizer_vocab_size(self._h, byref(n)), self._lib)
        return n.value

    def encode(self, text: str) -> List[int]:
        """The token ids of text (no special tokens added; chat-template markers in the text
        become their ids). Raises InvalidArgumentError for text that is not a str or holds lone
        surrogates."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a str, got {type(text).__name__}")
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(f"text is not valid Unicode: {e}") from None
        cap = max(len(raw), 1)  # every id covers at least one byte
        ids = (c_int32 * cap)()
        n = c_size_t()
        check(self._lib.strata_tokenizer_encode(self._h, raw, len(raw), ids, cap, byref(n)), self._lib)
        return list(ids[:n.value])

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ids (1-D integers), with U+FFFD where the bytes are not valid UTF-8 (a
        character split across ids). Raises InvalidArgumentError for an id not in the
        tokenizer."""
        a = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if a.size == 0:
            return ""
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise InvalidArgumentError(f"ids must be a 1-D sequence of integers, got shape {a.shape} dtype {a.dtype}")
        if a.min() < 0 or a.max() >= 2**31:
            raise InvalidArgumentError(f"ids must lie in [0, 2^31), got {a.min()}..{a.max()}")
        a = np.ascontiguousarray(a, dtype=np.int32)
        p = a.ctypes.data_as(ctypes.POINTER(c_int32))
        n = c_size_t()
        check(self._lib.strata_tokenizer_decode(self._h, p, a.size, None, 0, byref(n)), self._lib)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(self._lib.strata_tokenizer_decode(self._h, p, a.size, buf, n.value + 1, None), self._lib)
        return buf.raw[:n.value].decode("utf-8")
