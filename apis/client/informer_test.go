package client

import (
	"testing"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// tabby's informers list and then watch (see listWatch): client-go's reflector asks for a
// streaming list unless its ListerWatcher declines.
func TestInformersDoNotStreamLists(t *testing.T) {
	if !watchlist.DoesClientNotSupportWatchListSemantics(listWatch{&cache.ListWatch{}}) {
		t.Fatal("the informers' ListWatch accepts streaming lists")
	}
}
