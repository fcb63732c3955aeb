// Package testutil holds helpers for tune's tests: locating the repository and the shared data beside it, and
// keeping what code under test caches out of the user's home.
//
// A test that needs real data asks for it by name and is skipped, with a message saying where the data is
// looked for, when it is absent:
//
//	path := testutil.SharedData(t, "sst2", "dev.tsv")        // ../shared/data/sst2/dev.tsv, or $TUNE_SHARED_DATA/...
//	golden := testutil.Testdata(t, "bert", "tiny_bert_random.safetensors") // the repository's testdata/
//
// RepoRoot finds the directory holding go.mod from any package's test, so paths do not depend on the package
// directory. IsolateCache points the user cache directory at a temporary one for the rest of the test (the
// unpacked embedded recipes, compiled CUDA kernels); it uses t.Setenv, so such a test cannot be parallel.
package testutil
