package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process: it parses args, prints the findings to stdout and a summary or an
// error to stderr, and returns the exit status (0 clean, 1 findings, 2 usage or parse error).
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("doccheck", flag.ContinueOnError)
	fl.SetOutput(stderr)
	members := fl.Bool("members", true, "require a comment on exported fields of exported structs and methods of exported interfaces")
	docGo := fl.Bool("docgo", true, "require each package's comment to be in its doc.go")
	var skip []string
	fl.Func("skip", "leave out this directory and everything below it (repeatable, or comma-separated)", func(s string) error {
		skip = append(skip, strings.Split(s, ",")...)
		return nil
	})
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: doccheck [-members=false] [-docgo=false] [-skip DIR] [packages]   (default ./...)")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	patterns := fl.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	findings, err := check(patterns, skip, Options{Members: *members, DocGo: *docGo})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(stderr, "doccheck: %d finding(s)\n", len(findings))
		return 1
	}
	return 0
}
