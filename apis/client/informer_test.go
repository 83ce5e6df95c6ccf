package client

import (
	"testing"

	"k8s.io/client-go/util/watchlist"
)

// The informers of tabby's custom resources list and then watch (see listWatch); those of the
// core resources keep client-go's streaming lists, which spare memory on 30,000 pods.
func TestOnlyCustomResourcesListAndWatch(t *testing.T) {
	c := &Client{}
	for name, declines := range map[string]bool{
		"ipamblocks":          watchlist.DoesClientNotSupportWatchListSemantics(c.IPAMBlocks().informerSource()),
		"ippools":             watchlist.DoesClientNotSupportWatchListSemantics(c.IPPools().informerSource()),
		"bgppeers":            watchlist.DoesClientNotSupportWatchListSemantics(c.BGPPeers().informerSource()),
		"bgpfilters":          watchlist.DoesClientNotSupportWatchListSemantics(c.BGPFilters().informerSource()),
		"bgpconfigurations":   watchlist.DoesClientNotSupportWatchListSemantics(c.BGPConfigurations().informerSource()),
		"felixconfigurations": watchlist.DoesClientNotSupportWatchListSemantics(c.FelixConfigurations().informerSource()),
	} {
		if !declines {
			t.Errorf("the %s informer asks for streaming lists", name)
		}
	}
	for name, declines := range map[string]bool{
		"pods":  watchlist.DoesClientNotSupportWatchListSemantics(c.Pods("").informerSource()),
		"nodes": watchlist.DoesClientNotSupportWatchListSemantics(c.Nodes().informerSource()),
	} {
		if declines {
			t.Errorf("the %s informer does not stream its list", name)
		}
	}
}
