// Package badinput marks the errors whose cause is the input the user gave tune: the contents of a file it was
// asked to read (a data file's row, a config.json key, a safetensors header, tokenizer files, a checkpoint that
// fails its checksum) or a file that does not fit another (config.json vs the weights' shapes). cmd/tune exits
// with status 2 for them, as for a wrong flag or recipe key: the input must change before a rerun can succeed.
// An error that is not marked is a failure of the run itself (status 1): an I/O error, a full disk, a diverging
// loss, memory that is not there.
//
// The loaders mark their errors where they are made, and the mark survives any wrapping that keeps the chain
// (fmt.Errorf's %w, errctx.Wrap):
//
//	return badinput.Errorf("loaders: %s:%d: %d columns, expected %d", path, line, n, want)
//	...
//	if badinput.Is(err) { // in cmd/tune: exit status 2
//
// An error type can mark itself instead by a method BadInput() bool that returns true.
package badinput
