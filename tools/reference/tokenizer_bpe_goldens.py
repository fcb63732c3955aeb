#!/usr/bin/env python3
"""BPE tokenizer goldens from Hugging Face tokenizers for tune's tokenizers package.

Run on the machine that has `tokenizers` (0.23.x) and `transformers` installed; it needs no network:

    python3 tools/reference/tokenizer_bpe_goldens.py --out testdata/bpe [--real DIR ...]

1. It trains three small tokenizers on a synthetic corpus (deterministic: the BPE trainer breaks ties by
   order) and writes each as OUT/NAME/tokenizer.json:
     tiny-gpt2  GPT-2 style: ByteLevel pre-tokenizer with the GPT-2 regex, ByteLevel decoder and
                post-processor, <|endoftext|> special, a non-special added token and an lstrip special.
     tiny-smol  SmolLM2 style: Sequence[Digits(individual), ByteLevel(add_prefix_space)], TemplateProcessing
                "<s> $A </s>" (pairs "<s> $A </s> $B:1 </s>:1"), ignore_merges.
     tiny-sp    SentencePiece (Llama 2 / Mistral) style: Metaspace(prepend_scheme "first"), BPE with
                byte_fallback and fuse_unk over a limited alphabet, <0x00>..<0xFF> byte tokens,
                Replace/ByteFallback/Fuse/Strip decoder, TemplateProcessing "<s> $A".
2. For each of them and each --real directory (a tokenizer.json as shipped, e.g. Llama 2, Llama 3, Qwen3) it
   encodes every text of texts() and writes OUT/goldens/NAME.json:
     {"tokenizers_version", "name", "cases": [{"text", "ids", "tokens", "ids_plain", "decoded_plain",
      "decoded_skip"}], "pairs": [{"text", "pair", "ids", "type_ids"}], "decode_each": {"text", "pieces"}}
   ids use add_special_tokens=True, ids_plain add_special_tokens=False; decoded_plain is
   decode(ids_plain, skip_special_tokens=False), decoded_skip is decode(ids, skip_special_tokens=True);
   decode_each decodes the ids of one emoji/CJK text one token at a time (partial UTF-8 becomes U+FFFD).
"""

import argparse
import json
import os

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers


def corpus():
    words = ("the quick brown fox jumps over the lazy dog while a wizard quietly hums and jovial people "
             "sing about zebras, numbers and code in the morning light").split()
    lines = []
    for i in range(400):
        w = [words[(i * 7 + k * 3) % len(words)] for k in range(8 + i % 5)]
        if i % 3 == 0:
            w[0] = w[0].capitalize()
        lines.append(" ".join(w) + (". " if i % 2 else "! ") + str(i * 37 % 1000))
    lines += ["def f(x):\n    return x * 2  # double\n", "for i in range(10):\n\tprint(i)\n",
              "It's what they're saying: we'll see, I'm sure you've heard, she'd go.",
              "Hello world! Hello there, hello again.", "café naïve résumé", "日本語 中文 한국어"]
    return lines


def train_gpt2():
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"], show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(corpus(), tr)
    tk.add_tokens([AddedToken("<tool>", normalized=False, special=False)])
    tk.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return tk


def train_smol():
    tk = Tokenizer(models.BPE(ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>"]
    tr = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(corpus(), tr)
    s, e = tk.token_to_id("<s>"), tk.token_to_id("</s>")
    tk.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                      special_tokens=[("<s>", s), ("</s>", e)])
    return tk


def train_sp():
    tk = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    tr = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                             limit_alphabet=60)
    tk.train_from_iterator(corpus(), tr)
    # Insert the 256 byte tokens after the specials, as SentencePiece's byte_fallback vocabularies have them.
    j = json.loads(tk.to_str())
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for t, _ in old[:3]:
        vocab[t] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in old[3:]:
        if t not in vocab:
            vocab[t] = len(vocab)
    j["model"]["vocab"] = vocab
    for a in j["added_tokens"]:
        a["id"] = vocab[a["content"]]
    tk = Tokenizer.from_str(json.dumps(j))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                      special_tokens=[("<s>", vocab["<s>"])])
    return tk


