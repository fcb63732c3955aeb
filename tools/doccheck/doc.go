// Command doccheck lists the exported identifiers of Go packages that have no doc comment, doc comments that
// do not start with the identifier's name, and packages without a package comment. It exits 1 when it finds
// any, 2 on a usage or parse error, 0 otherwise. `make lint` runs it over the repository:
//
//	go run ./tools/doccheck -skip tools/reference ./...
//
// Findings print as go vet prints them, one a line:
//
//	trainer/args.go:65:2: field TrainingArguments.AdamBeta2 has no comment
//
// # Rules
//
// Checked: exported functions; exported methods of exported types (methods of unexported types are left out,
// they are reachable only through an interface that documents them); exported types; exported constants and
// variables. Each needs a doc comment that starts with its name, optionally after "A ", "An " or "The "
// (golint's rule); the name must end there ("Opener ..." does not document Open). A constant or variable in a
// parenthesized group is documented by its own comment, a line comment after it or the group's comment, and
// the wording of these is not checked; a type in a group needs its own comment unless it is the group's only
// type. A compiler directive alone (//go:noinline) is not a doc comment.
//
// With -members (on by default), every exported field of an exported struct type and every method of an
// exported interface type needs a comment above it or at the end of its line; its wording is free ("// in
// bytes"). A comment above a run of members on consecutive lines also documents the later members of the run
// that it names as words ("// Train, Eval and Test are data files." over three fields); a blank line ends the
// run. Embedded fields and embedded interfaces are documented by their own types and skipped. This is
// stricter than golint on purpose: tune's option structs and wire formats (TrainingArguments,
// trainer_state.json, GemmArgs) are read field by field, and a field is where units and shapes are stated.
//
// Each package needs a package comment in exactly one file, starting "Package name " (a command's may start
// with anything, "Command tune ..." or "Tune fine-tunes ..."). With -docgo (on by default) that file must be
// doc.go, where the package's tour lives.
//
// Left out: _test.go files, generated files ("// Code generated ... DO NOT EDIT."), files built only under
// the tag ignore (generator programs), and directories named testdata or vendor or starting with "." or "_",
// as the go command leaves them out, plus any -skip directory. Files of every other build tag are checked
// together, so both cuda's stub.go and its cgo files must document what they declare.
//
// It uses only go/parser and go/ast: no type checking, so it runs on code that does not build.
package main
