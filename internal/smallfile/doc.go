// Package smallfile reads the files of a model folder that are small by nature (config.json,
// tokenizer_config.json, generation_config.json, chat_template.jinja: a few KB in real models), refusing one
// larger than MaxBytes before reading it: a 150 MB config.json took 9 s and 750 MB to parse, a 100 MB chat
// template 24 s and 2.1 GB, and memory should follow the recipe, never values in a file. ReadCapped does the same with a
// cap of the caller's, for the files that are large by nature (tokenizer.json, vocab.txt), and refuses a file
// that is not a regular one (a symbolic link to /dev/zero) before opening it.
package smallfile
