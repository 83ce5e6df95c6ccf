package dataplane

import (
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

func TestRouteProtocolMatchesAPI(t *testing.T) {
	if RouteProtocol != v1.RouteProtocol {
		t.Fatalf("dataplane.RouteProtocol %d != v1.RouteProtocol %d", RouteProtocol, v1.RouteProtocol)
	}
}
