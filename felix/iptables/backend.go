package iptables

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/felix/cmdrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Backend names an iptables flavour: the legacy x_tables or nf_tables behind the same syntax.
type Backend string

const (
	BackendAuto   Backend = ""
	BackendLegacy Backend = "legacy"
	BackendNFT    Backend = "nft"
)

// Valid tells whether b is a backend name felix accepts (auto included).
func (b Backend) Valid() bool {
	return b == BackendAuto || b == BackendLegacy || b == BackendNFT
}

// Command is the binary of one family and backend, with an optional suffix ("-save",
// "-restore"): iptables-nft-restore, ip6tables-legacy-save.
func Command(fam ipfamily.Family, b Backend, suffix string) string {
	return fam.IPTablesCommand() + "-" + string(b) + suffix
}

// DetectBackend picks the flavour the host already uses, as kube-proxy and Calico do: the one
// holding more rules in either family (kube-proxy's chains count), else the one `iptables`
// itself is. Rules in the other flavour would still run, but in an order neither side controls.
func DetectBackend(ctx context.Context, r cmdrun.Runner) Backend {
	count := func(b Backend) int {
		n, ok := 0, false
		for _, fam := range ipfamily.All {
			out, err := r.Run(ctx, Command(fam, b, "-save"), nil, nil)
			if err != nil {
				continue
			}
			ok = true
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "-A ") || strings.HasPrefix(line, ":KUBE-") {
					n++
				}
			}
		}
		if !ok {
			return -1
		}
		return n
	}
	legacy, nft := count(BackendLegacy), count(BackendNFT)
	switch {
	case legacy > nft:
		return BackendLegacy
	case nft > legacy:
		return BackendNFT
	}
	if out, err := r.Run(ctx, ipfamily.IPv4.IPTablesCommand(), []string{"--version"}, nil); err == nil && strings.Contains(string(out), "legacy") {
		return BackendLegacy
	}
	return BackendNFT
}

// Features are what the installed iptables can express.
type Features struct {
	// RandomFully: MASQUERADE --random-fully (iptables 1.6.2 and later), which avoids the
	// source-port collisions that drop the first packet of parallel connections.
	RandomFully bool
}

var versionRE = regexp.MustCompile(`v(\d+)\.(\d+)\.(\d+)`)

// DetectFeatures asks the binary of fam and b for its version.
func DetectFeatures(ctx context.Context, r cmdrun.Runner, fam ipfamily.Family, b Backend) (Features, error) {
	name := Command(fam, b, "")
	out, err := r.Run(ctx, name, []string{"--version"}, nil)
	if err != nil {
		return Features{}, fmt.Errorf("iptables backend %s: %w", b, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Features{}, fmt.Errorf("%s --version: no version in %q", name, strings.TrimSpace(string(out)))
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	atLeast := func(a, b, c int) bool {
		if v[0] != a {
			return v[0] > a
		}
		if v[1] != b {
			return v[1] > b
		}
		return v[2] >= c
	}
	return Features{RandomFully: atLeast(1, 6, 2)}, nil
}
