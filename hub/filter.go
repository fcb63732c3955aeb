package hub

import (
	"path"
	"regexp"
	"strings"
)

// pickleExts are the files torch.load unpickles (arbitrary code runs when they are read): never fetched unless
// Options.AllowPickle is set.
var pickleExts = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"}

// otherWeightExts are weights of frameworks tune does not read (TensorFlow, Flax, ONNX, Rust, Core ML, GGUF):
// fetched only when an Options.Include pattern names them.
var otherWeightExts = []string{".h5", ".msgpack", ".onnx", ".onnx_data", ".ot", ".tflite", ".mlmodel", ".gguf", ".npz"}

// Skipped is a repository file Download left out, and why.
type Skipped struct {
	// Name is the file's path in the repository.
	Name string
	// Why says what left it out and how to fetch it anyway.
	Why string
}

// selectFiles splits the repository's files into those to fetch and those left out, in the repository's order.
func selectFiles(files []string, o Options) (fetch []string, skipped []Skipped) {
	include := globs(o.Include)
	for _, f := range files {
		ext := strings.ToLower(path.Ext(f))
		named := len(include) > 0 && matchAny(include, f)
		switch {
		case len(include) > 0 && !named:
			skipped = append(skipped, Skipped{f, "not matched by --include"})
		case hasExt(ext, pickleExts) && !o.AllowPickle:
			skipped = append(skipped, Skipped{f, "a pickle file, which runs code when loaded and tune does not read; --allow-pickle fetches it"})
		case hasExt(ext, otherWeightExts) && !named:
			skipped = append(skipped, Skipped{f, "weights of another framework, which tune does not read; --include '" + f + "' fetches it"})
		default:
			fetch = append(fetch, f)
		}
	}
	return fetch, skipped
}

func hasExt(ext string, exts []string) bool {
	for _, e := range exts {
		if ext == e {
			return true
		}
	}
	return false
}

// globs returns the patterns' globRegexp.
func globs(patterns []string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range patterns {
		out = append(out, globRegexp(p))
	}
	return out
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// globRegexp translates a shell glob as Python's fnmatch does (huggingface_hub filters allow_patterns with
// fnmatch): '*' matches any run of characters, '/' included, '?' one character, [seq] a class ([!seq] its
// complement); a pattern ending in '/' matches everything under that folder, as huggingface_hub's
// filter_repo_objects adds '*' to it.
func globRegexp(glob string) *regexp.Regexp {
	if strings.HasSuffix(glob, "/") {
		glob += "*"
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(glob[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil { // an odd class; match the pattern literally
		return regexp.MustCompile("^" + regexp.QuoteMeta(glob) + "$")
	}
	return re
}