def texts(specials):
    sp = list(specials) + ["<s>"] * (2 - len(specials))
    t = [
        "Hello world", "Hello", "hello", " Hello  world  ", "Hello\n\nworld\n", "   leading spaces",
        "trailing spaces   ", "multiple    spaces\t\ttabs\r\nCRLF\r\n", "a\u00a0b\u3000c\u2003d\u2028e\u0085f",
        "I'm here, they're gone; we'll see. It's JOHN'S car, DON'T I'LL WE'VE.", "'s 'S 'ſ 'K 'k",
        "Numbers: 1234567890 3.14159 -42 1e10 2024-07-26 1,000,000 ١٢٣",
        "emoji 😀🎉👍🏽 family 👨\u200d👩\u200d👧 flag 🇫🇷",
        "中文测试，日本語のテキスト、한국어 텍스트", "café naïve résumé ﬁ Ωmega cafe\u0301 e\u0300\u0323",
        "def f(x):\n    return x**2  # square\n\tif x>0: print('hi')\n",
        "for (int i = 0; i < n; ++i) { a[i] += b[i] * 2; } // C++\n",
        '{"key": [1, 2, 3], "nested": {"a": null}}', "https://example.com/path?q=1&r=two#frag",
        "tab\x00null\x07bell\u200bzwsp\ufeffbom", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ᚠᛇᚻ ∮ E⋅da = Q", "Ünïcödé ÀÉÎÕÜ ß ẞ",
        "a" * 300, "supercalifragilisticexpialidocious" * 5, " " * 17, "\n" * 5, " \n \n ", "x\n\n\n y",
        "", " ", "\n", "!", "...!!!???", "<<>>{{}}", "  ▁already has ▁metaspace ▁ ▁▁",
        "The quick brown fox jumps over the lazy dog.",
        sp[0] + "Hello" + sp[1] + " world " + sp[0], "text " + sp[1] + "\n" + sp[0] + " spaced " + sp[1] + " ",
        "<tool> call <tool>x <mask> masked  <mask>", "<s>[INST] hi [/INST] there</s>",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    ]
    return t


def goldens(name, tk):
    specials = [a.content for a in tk.get_added_tokens_decoder().values() if a.special][:2]
    cases = []
    for text in texts(specials):
        e = tk.encode(text, add_special_tokens=True)
        p = tk.encode(text, add_special_tokens=False)
        cases.append({"text": text, "ids": e.ids, "tokens": e.tokens, "ids_plain": p.ids,
                      "decoded_plain": tk.decode(p.ids, skip_special_tokens=False),
                      "decoded_skip": tk.decode(e.ids, skip_special_tokens=True)})
    pairs = []
    for a, b in [("Hello world", "How are you?"), ("", "only second"), ("first 1 2", "")]:
        e = tk.encode(a, b, add_special_tokens=True)
        pairs.append({"text": a, "pair": b, "ids": e.ids, "type_ids": e.type_ids})
    each_text = "emoji 😀 中文 ᚠ"
    ids = tk.encode(each_text, add_special_tokens=False).ids
    return {"tokenizers_version": tokenizers.__version__, "name": name, "cases": cases, "pairs": pairs,
            "decode_each": {"text": each_text, "ids": ids, "pieces": [tk.decode([i]) for i in ids]}}


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--real", nargs="*", default=[], help="NAME=DIR with a tokenizer.json")
    a = ap.parse_args()
    toks = {}
    for name, fn in [("tiny-gpt2", train_gpt2), ("tiny-smol", train_smol), ("tiny-sp", train_sp)]:
        tk = fn()
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        tk.save(os.path.join(d, "tokenizer.json"), pretty=False)
        toks[name] = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    for spec in a.real:
        name, d = spec.split("=", 1)
        toks[name] = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    for name, tk in toks.items():
        write_json(os.path.join(a.out, "goldens", name + ".json"), goldens(name, tk))
        print(name, "vocab", tk.get_vocab_size(), "ok", flush=True)

    # What transformers' AutoTokenizer gives for the same files (it may add BOS from tokenizer_config.json).
    try:
        import transformers
        info = {"transformers_version": transformers.__version__, "tokenizers": {}}
        for spec in a.real:
            name, d = spec.split("=", 1)
            at = transformers.AutoTokenizer.from_pretrained(d)
            info["tokenizers"][name] = {"class": type(at).__name__, "cases": [
                {"text": t, "ids": at(t)["input_ids"]} for t in ["Hello world", " Hello", "a\n\nb"]]}
        write_json(os.path.join(a.out, "goldens", "transformers_autotokenizer.json"), info)
    except Exception as ex:  # informative only
        print("transformers AutoTokenizer comparison failed:", repr(ex))


if __name__ == "__main__":
    main()
