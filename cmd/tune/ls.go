package main

import (
	"fmt"
	"io"
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
		Long: `ls lists the recipes built into the tune binary, with what each one does. Run one by name from any
directory (tune finetune tiny), or copy it to edit (tune cp tiny my.yaml). The same files are in the
repository's recipes/ directory.`,
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
	fmt.Fprintln(tw, "RECIPE\tDESCRIPTION")
	for _, r := range recipes.List() {
		fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Description)
	}
	return tw.Flush()
}
