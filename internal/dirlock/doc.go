// Package dirlock gives one process at a time a directory: tune finetune and Trainer.Train hold a lock on
// output_dir for the whole run, so that a second run on the same directory is refused instead of replacing
// the first one's model, optimizer and checkpoints and interleaving its metrics.jsonl.
//
// The lock is an advisory flock(2) on the file Name inside the directory, which also records the holder (pid,
// host, start time, command line) for the message a refused run prints. The kernel drops the lock when its
// process ends, however it ends, so a lock file left by a killed run is recognised as stale, reported
// (Lock.Stale) and replaced: removed, and a new file created with O_EXCL in its place, so that nothing is
// written into a file tune did not create. The lock path is never followed: a symbolic link there (or a folder,
// a FIFO) is refused with a *NotLockFileError for the user to remove. Within one process a directory's lock is
// shared: Acquire on a directory the process already holds returns another handle on the same lock.
//
//	lk, err := dirlock.Acquire(outputDir)
//	var held *dirlock.HeldError
//	if errors.As(err, &held) {
//		return err // "runs/x is in use by another tune run (pid 4242 on host gpu1, started ...)"
//	}
//	defer lk.Release()
//
// On systems without flock (Windows) Acquire creates the directory and returns a handle that locks nothing.
package dirlock
