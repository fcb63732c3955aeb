// Package errctx adds context to an error once. Each tune package prefixes its messages with its name
// ("loaders: dev.tsv:3: unknown label ..."), and a caller that wraps such an error adds its own prefix and
// context; with fmt.Errorf the message then stutters ("recipes: data.train: loaders: dev.tsv:3: ...",
// "recipes: lora: lora: r must be ..."). Wrap drops the inner package prefixes, so the message carries the
// outermost package and every layer's context once ("recipes: data.train: dev.tsv:3: unknown label ..."),
// while errors.Is and errors.As still reach the wrapped error.
//
// Use it where a package wraps an error from a package below it:
//
//	ds, err := loaders.LoadDataset(path, opts)
//	if err != nil {
//		return errctx.Wrap("recipes: data.train", err) // "recipes: data.train: dev.tsv:3: unknown label ..."
//	}
//
// Wrapf formats the context (errctx.Wrapf(err, "recipes: load %s", dir)); Trim strips the prefixes from a
// message alone. The prefixes removed are those of tune's own packages (amp, atomicfile, chat, cuda, generate, hub,
// loaders, lora, recipes, sft, tensor, tokenizers, trainer, transformer), repeatedly, so "loaders: lora: x" becomes "x"; another library's
// prefix is kept, as it says where the error came from.
package errctx
