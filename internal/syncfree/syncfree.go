package syncfree

import "os"

// Enabled reports whether steps without host waits are on: unless TUNE_SYNC_FREE=0 (read at each call).
func Enabled() bool { return os.Getenv("TUNE_SYNC_FREE") != "0" }
