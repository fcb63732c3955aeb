#!/usr/bin/env python3
"""Token-id goldens from Hugging Face tokenizers for tune's Go tokenizer (loaders.Tokenizer).

Run on the machine that has `tokenizers` (0.23.x) installed; it needs no network:

    python3 tools/reference/tokenizer_goldens.py \
        --tokenizer ../shared/data/bert-base-uncased/tokenizer.json \
        --sst2 ../shared/data/sst2/dev.tsv \
        --out testdata/tokenizer

It writes two files into --out (each to a temporary name first, then renamed):

  hf_sst2_dev_ids.jsonl.gz  line 1: {"tokenizers_version", "tokenizer", "source", "count"}; then one JSON array
                            of input ids per sentence of dev.tsv, in file order (special tokens added, no
                            truncation, no padding). The sentence is the text before the last tab of each line
                            after the header, byte for byte (SST-2 sentences end with a space).
  hf_edge_cases.json        {"tokenizers_version", "tokenizer", "cases": [...], "batches": [...]}; each case is
                            {name, text, pair, add_special_tokens, max_length, padding, ids, type_ids,
                            attention_mask, special_tokens_mask, offsets, tokens}. max_length (or null) is
                            enable_truncation(max_length, strategy="longest_first"), which is what transformers'
                            truncation=True does; padding is null, {"length": n} (padding="max_length") or
                            {"pad_to_multiple_of": k} (pad to the longest, rounded up). Offsets are in code
                            points, as the Python API reports them. Each batch is {name, texts, padding, ids,
                            attention_mask} from encode_batch with padding to the longest.

Everything is deterministic (no randomness; gzip with mtime 0).
"""

import argparse
import gzip
import io
import json
import os
import sys


