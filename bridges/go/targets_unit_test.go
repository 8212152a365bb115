package agentnet

import (
	"strings"
	"testing"
)

// One address (after dropping empties and repeats) dials as given; several
// become a private resolver's target whose first address is the authority.
func TestResolveTargets(t *testing.T) {
	for _, tc := range []struct {
		target string
		more   []string
		want   string
		opts   int
	}{
		{"127.0.0.1:1", nil, "127.0.0.1:1", 0},
		{"dns:///hub.internal:50051", nil, "dns:///hub.internal:50051", 0},
		{"127.0.0.1:1", []string{"127.0.0.1:1", " "}, "127.0.0.1:1", 0},
		{"", []string{"hub-b.internal:2"}, "hub-b.internal:2", 0},
		{"127.0.0.1:1", []string{"hub-b.internal:2"}, targetsScheme + ":///127.0.0.1:1", 1},
		{"", []string{"[::1]:1", "127.0.0.1:2"}, targetsScheme + ":///[::1]:1", 1},
	} {
		got, opts, err := resolveTargets(tc.target, tc.more)
		if err != nil || got != tc.want || len(opts) != tc.opts {
			t.Errorf("resolveTargets(%q, %q) = %q, %d options, %v; want %q, %d", tc.target, tc.more, got, len(opts), err, tc.want, tc.opts)
		}
	}
	for _, tc := range []struct {
		target string
		more   []string
		says   string
	}{
		{"", nil, "hub target is empty"},
		{"", []string{"", " "}, "all empty"},
		{"127.0.0.1:1", []string{"hub-b"}, `"hub-b"`},
		{"dns:///hub:1", []string{"127.0.0.1:2"}, `"dns:///hub:1"`},
	} {
		_, _, err := resolveTargets(tc.target, tc.more)
		if !IsReason(err, ReasonInvalidArgument) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("resolveTargets(%q, %q): %v; want INVALID_ARGUMENT saying %s", tc.target, tc.more, err, tc.says)
		}
	}
}
