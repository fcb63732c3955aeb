package syncfree

import (
	"log/slog"
	"os"
	"strings"
	"sync"
)

// warned makes Enabled warn about an unknown TUNE_SYNC_FREE value once.
var warned sync.Once

// Enabled reports whether steps without host waits are on (read at each call): yes unless TUNE_SYNC_FREE is
// 0, false, off or no (any case). Another value than those or 1, true, on, yes keeps them on, with a warning
// naming it once.
func Enabled() bool {
	v := os.Getenv("TUNE_SYNC_FREE")
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "false", "off", "no":
		return false
	case "", "1", "true", "on", "yes":
		return true
	}
	warned.Do(func() {
		slog.Warn("TUNE_SYNC_FREE=" + v + " is not 0/1, false/true, off/on or no/yes: steps without host waits stay on (TUNE_SYNC_FREE=0 turns them off)")
	})
	return true
}
