package tabbyctl

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/status"
	observeclient "github.com/tabbynet/tabby/observe/client"
	"github.com/tabbynet/tabby/ui"
	"github.com/tabbynet/tabby/ui/uifake"
)

// `tabbyctl ui` prints the page's address, serves the view there and stops cleanly with its
// context.
func TestUICommand(t *testing.T) {
	b := &uifake.Backend{}
	b.SetBGP([]status.NodeReply{{Node: "node-1", Reply: &status.PeersReply{Node: "node-1", ASN: 64512}}}, nil)
	outR, outW := io.Pipe()
	a := &app{Streams: Streams{Out: outW, Err: io.Discard}}
	cmd := a.uiCommand(func(context.Context, observeclient.Options) (ui.Backend, error) { return b, nil })
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()

	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(line, "tabby web view: ")
	url, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("tabbyctl ui printed %q, want the page's address", line)
	}
	resp, err := http.Get(url + "api/topology")
	if err != nil {
		t.Fatal(err)
	}
	var topo ui.Topology
	err = json.NewDecoder(resp.Body).Decode(&topo)
	resp.Body.Close()
	if err != nil || len(topo.Nodes) != 1 || topo.Nodes[0].ID != "node-1" {
		t.Fatalf("topology from %s: %+v, %v", url, topo, err)
	}
	// An open flow stream does not hold the command up.
	stream, err := http.Get(url + "api/flows")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("tabbyctl ui stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tabbyctl ui did not stop within 30s of its context")
	}
}
