package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/recipes"
)

func init() { register(newLsCmd) }

// lsOptions holds `tune ls`'s flags (none yet; the struct keeps the command shape of the others).
type lsOptions struct{}

func newLsCmd() *cobra.Command {
	o := &lsOptions{}
	return &cobra.Command{
		Use:   "ls",
		Short: "List the recipes embedded in tune",
		Long: `ls lists the recipes built into the tune binary, with what each one does and the inputs it needs. Run
one by name (tune finetune tiny). A recipe that needs nothing (tiny: its data is embedded) runs from any
directory; the others name a checkpoint and data files by paths relative to the repository's recipes/
directory, so elsewhere give them as overrides (tune finetune bert model.path=DIR data.train=FILE
data.eval=FILE), or copy the recipe and edit its paths (tune cp bert my-bert.yaml). The same files are in
the repository's recipes/ directory.`,
		Example: `  tune ls
  tune cp bert my-bert.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("ls takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout()) },
	}
}

func (o *lsOptions) run(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tNEEDS\tDESCRIPTION")
	example := ""
	for _, r := range recipes.List() {
		needs := "nothing (runs anywhere)"
		if len(r.Needs) > 0 {
			needs = strings.Join(r.Needs, ", ")
			if example == "" {
				kv := make([]string, len(r.Needs))
				for i, k := range r.Needs {
					kv[i] = k + "=DIR"
					if strings.HasPrefix(k, "data.") {
						kv[i] = k + "=FILE"
					}
				}
				example = "tune finetune " + r.Name + " " + strings.Join(kv, " ")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, needs, r.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if example != "" {
		_, err := fmt.Fprintf(w, "\nNEEDS are inputs that are not embedded; give them as overrides, e.g.\n  %s\n", example)
		return err
	}
	return nil
}
