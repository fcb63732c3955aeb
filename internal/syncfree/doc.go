// Package syncfree is the one switch of the training steps that make no host wait (docs/CUDA.md): the CUDA
// backend's host copy of uploaded ids, the Trainer's and tune bench's steps that keep the loss and the gradient
// norm on the device. They are on by default (verified on an H200: 0 host waits per step, the same losses);
// TUNE_SYNC_FREE=0 turns them off (each step then reads its loss and gradient norm, and checks its ids, at once).
package syncfree
