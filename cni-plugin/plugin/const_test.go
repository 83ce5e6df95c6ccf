package plugin

import (
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

func TestIPIPModesMatchAPI(t *testing.T) {
	if IPIPModeAlways != string(v1.IPIPModeAlways) || IPIPModeCrossSubnet != string(v1.IPIPModeCrossSubnet) {
		t.Fatalf("IPIP mode constants drifted from apis/v1")
	}
}
