package meta_test

import (
	"errors"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/meta"
)

// TestMeta: tensors of any size cost nothing and are counted; views and other backends' tensors are not;
// the build-time ops accept meta tensors, the compute ops and Download refuse with ErrMeta.
func TestMeta(t *testing.T) {
	target := cpu.New()
	b := meta.New(target)
	if !tensor.IsMeta(b) || tensor.IsMeta(target) || tensor.MetaTarget(b) != target || tensor.MetaTarget(target) != nil {
		t.Fatal("IsMeta / MetaTarget do not tell the meta backend from its target")
	}
	if b.Name() != "meta:cpu" || meta.New(nil).Name() != "meta" {
		t.Errorf("names %q, %q", b.Name(), meta.New(nil).Name())
	}
	huge, err := b.Alloc(tensor.BF16, 1<<20, 1<<20) // 2 TiB
	if err != nil {
		t.Fatal(err)
	}
	small, _ := b.Alloc(tensor.F32, 3, 5)
	if b.Bytes() != 2<<40+60 {
		t.Errorf("Bytes = %d, want 2 TiB + 60", b.Bytes())
	}
	view, _ := huge.View(8, 4)
	b.Free(view)
	foreign, _ := target.Alloc(tensor.F32, 15)
	b.Free(foreign)
	if err := b.Fill(foreign, 0); err == nil {
		t.Error("Fill accepted another backend's tensor")
	}
	if b.Bytes() != 2<<40+60 {
		t.Errorf("freeing a view or a foreign tensor changed Bytes to %d", b.Bytes())
	}
	for name, err := range map[string]error{
		"Upload": b.Upload(small, make([]float32, 15)), "Fill": b.Fill(huge, 1), "Cast": b.Cast(view, view),
		"Copy": b.Copy(small, small), "Scale": b.Scale(huge, 2), "Synchronize": b.Synchronize(),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := b.Download(make([]float32, 15), small); !errors.Is(err, meta.ErrMeta) {
		t.Errorf("Download: %v, want ErrMeta", err)
	}
	if err := b.GELU(small, small); !errors.Is(err, meta.ErrMeta) {
		t.Errorf("GELU: %v, want ErrMeta", err)
	}
	if _, err := b.GlobalNorm([]*tensor.Tensor{small}); !errors.Is(err, meta.ErrMeta) {
		t.Errorf("GlobalNorm: %v, want ErrMeta", err)
	}
	b.Free(huge)
	b.Free(huge) // a second Free is harmless
	b.Free(small)
	if b.Bytes() != 0 || b.Peak() != 2<<40+60 {
		t.Errorf("after freeing everything: Bytes %d, Peak %d", b.Bytes(), b.Peak())
	}
}
