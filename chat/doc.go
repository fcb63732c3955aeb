// Package chat renders a model's Jinja chat template as transformers' apply_chat_template does
// (transformers/utils/chat_template_utils.py render_jinja_template), so that tune trains on, and generates
// from, the exact text the model was tuned with.
//
// Simplest use:
//
//	cfg, _ := tokenizers.LoadConfig("path/to/model") // tokenizer_config.json, chat_template.jinja
//	tmpl, err := chat.FromConfig(cfg)
//	text, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true})
//
// The template sees what transformers passes: messages, tools (none unless given), documents (none),
// add_generation_prompt, the special tokens of tokenizer_config.json (bos_token, eos_token, unk_token,
// pad_token; a token the file leaves null is undefined, as in transformers), any extra keyword arguments
// (enable_thinking, date_string, ...), and the globals raise_exception and strftime_now. The engine is
// github.com/ardanlabs/jinja, a pure-Go Jinja aimed at chat templates: trim_blocks and lstrip_blocks as
// transformers sets them, loop variables, namespace(), slicing, the string methods templates call, tojson
// with Python's separators. Messages and tools decoded from JSON keep their key order (ParseJSON), so
// tojson writes them as Python's json.dumps does.
//
// The engine has no sandbox, so Compile instruments the compiled template (patch.go) to stay within the
// limits of limits.go (MaxRange, MaxDepth, MaxLoopIterations, MaxOutput, MaxBuilt, MaxNesting), as
// transformers renders in jinja2's sandbox; a template past one fails with an Error.
//
// An undefined value (a variable not set, a missing key, an index out of range) behaves as jinja2's default
// Undefined, which transformers renders with: it prints as "", is false and iterates as empty, but reading an
// attribute or item of it, calling it, arithmetic and ordering comparisons with it fail with jinja2's
// UndefinedError message ("'foo' is undefined") and the template line (undefined.go).
//
// A template that calls raise_exception fails with an error holding its message (Error), which callers
// report with the file and line of the conversation.
package chat
