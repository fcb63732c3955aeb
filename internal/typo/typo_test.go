package typo

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "abc", 0}, {"", "abc", 3}, {"learnig_rate", "learning_rate", 1}, {"lora_aplha", "lora_alpha", 1},
		{"kitten", "sitting", 3}, {"text-colum", "text-column", 1}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"learning_rate", "lr_scheduler_type", "max_steps"}
	for _, c := range []struct{ name, want string }{
		{"learnig_rate", "learning_rate"}, {"max_step", "max_steps"}, {"seed", ""}, {"", ""},
	} {
		if got := Closest(c.name, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
