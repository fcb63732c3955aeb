package syncfree

import "testing"

func TestEnabled(t *testing.T) {
	for v, want := range map[string]bool{"": true, "1": true, "true": true, "On": true, "yes": true,
		"0": false, "false": false, "OFF": false, "no": false, " 0 ": false, "banana": true} {
		t.Setenv("TUNE_SYNC_FREE", v)
		if got := Enabled(); got != want {
			t.Errorf("TUNE_SYNC_FREE=%q: Enabled() = %v, want %v", v, got, want)
		}
	}
}
