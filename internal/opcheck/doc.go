// Package opcheck holds the argument rules that every tensor.Backend implementation (tensor/cpu, cuda) must
// apply identically, so that a misuse gets the same error, word for word, whichever backend runs it.
//
// Each function returns nil or an error wrapping one of tensor's sentinels (ErrArgument, ErrShape, ErrDType,
// ErrBackend) with a message that names the argument; the backend wraps it in a *tensor.OpError naming the op
// and its arguments' shapes. A backend keeps its own chaining checker and records these errors in it:
//
//	c.record(opcheck.View("x", x, owner, opcheck.Floats...))
//	n, ch, err := opcheck.Rows("x", x)
//
// The rules: View (a live, in-range view of a buffer of this backend, of an allowed dtype), Numel, Rows, IDs
// (index values in range), GemmGeometry (tensor.GemmArgs defaults, leading dimensions and strides) and AdamW
// (hyperparameters and segments).
package opcheck
