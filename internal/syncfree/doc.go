// Package syncfree is the one switch of the training steps that make no host wait (docs/CUDA.md): the CUDA
// backend's host copy of uploaded ids, the Trainer's and tune bench's steps that keep the loss and the gradient
// norm on the device. TUNE_SYNC_FREE=1 turns them on; until they are verified on a GPU they are off by default.
package syncfree
