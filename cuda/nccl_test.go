//go:build cuda

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNCCLShim builds a fake libnccl.so.2 (testdata/fakenccl.c, NCCL 2.x's signatures) and checks the shim
// against it: the override variable, symbol binding, the 128-byte id made by ncclGetUniqueId and handed back
// by value to ncclCommInitRank, NCCL's own error strings in the errors, and the async-error poll.
func TestNCCLShim(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	t.Setenv("TUNE_NCCL", "/nonexistent/libnccl.so.2")
	if _, err := libNCCL.open(); err == nil || !strings.Contains(err.Error(), "TUNE_NCCL=/nonexistent/libnccl.so.2") {
		t.Fatalf("open with a missing override: %v", err)
	}
	so := filepath.Join(t.TempDir(), "libnccl.so.2")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", so, "testdata/fakenccl.c").CombinedOutput(); err != nil {
		t.Fatalf("building the fake NCCL: %v\n%s", err, out)
	}
	t.Setenv("TUNE_NCCL", so)
	path, v, err := NCCLVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v != 22803 || !strings.Contains(path, so) {
		t.Errorf("NCCLVersion = %q, %d; want %s, 22803", path, v, so)
	}
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range id {
		if b != byte(i*3+1) {
			t.Fatalf("id[%d] = %d, want %d", i, b, byte(i*3+1))
		}
	}
	h, err := initRank(id, 2, 1, "test")
	if err != nil {
		t.Fatalf("initRank with the id from NewUniqueID: %v", err)
	}
	c := &Comm{comm: h, rank: 1, nranks: 2}
	if err := c.AsyncError(); err == nil || !strings.Contains(err.Error(), "remote process exited") {
		t.Errorf("AsyncError on the fake's failing rank = %v, want NCCL's remote-error string", err)
	}
	if err := c.Abort(); err != nil {
		t.Error(err)
	}
	if err := c.AsyncError(); err != nil {
		t.Errorf("AsyncError after Abort = %v, want nil", err)
	}
	if err := c.AllReduce(Sum); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("AllReduce after Abort = %v, want an aborted error", err)
	}
	id[127]++ // a corrupted id (e.g. a short read in the rendezvous) is refused by NCCL
	_, err = initRank(id, 2, 0, "test")
	if err == nil || !strings.Contains(err.Error(), "ncclCommInitRank: invalid argument (fake) (4)") || !strings.Contains(err.Error(), "fake last error") {
		t.Errorf("initRank with a corrupted id = %v", err)
	}
	_ = os.Remove(so)
}
