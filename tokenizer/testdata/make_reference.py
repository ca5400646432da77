"""Reference ids for strata's tokenizer tests, made by Hugging Face tokenizers.

Run next to tokenizer.json (or tokenizer.json.gz) and corpus.json with OUT set to an output
folder; it writes reference.json, unicode.json (the tests read its keys classes, norm.nfc and
norm.nfd), and flags.json / debug.json (diagnostics, not used).
"""
import hashlib
import json
import os
import random
import sys
import time
import traceback

import tokenizers
from tokenizers import Regex, Tokenizer, normalizers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", os.path.join(HERE, "out"))
os.makedirs(OUT, exist_ok=True)
T0 = time.time()
LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    LOG.append(s)
    print(s, flush=True)


def dump(name, obj):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, separators=(",", ":"))
    log("wrote", name, os.path.getsize(os.path.join(OUT, name)), "bytes at", round(time.time() - T0, 1), "s")


log("tokenizers", tokenizers.__version__, "python", sys.version.split()[0])
TJ_PATH = os.path.join(HERE, "tokenizer.json")
if not os.path.exists(TJ_PATH):  # gzipped
    import gzip
    import tempfile
    with gzip.open(TJ_PATH + ".gz", "rb") as f:
        raw = f.read()
    TJ_PATH = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    with open(TJ_PATH, "wb") as f:
        f.write(raw)
with open(TJ_PATH, "rb") as f:
    raw = f.read()
log("tokenizer.json sha256", hashlib.sha256(raw).hexdigest())
TJ = json.loads(raw)
tok = Tokenizer.from_file(TJ_PATH)
corpus = json.load(open(os.path.join(HERE, "corpus.json"), encoding="utf-8"))


def enc(t, text):
    e = t.encode(text)
    e2 = t.encode(text, add_special_tokens=False)
    assert e.ids == e2.ids, "add_special_tokens changes ids"
    return e


# 1. The corpus.
cases, debug = [], []
try:
    for c in corpus:
        e = enc(tok, c["text"])
        d = tok.decode(e.ids, skip_special_tokens=False)
        cases.append({"name": c["name"], "ids": e.ids, "decoded": d})
        debug.append({"name": c["name"], "tokens": e.tokens, "normalized": tok.normalizer.normalize_str(c["text"]),
                      "pre": [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(c["text"]))]})
    log("corpus", len(cases), "cases")
except Exception:
    log("corpus FAILED", traceback.format_exc())

# 2. Fuzz strings from pools of tricky pieces, seeded.
POOLS = [
    list("abcxyzABCXYZ"), list("0123456789"), list("!?.,;:-_()[]{}<>|/\\\"#$%&*+=@^`~"),
    ["'", "'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'\u017f", "\u2019s"],
    [" ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\u00a0", "\u2009", "\u3000", "\u2028", "\u0085", "\u1680", "\u202f", "\u200b", "\ufeff"],
    list("\u6211\u7231\u65e5\u672c\u30c6\u30ad\ud55c\uad6d\u0645\u0631\u062d\u0928\u092e\u094d\u0e2a\u0e27\u05e9\u041f\u03b1"),
    ["\U0001f468", "\u200d", "\U0001f3fd", "\ufe0f", "\U0001f600", "\U0001f1eb", "\U0001f1f7", "\u2764", "\u20e3"],
    ["\u0301", "\u0308", "\u0338", "\u0323", "\u0307", "\u030a", "\u1161", "\u11a8", "\u1100", "\u093c", "\u0651"],
    ["\u0661", "\u0966", "\uff15", "\u00bd", "\u2460", "\u216b", "\U0001d7d9", "\U00011f50", "\U0001ccf0"],
    ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|fim_pad|>", "<|", "|>", "<", ">", "im_start"],
    ["hello", "world", "The", " the", "strata", "tokenizer", "don't", "IT'S", "caf\u00e9", "e\u0301", "\u00c5", "\u212b"],
    ["\U0001e030", "\U00011f04", "\U0002ebf0", "\U00010d4a", "\U0001fae9", "\ue000", "\ufffd", "\x00", "\x7f", "\u00ad"],
]
rng = random.Random(20250117)
fuzz = []
try:
    for i in range(400):
        n = rng.randint(1, 24)
        s = "".join(rng.choice(rng.choice(POOLS)) for _ in range(n))
        e = enc(tok, s)
        fuzz.append({"text": s, "ids": e.ids, "decoded": tok.decode(e.ids, skip_special_tokens=False)})
    log("fuzz", len(fuzz))
