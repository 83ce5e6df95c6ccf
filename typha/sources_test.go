package typha

import (
	"maps"
	"slices"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
)

// tabby-typha serves exactly the kinds the agents send to it (client.FannedOut): a kind the
// agents fan out that it did not serve would fail over to the API server on every agent.
func TestSourcesAreTheFannedOutKinds(t *testing.T) {
	c, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := sources(c)
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, s := range srcs {
		served = append(served, s.resource.Resource)
	}
	slices.Sort(served)
	if want := slices.Sorted(maps.Keys(client.FannedOut)); !slices.Equal(served, want) {
		t.Fatalf("tabby-typha serves %v, the agents fan out %v", served, want)
	}
}
