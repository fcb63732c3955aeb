// Package atomicfile writes files and directories so that a reader, a crash or a kill never sees them half
// written: everything goes into a temporary file or directory beside the destination, which is flushed to disk
// and renamed into place only when complete. On any error the temporary is removed and whatever was at the
// destination before is left as it was.
//
// The simplest use writes a byte slice:
//
//	err := atomicfile.WriteFile(path, data, 0o644)
//
// Write streams through a buffered writer instead (a safetensors file, a JSONL stream):
//
//	err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return enc.Encode(v) })
//
// WriteNew is Write for a file that must not replace anything: the complete temporary is hard-linked to the
// destination, which fails with fs.ErrExist if a file appeared there in the meantime (a check before writing
// followed by a rename would silently replace it).
//
// Dir and ReplaceDir build a whole directory (a checkpoint, a merged model) the same way: the build function
// fills a temporary directory, which is renamed to the destination when build returns nil.
//
// Every error names the destination path ("writing /out/model.safetensors: no space left on device") and, like
// an *fs.PathError, carries no package prefix: the caller adds its own ("loaders: %w"). Errors from the caller's
// write or build function are wrapped the same way with %w, so errors.Is still finds them.
//
// Temporary names are TempPrefix + the destination's base name + "-" + a random suffix, in the destination's
// directory, so a caller can recognise (and remove) what a killed process left behind.
package atomicfile
