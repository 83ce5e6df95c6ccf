package tabbyctl

import "testing"

// --netns takes a namespace by the name `ip netns list` prints, or by its file.
func TestNetnsPath(t *testing.T) {
	for in, want := range map[string]string{
		"tl-ab12-node-1":            "/run/netns/tl-ab12-node-1",
		"/run/netns/tl-ab12-node-1": "/run/netns/tl-ab12-node-1",
		"/proc/4242/ns/net":         "/proc/4242/ns/net",
		"./ns":                      "./ns",
	} {
		if got := netnsPath(in); got != want {
			t.Errorf("netnsPath(%q) = %q, want %q", in, got, want)
		}
	}
}
