package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"workflow", "workflow", 0},
		{"workflw", "workflow", 1},  // a deletion
		{"worklfow", "workflow", 2}, // a swap is two edits
		{"kitten", "sitting", 3},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"bucket", "prefix", "region", "endpoint"}
	for _, tc := range []struct {
		name    string
		maxDist int
		want    string
	}{
		{"bucke", 1, "bucket"},
		{"regoin", 2, "region"},
		{"regoin", 1, ""}, // too far
		{"zzz", 2, ""},
		{"prefx", 2, "prefix"},
	} {
		if got := Closest(tc.name, keys, tc.maxDist); got != tc.want {
			t.Errorf("Closest(%q, %d) = %q, want %q", tc.name, tc.maxDist, got, tc.want)
		}
	}
	// Equally near: the first candidate wins.
	if got := Closest("ab", []string{"xb", "ax"}, 1); got != "xb" {
		t.Errorf("tie: got %q, want the first, xb", got)
	}
}