def edge_cases():
    """(name, text, pair, add_special_tokens, max_length, padding) rows covering the BERT pipeline's corners."""
    long_ascii = "hello" * 20
    long_cyr = "привет" * 16
    rows = [
        # accents and case
        ("accents lowercased and stripped", "Héllo wörld naïve café RÉSUMÉ", None),
        ("decomposed accents", "cafe\u0301 e\u0300\u0323", None),
        ("Vietnamese stacked diacritics", "Tiếng Việt có dấu", None),
        ("dotted capital I and final sigma", "İstanbul ΟΔΟΣ Σίσυφος", None),
        ("sharp s, ligatures, fullwidth", "straße ﬁsh ＡＢＣ１２３", None),
        # CJK and other scripts
        ("CJK ideographs are split one by one", "我爱北京天安门 and 東京", None),
        ("CJK extension B and compatibility ideographs", "\U00020000\U0002B920\U0002B820\uF900\U0002F800", None),
        ("Japanese kana are not CJK ideographs", "ひらがな カタカナ 漢字", None),
        ("Hangul syllables decompose to jamo under NFD", "한국어 텍스트", None),
        ("mixed scripts", "English Русский Ελληνικά العربية עברית हिन्दी ไทย", None),
        ("Arabic harakat and Hebrew niqqud are Mn", "مَرْحَبًا שָׁלוֹם", None),
        ("Devanagari virama and Thai vowels", "क्षत्रिय ภาษาไทย", None),
        # emoji
        ("emoji from Unicode 6", "I love it 😀👍 🎉", None),
        ("emoji newer than old tables", "new 🥰 🫠 🪿 done", None),
        ("emoji ZWJ sequence and skin tone", "👩‍👩‍👧 👍🏽 ❤️", None),
        ("flags (regional indicators)", "🇫🇷🇯🇵", None),
        # control, zero-width, whitespace
        ("NUL, replacement char and C0 controls", "a\u0000b\ufffdc\u0001d\u001fe", None),
        ("C1 controls", "shoot\u0097 TOO\u0085much\u0080fun", None),
        ("zero-width characters", "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffjoiner", None),
        ("Mongolian vowel separator and soft hyphen", "a\u180eb soft\u00adhyphen", None),
        ("bidi controls", "\u202aleft\u202c \u2066iso\u2069 \u200fmark", None),
        ("unicode whitespace", "a\u00a0b\u3000c\u2028d\u2029e\u202ff\u205fg\u1680h\u2007i\u2009j", None),
        ("tabs, newlines, CRLF, vertical tab, form feed", "a\tb\nc\r\nd\ve\ff", None),
        ("private use and unassigned code points", "p\ue000q\ue001r\uf8ffs\u0378t", None),
        # punctuation
        ("ASCII punctuation of every class", "$100^2` a+b=c <tag> {x|y} ~home \\path @user #hash", None),
        ("unicode punctuation and symbols", "«quoted» “smart” ‘single’ — dash – en … ellipsis € £ ¥ ± ×", None),
        ("contractions, numbers, URLs, e-mail", "don't can't 1,234.56 3.14 https://example.com/a?b=c me@mail.org", None),
        # long words
        ("word of exactly 100 characters", long_ascii, None),
        ("word of 101 characters", long_ascii + "s", None),
        ("100 Cyrillic characters (200 bytes)", long_cyr + "прив", None),
        ("101 Cyrillic characters", long_cyr + "приве", None),
        ("long word between short ones", "before " + "x" * 150 + " after", None),
        ("long word made of CJK is split anyway", "中" * 120, None),
        ("unknown characters give [UNK]", "ⓐⓑⓒ ☃ ∮ ⊕", None),
        # empty input
        ("empty", "", None),
        ("spaces only", "   ", None),
        ("whitespace of several kinds only", "\t\n\u00a0\u3000 ", None),
        ("only removed characters", "\u0000\ufffd\u200b", None),
        # special tokens written in the text
        ("[MASK] in a sentence", "the capital of france is [MASK].", None),
        ("all special tokens written in text", "[CLS] a [SEP] b [PAD] [UNK] [MASK]", None),
        ("special tokens glued to words", "x[SEP]y[MASK]z", None),
        ("lowercase or spaced special tokens are text", "[mask] [ MASK ] [MASK", None),
        ("special tokens with accents around", "Élan[MASK]é", None),
        # SST-2-like text with trailing space
        ("SST-2 sentence with its trailing space", "it 's a charming and often affecting journey . ", None),
    ]
    out = [(name, text, pair, True, None, None) for name, text, pair in rows]
    out.append(("no special tokens", "Hello, World!", None, False, None, None))
    out.append(("no special tokens, spaces only", " ", None, False, None, None))

    # pairs
    six = "one two three four five six"
    two = "seven eight"
    pairs = [
        ("pair without truncation", six, two, None),
        ("pair with an empty second text", "hello world", "", None),
        ("pair of empty texts", "", "", None),
        ("pair longest_first M=8 (6, 2) tokenizers docs example", six, two, 8),
        ("pair longest_first M=8 (2, 6)", two, six, 8),
        ("pair longest_first M=10 equal lengths (4, 4)", "a b c d", "e f g h", 10),
        ("pair longest_first M=10 (8, 4)", "a b c d e f g h", "i j k l", 10),
        ("pair longest_first M=10 (4, 8)", "a b c d", "e f g h i j k l", 10),
        ("pair longest_first M=9 (10, 10)", "a b c d e f g h i j", "k l m n o p q r s t", 9),
        ("pair longest_first M=5 (5, 1)", "a b c d e", "f", 5),
        ("pair longest_first M=3 leaves only special tokens", "a b c", "d e f", 3),
        ("pair longest_first M=4 (odd budget 1)", "a b c", "d e f", 4),
        ("pair longest_first cuts inside a split word", "unbelievably tokenization", "preprocessing", 6),
        ("pair longest_first with accents and CJK", "Café crème brûlée", "東京タワー", 9),
        ("pair longest_first M=512 no cut", six, two, 512),
    ]
    for name, a, b, m in pairs:
        out.append((name, a, b, True, m, None))
    out.append(("pair without special tokens keeps $B type id", six, two, False, None, None))
    out.append(("pair without special tokens, truncated", six, two, False, 5, None))

    # single-sequence truncation
    out.append(("single truncated to 5", "one two three four five six", None, True, 5, None))
    out.append(("single truncated to 2 keeps [CLS] [SEP]", "one two", None, True, 2, None))
    out.append(("single truncation cuts after word pieces", "unbelievably tokenization", None, True, 4, None))

    # padding
    out.append(("padding to max_length 12", "hello world", None, True, 12, {"length": 12}))
    out.append(("padding pair to max_length 16", "hello", "world", True, 16, {"length": 16}))
    out.append(("padding to a multiple of 8", "one two three four five", None, True, None, {"pad_to_multiple_of": 8}))
    out.append(("padding of an empty text to 4", "", None, True, 4, {"length": 4}))
    out.append(("truncation and padding to 6", "one two three four five six seven", None, True, 6, {"length": 6}))
    return out


