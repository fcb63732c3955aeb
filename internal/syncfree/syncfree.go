package syncfree

import "os"

// Enabled reports whether TUNE_SYNC_FREE asks for steps without host waits (read at each call).
func Enabled() bool { return os.Getenv("TUNE_SYNC_FREE") == "1" }
