package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/typo"
	"github.com/tune-ml/tune/recipes"
)

// Exit codes of the tune command (documented in `tune --help`).
const (
	exitOK        = 0   // success
	exitError     = 1   // the command failed while running (I/O, a diverging loss, ...)
	exitUsage     = 2   // the input is wrong: flags, arguments, recipe keys or values, a file's contents (badinput)
	exitNoDevice  = 3   // the requested device is not available
	exitInterrupt = 130 // 128 + SIGINT; SIGTERM gives 143 (interruptCode)
)

// usageError marks an error caused by how the command was called; run maps it to exitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// commands holds the constructors of the subcommands; each command's file adds its own in init.
var commands []func() *cobra.Command

func register(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "tune",
		Short: "Fine-tune Transformer models, fully or with LoRA, in FP32, FP16 or BF16 mixed precision",
		Long: `tune fine-tunes Hugging Face Transformer checkpoints fully or with LoRA adapters: BERT-class encoders for
sequence classification, and Llama, Mistral, Qwen2/3 and GPT-2 decoders for supervised fine-tuning (SFT) on
text or chat JSONL; in FP32 or in FP16/BF16 mixed precision, on NVIDIA GPUs (cuBLASLt) or on the CPU, from a
YAML recipe.
Outputs (model.safetensors, PEFT adapters, tokenizer files) load unchanged in Hugging Face tools.

Exit codes: 0 success; 1 the command failed while running (an I/O error, a full disk, a diverging loss,
memory that is not there); 2 the input is wrong and must change: flags, arguments, recipe keys or values, or
the contents of a file tune reads (a data row, config.json, safetensors weights, tokenizer files,
adapter_config.json, a damaged checkpoint); 3 the requested device is not available; 130 interrupted by
Ctrl-C (SIGINT), 143 stopped by SIGTERM (128 + the signal, as a shell reports it; finetune handles both
alike: the step in flight ends and the message names the last checkpoint).`,
		Example: `  tune finetune recipes/tiny.yaml
  tune finetune --bf16 recipes/bert.yaml model.path=checkpoints/bert-base-uncased
  tune download bert-base-uncased && tune finetune recipes/bert.yaml model.path=bert-base-uncased
  tune ls`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("tune {{.Version}}\n")
	for _, c := range commands {
		root.AddCommand(c())
	}
	markArgErrorsAsUsage(root)
	failUnknownHelpTopics(root)
	return root
}

// failUnknownHelpTopics makes `tune help nosuch` bad usage (exit 2, cobra's "unknown command" message with its
// suggestions), as `tune nosuch` is: cobra's own help command prints "Unknown help topic" and succeeds.
func failUnknownHelpTopics(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, help := range root.Commands() {
		if help.Name() != "help" || help.Run == nil {
			continue
		}
		show := help.Run
		help.Run = nil
		help.RunE = func(c *cobra.Command, args []string) error {
			if _, _, err := c.Root().Find(args); err != nil {
				return usageError{err}
			}
			show(c, args)
			return nil
		}
	}
}

// markArgErrorsAsUsage wraps the argument check of cmd and of every command below it so that its error (cobra's
// own, such as NoArgs' "unknown command", or the command's) is a usageError: exit status 2.
func markArgErrorsAsUsage(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				return usageError{err}
			}
			return err
		}
	}
	for _, sub := range cmd.Commands() {
		markArgErrorsAsUsage(sub)
	}
}

// flagHint adds to cobra's "unknown flag: --name" what the user most likely meant: a flag of the same command
// one typo away (--text-colum), the same input under this command's name (eval's --data is predict's
// --input), or, for the commands that take a recipe, the recipe key given as a flag (Hugging Face's example
// scripts take TrainingArguments as --learning_rate; tune takes key=value overrides, also dotted ones:
// --training.learning_rate).
func flagHint(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	var flags []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	if other, ok := sameInput[name]; ok && slices.Contains(flags, other) {
		return fmt.Errorf("%w: tune %s takes it as --%s", err, cmd.Name(), other)
	}
	if c := typo.Closest(name, flags); c != "" {
		return fmt.Errorf("%w: did you mean --%s?", err, c)
	}
	if cmd.Name() != "finetune" && cmd.Name() != "validate" {
		return err
	}
	key := strings.ReplaceAll(name, "-", "_")
	last := key[strings.LastIndex(key, ".")+1:]
	if path := recipes.KeyPath(last); path != "" && (path == key || last == key) {
		return fmt.Errorf("%w: recipe keys are key=value arguments, not flags: write %s=VALUE (as in tune %s RECIPE %s=VALUE)",
			err, path, cmd.Name(), path)
	}
	return err
}

// sameInput maps a flag of one command to the flag another command takes the same input as.
var sameInput = map[string]string{"data": "input", "input": "data"}

// revision is the commit the binary was built from when the build says so (the Makefile's
// -ldflags "-X main.revision=..."): go build stamps no VCS information under -buildvcs=false (GOFLAGS), or
// outside a git checkout it can read, and --version then said only "(devel)" (tester7 F12).
var revision string

// version returns the module version and VCS revision the binary was built from (runtime/debug build info,
// else revision).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = revision
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	return v + " " + bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int { return runIn(args, nil, stdout, stderr) }

// runIn is run with stdin as the commands' standard input (nil: the process's).
func runIn(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stopSignal.Store(0)
	root := newRootCmd()
	root.SetArgs(args)
	if stdin != nil {
		root.SetIn(stdin)
	}
	out := &outWriter{w: stdout}
	root.SetOut(out)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{flagHint(c, err)} })
	cmd, err := root.ExecuteC()
	if out.err != nil && !errors.Is(err, context.Canceled) {
		// Output that did not reach standard output (a full disk, a closed pipe) is a failed command, whatever
		// the command made of the write's error: tune eval and tune inspect ignored it and exited 0 with the
		// metrics lost, tune --version exited 2 (bad usage) (tester10 T10-10).
		if err != nil {
			fmt.Fprintln(stderr, "tune:", errctx.Trim(err.Error()))
		} else {
			fmt.Fprintf(stderr, "%s: writing the results to standard output: %v\n", cmd.CommandPath(), writeProblem(out.err))
		}
		return exitError
	}
	if err == nil {
		return exitOK
	}
	// The message without tune's package prefixes ("tune: data.train: ...", not "tune: recipes: data.train:
	// ..."): which Go package reported it is no help to a user.
	fmt.Fprintln(stderr, "tune:", errctx.Trim(err.Error()))
	var ue usageError
	switch {
	case errors.As(err, &ue), badinput.Is(err):
		// Flags, arguments, recipe keys, or the contents of a file tune read (a data row, config.json, a
		// safetensors header, tokenizer files): the input must change before a rerun can succeed.
		return exitUsage
	case cmd == root:
		// The root runs nothing itself: its only errors are cobra's unknown command ("tune bogus").
		return exitUsage
	case isNoDevice(err):
		return exitNoDevice
	case errors.Is(err, context.Canceled):
		return interruptCode()
	}
	return exitError
}

// outWriter is the commands' standard output: it records the first error of a write, and refuses every write
// after it with the same error, so that runIn fails a command whose output was lost even when the command did
// not check what its writes returned.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = err
	}
	return n, err
}

// writeProblem is the operating system's reason for a failed write ("no space left on device"), without the
// file's name of an *fs.PathError ("write /dev/stdout: ..."), which runIn's message says in words.
func writeProblem(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
