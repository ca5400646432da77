"""The prompt cache: checkpoints of session states reused by later prompts."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int32, c_size_t, c_void_p
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _lib
from .api import DEFAULT_STEP, Model, PathLike, Session, Tokens, _Handle, _path, _step, _tokens
from .errors import InvalidArgumentError, check

#: the memory budget of a PromptCache unless told otherwise (STRATA_DEFAULT_PROMPT_CACHE_BYTES)
DEFAULT_PROMPT_CACHE_BYTES = _lib.DEFAULT_PROMPT_CACHE_BYTES
#: the checkpoint spacing in tokens unless told otherwise (STRATA_DEFAULT_CHECKPOINT_EVERY)
DEFAULT_CHECKPOINT_EVERY = _lib.DEFAULT_CHECKPOINT_EVERY


def _count(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2**63:
        raise InvalidArgumentError(f"{what} must be a non-negative integer (0: the default), got {v!r}")
    return int(v)


class PromptCache(_Handle):
    """Checkpoints of a whole model's session states, taken at the multiples of `every`
    (absolute positions) and at the end of every prefill, kept under a byte budget in memory (`bytes`) and,
    with `dir`, also on disk as session state files (`disk_bytes`; processes sharing dir share
    them); the least recently used go first. A new prompt resumes from the deepest checkpoint
    whose tokens are a prefix of it. Usable from many threads at once, each with its own
    session. Raises InvalidArgumentError for a budget smaller than one checkpoint of 1 token (the
    message gives both sizes; prefill refuses one smaller than a checkpoint of min(every, the
    session's max_context) tokens), an empty dir or a directory that cannot be written,
    UnsupportedError for a pipeline stage."""

    _free = "strata_prompt_cache_free"

    def __init__(self, model: Model, dir: Optional[PathLike] = None, bytes: int = 0, disk_bytes: int = 0,
                 every: int = 0) -> None:
        if not isinstance(model, Model):
            raise InvalidArgumentError(f"model must be a strata.Model, got {type(model).__name__}")
        lib = model._lib
        p = lib.strata_prompt_cache_default_params()
        keep = None
        if dir is not None:
            keep = _path(dir, "dir")
            if not keep:  # the C API reads "" as no directory; here it is a mistake
                raise InvalidArgumentError("dir is empty: give a directory, or None for checkpoints in memory only")
            p.dir = keep
        p.bytes = _count(bytes, "bytes") or p.bytes
        p.disk_bytes = _count(disk_bytes, "disk_bytes")
        p.every = _count(every, "every") or p.every
        h = c_void_p()
        check(lib.strata_prompt_cache_new(model._h, byref(p), byref(h)), lib)
        del keep  # copied by the library during the call
        super().__init__(lib, h.value)
        self.model = model
        self.every = int(p.every)

    def prefill(self, session: Session, tokens: Tokens, all_logits: bool = False,
                step: int = DEFAULT_STEP) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Runs the whole prompt `tokens` (from position 0) in `session`: its state is replaced by
        the deepest checkpoint whose tokens are a prefix of the prompt (the session's own state
        when its tokens are one) and only the rest is prefilled, in steps that end at the
        multiples of `every` (absolute positions; a checkpoint is taken at each and at the end);
        the logits equal bitwise those of prefill calls split at that checkpoint and at those
        multiples. Returns
        (logits, info): float32 [vocab] for the last token, or [len(tokens) - reused, vocab] with
        all_logits (the prefilled tokens); info is a dict: reused, tokens, source ("session",
        "memory", "disk" or "" for a miss), checkpoints, checkpoint_bytes, skipped,
        restore_seconds, checkpoint_seconds, total_seconds, memory_checkpoints, memory_bytes,
        disk_checkpoints, disk_bytes. Errors as Session.prefill; a failed call leaves the session
        unchanged."""
        if not isinstance(session, Session):
            raise InvalidArgumentError(f"session must be a strata.Session, got {type(session).__name__}")
        toks = _tokens(tokens)
        if not isinstance(all_logits, (bool, np.bool_)):
            raise InvalidArgumentError(f"all_logits must be a bool, got {all_logits!r}")
        p = self._lib.strata_prefill_default_params()
        p.all_logits = 1 if all_logits else 0
        p.step = _step(step)
        vocab = session.vocab
        out = np.empty((toks.size if all_logits else 1, vocab), dtype=np.float32)
        written = c_size_t()
        res = _lib.PromptCacheResult(struct_size=ctypes.sizeof(_lib.PromptCacheResult))
        check(self._lib.strata_prompt_cache_prefill(self._h, session._h, toks.ctypes.data_as(ctypes.POINTER(c_int32)),
                                                    toks.size, byref(p),
                                                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size,
                                                    byref(written), byref(res)), self._lib)
        info = {name: getattr(res, name) for name, _ in _lib.PromptCacheResult._fields_ if name != "struct_size"}
        info["source"] = _lib.CACHE_SOURCES.get(res.source, str(res.source))
        rows = written.value // vocab
        return (out[:rows] if all_logits else out[0]), info