def batches():
    return [
        ("empty and whitespace-only input (tokenizers' BertPreTokenizer) batch", ["", "hello"], None),
        ("mixed lengths", ["a", "a b c d e f", "Héllo wörld!", "[MASK]"], None),
        ("mixed lengths, multiple of 8", ["a", "a b c d e f g h i j"], 8),
    ]


def encode_case(tok, text, pair, add_special, max_length, padding):
    tok.no_truncation()
    tok.no_padding()
    if max_length is not None:
        tok.enable_truncation(max_length=max_length, strategy="longest_first")
    if padding is not None:
        pad_id = tok.token_to_id("[PAD]")
        tok.enable_padding(pad_id=pad_id, pad_token="[PAD]", length=padding.get("length"),
                           pad_to_multiple_of=padding.get("pad_to_multiple_of"))
    if pair is None:
        enc = tok.encode(text, add_special_tokens=add_special)
    else:
        enc = tok.encode(text, pair, add_special_tokens=add_special)
    return {
        "ids": enc.ids,
        "type_ids": enc.type_ids,
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
        "offsets": [list(o) for o in enc.offsets],
        "tokens": enc.tokens,
    }


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    print(f"wrote {path} ({len(data)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="bert-base-uncased tokenizer.json")
    ap.add_argument("--sst2", required=True, help="SST-2 dev.tsv (header sentence<TAB>label)")
    ap.add_argument("--out", default="testdata/tokenizer", help="output directory")
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    os.makedirs(args.out, exist_ok=True)
    meta = {"tokenizers_version": tokenizers.__version__, "tokenizer": os.path.basename(args.tokenizer)}

    # (a) SST-2 dev ids
    with open(args.sst2, "r", encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0].rstrip("\r") != "sentence\tlabel":
        sys.exit(f"{args.sst2}: expected the header 'sentence<TAB>label', got {lines[:1]!r}")
    sentences = [line.rstrip("\r").rsplit("\t", 1)[0] for line in lines[1:]]
    tok.no_truncation()
    tok.no_padding()
    encs = tok.encode_batch(sentences)
    buf = io.StringIO()
    buf.write(json.dumps(dict(meta, source=os.path.basename(args.sst2), count=len(sentences))) + "\n")
    for e in encs:
        buf.write(json.dumps(e.ids, separators=(",", ":")) + "\n")
    gz = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=gz, mtime=0, compresslevel=9) as g:
        g.write(buf.getvalue().encode("utf-8"))
    write_atomic(os.path.join(args.out, "hf_sst2_dev_ids.jsonl.gz"), gz.getvalue())

    # (b) edge cases and padded batches
    cases = []
    for name, text, pair, add_special, max_length, padding in edge_cases():
        row = {"name": name, "text": text, "pair": pair, "add_special_tokens": add_special,
               "max_length": max_length, "padding": padding}
        row.update(encode_case(tok, text, pair, add_special, max_length, padding))
        cases.append(row)
    out_batches = []
    for name, texts, multiple in batches():
        tok.no_truncation()
        tok.no_padding()
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]", pad_to_multiple_of=multiple)
        encs = tok.encode_batch(texts)
        out_batches.append({"name": name, "texts": texts, "pad_to_multiple_of": multiple,
                            "ids": [e.ids for e in encs], "attention_mask": [e.attention_mask for e in encs]})
    tok.no_padding()
    doc = dict(meta, cases=cases, batches=out_batches)
    write_atomic(os.path.join(args.out, "hf_edge_cases.json"),
                 (json.dumps(doc, ensure_ascii=True, indent=1) + "\n").encode("utf-8"))
    print(f"{len(sentences)} SST-2 sentences, {len(cases)} edge cases, {len(out_batches)} batches "
          f"(tokenizers {tokenizers.__version__})")


if __name__ == "__main__":
    main()