except Exception:
    log("fuzz FAILED", traceback.format_exc())


# 3. Decoding byte sequences that are not valid UTF-8 (single-byte tokens), as the ByteLevel
# decoder sees them.
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


byte_decode = []
try:
    b2u = bytes_to_unicode()
    vocab = tok.get_vocab(with_added_tokens=False)
    byte_ids = [vocab[b2u[b]] for b in range(256)]
    seqs = ["e4bd", "ffff", "f09f98", "eda080", "c080", "f4908080", "e4bda0e5a5bd", "80", "c3", "c3a9c3", "e0a080",
            "f0908080", "f48fbfbf", "ed9fbf", "edbfbf", "e080", "f08f", "61ff62", "e4bd61", "f09f9880f09f", "c0af", "fe", "eda0bdedb880"]
    for hx in seqs:
        ids = [byte_ids[b] for b in bytes.fromhex(hx)]
        byte_decode.append({"bytes": hx, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    ids = [151644] + [byte_ids[b] for b in bytes.fromhex("e4bd")] + [151645]
    byte_decode.append({"bytes": "special+e4bd+special", "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    log("byte decode", len(byte_decode))
except Exception:
    log("byte decode FAILED", traceback.format_exc())

# 4. The same tokenizer with merges written as "a b" strings: HF must give the same ids.
merges_string_form = None
try:
    tj2 = json.loads(raw)
    tj2["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in tj2["model"]["merges"]]
    tok2 = Tokenizer.from_str(json.dumps(tj2))
    same = all(enc(tok2, c["text"]).ids == x["ids"] for c, x in zip(corpus, cases))
    same = same and all(enc(tok2, f["text"]).ids == f["ids"] for f in fuzz)
    merges_string_form = same
    log("merges as strings give the same ids:", same)
except Exception:
    log("merges string form FAILED", traceback.format_exc())

# 5. Added-token flags (lstrip, rstrip, single_word, normalized) on a variant of the file.
flags = None
try:
    tj3 = json.loads(raw)
    set_flags = {"<tool_call>": {"lstrip": True}, "</tool_call>": {"rstrip": True}, "<tool_response>": {"single_word": True},
                 "<think>": {"normalized": True}, "</think>": {"lstrip": True, "rstrip": True},
                 "<|im_start|>": {"lstrip": True, "rstrip": True, "single_word": True}}
    for a in tj3["added_tokens"]:
        a.update(set_flags.get(a["content"], {}))
    tok3 = Tokenizer.from_str(json.dumps(tj3))
    texts = [" <tool_call> x", "a  <tool_call>", "\t\n<tool_call>\n", "x</tool_call>  y", "</tool_call>\u3000\u00a0z", "x<tool_response>y",
             " <tool_response> ", "a<tool_response> ", "<tool_response>b", "\u00e9<tool_response>", "1<tool_response>2",
             "<think>", "a<think>b", "e\u0301<think>\u0338", "  </think>  \n", "x </think>y", "<|im_start|>user", " <|im_start|> ",
             "a<|im_start|>", "<tool_call><tool_call>  <tool_call>", "</tool_call></tool_call>", "  </think></think>  ",
             "\u2003<tool_call>\u2003", "<tool_call>\u0301"]
    flags = {"set": set_flags, "cases": []}
    for s in texts + [c["text"] for c in corpus if c["name"].startswith("special")]:
        e = enc(tok3, s)
        flags["cases"].append({"text": s, "ids": e.ids, "tokens": e.tokens})
    log("flag cases", len(flags["cases"]))
except Exception:
    log("flags FAILED", traceback.format_exc())

dump("reference.json", {"tokenizers_version": tokenizers.__version__, "tokenizer_json_sha256": hashlib.sha256(raw).hexdigest(),
                        "merges_string_form_same_ids": merges_string_form, "cases": cases, "fuzz": fuzz, "byte_decode": byte_decode})
dump("debug.json", debug)
dump("flags.json", flags)

# 6. Unicode classes as the Split regex engine sees them, per scalar value (no surrogates).
ALL = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def ranges(mask):
    out, start = [], None
    for c, m in zip(ALL, mask):
        if m and start is None:
            start = prev = c
        elif m and c == prev + 1:
            prev = c
        elif m:
            out.append([start, prev])
            start = prev = c
        elif start is not None:
            out.append([start, prev])
            start = None
    if start is not None:
        out.append([start, prev])
    return out


classes = {}
try:
    from tokenizers import pre_tokenizers
    for name, pat in [("L", r"\p{L}"), ("N", r"\p{N}"), ("s", r"\s"), ("ci_strevmld", "(?i:s|t|r|e|v|m|l|d)")]:
        t1 = time.time()
        sp = pre_tokenizers.Split(Regex(pat), "removed")
        mask = [not sp.pre_tokenize_str(chr(c)) for c in ALL]
        classes[name] = ranges(mask)
        log("class", name, len(classes[name]), "ranges", sum(b - a + 1 for a, b in classes[name]), "chars", round(time.time() - t1, 1), "s")
        if time.time() - T0 > 170:
            log("stopping classes: time")
            break
except Exception:
    log("classes FAILED", traceback.format_exc())

# 7. NFC / NFD per scalar value and NFC of each NFD, hashed per block of 4096.
norm = {}
try:
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    sep_all = [c for c in ALL if c != 0x0A]

    def per_char(n, strs):
        got = n.normalize_str("\n".join(strs)).split("\n")
        assert len(got) == len(strs), (len(got), len(strs))
        return got

    chars = [chr(c) for c in sep_all]
    r_nfc = per_char(nfc, chars)
    r_nfd = per_char(nfd, chars)
    r_nfc_nfd = per_char(nfc, r_nfd)
    for name, res in [("nfc", r_nfc), ("nfd", r_nfd), ("nfc_of_nfd", r_nfc_nfd)]:
        blocks = {}
        for c, s in zip(sep_all, res):
            blocks.setdefault(c >> 12, hashlib.sha256())
            blocks[c >> 12].update((" ".join("%X" % ord(x) for x in s) + "\n").encode())
        norm[name] = {"%X" % b: h.hexdigest()[:16] for b, h in sorted(blocks.items())}
    norm["nfc_changed"] = [[c, s] for c, s in zip(sep_all, r_nfc) if s != chr(c)]
    norm["nfc_of_nfd_changed"] = [[c, s] for c, s in zip(sep_all, r_nfc_nfd) if s != chr(c)]
    log("norm: nfc changes", len(norm["nfc_changed"]), "nfc(nfd) changes", len(norm["nfc_of_nfd_changed"]))
except Exception:
    log("norm FAILED", traceback.format_exc())

dump("unicode.json", {"tokenizers_version": tokenizers.__version__, "hash": "per 4096-block sha256[:16] of lines 'HEX HEX\\n' of the result for each scalar value but U+000A", "classes": classes, "norm": norm})
with open(os.path.join(OUT, "log.txt"), "w") as f:
    f.write("\n".join(LOG) + "\n")
log("done in", round(time.time() - T0, 1), "s")
