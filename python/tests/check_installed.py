"""Checks an installed strata package (make py-install-test): run as
    python3 -I check_installed.py SITE REPO
from a directory outside the repository, with STRATA_LIBRARY unset. SITE is where pip put the
package; REPO is the repository (for its tiny checkpoint and tokenizer). The package must load
the library it carries, with no environment variable."""

import os
import sys

site, repo = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
assert "STRATA_LIBRARY" not in os.environ, "STRATA_LIBRARY must be unset for this check"

import strata  # noqa: E402

pkg = os.path.dirname(os.path.abspath(strata.__file__))
assert pkg == os.path.join(os.path.abspath(site), "strata"), f"imported {pkg}, not the installed package"
assert os.path.dirname(strata.library_path()) == pkg, strata.library_path()
assert os.path.exists(os.path.join(pkg, "py.typed"))
print(strata.version(), "from", strata.library_path())

tok = strata.Tokenizer(os.path.join(repo, "tokenizer", "testdata", "tiny", "tokenizer.json"))
ids = tok.encode("<|im_start|>hello world")
assert ids == [511, 262, 263, 111, 114, 108, 100], ids
with strata.Device("cpu") as dev, strata.Model(dev, os.path.join(repo, "testdata", "qwen4exp-tiny")) as m:
    with m.session(64) as s:
        logits = s.prefill(ids)
assert logits.shape == (512,) and logits.dtype.name == "float32"
print("installed package ok:", len(ids), "ids ->", logits.shape, "logits; next", repr(tok.decode([int(logits.argmax())])))
