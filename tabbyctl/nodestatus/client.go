package nodestatus

import (
	"context"
	"fmt"
	"strings"

	"github.com/tabbynet/tabby/bird/status"
)

// birdSource adapts bird/status's client (the BGP speaker's status service) to Source.
type birdSource struct{ c *status.Client }

func (b birdSource) Status(ctx context.Context) (Status, error) {
	reply, err := b.c.Peers(ctx)
	if err != nil {
		return Status{}, err
	}
	out := Status{Peers: make([]Peer, len(reply.Peers)), Problems: reply.Problems,
		Multipath: reply.RoutesMultipath, Learned: reply.Learned, LearnedMore: reply.LearnedMore,
		ServiceRoutes: reply.ServiceRoutes, Services: reply.Services, ServicesMore: reply.ServicesMore}
	for i, p := range reply.Peers {
		out.Peers[i] = FromStatus(p)
	}
	return out, nil
}

// peerTypes are calicoctl's words for the session types, which operators grep for.
var peerTypes = map[string]string{
	"mesh":                   "node-to-node mesh",
	"global":                 "global",
	"node-specific":          "node specific",
	"route-reflector":        "route reflector",
	"route-reflector-client": "rr client",
}

// FromStatus turns a session of the status service into a row: STATE is BIRD's protocol state as
// calicoctl shows it (up once Established, start while trying, down when it cannot be opened),
// INFO the BGP FSM state and the last error.
func FromStatus(p status.PeerStatus) Peer {
	typ := peerTypes[p.Type]
	if typ == "" {
		typ = p.Type
	}
	state, info := "start", capitalize(p.State)
	switch strings.ToLower(p.State) {
	case "established":
		state = "up"
	case "not configured":
		state, info = "down", "Not configured"
	}
	if p.Info != "" {
		info += " " + p.Info
	}
	var routes, families []string
	for _, f := range p.Families {
		routes = append(routes, familyRoutes(f))
		families = append(families, f.Family)
	}
	if len(routes) == 0 {
		routes = []string{"-"}
	}
	return Peer{Address: p.Address, Type: typ, State: state, Since: p.Since, Info: info, Routes: strings.Join(routes, " "), Filters: p.Filters, BFD: p.BFD, Families: families}
}

// familyRoutes is one family of a session as the ROUTES column shows it, like the "Routes:"
// line of `birdc show protocols all` per channel: received/accepted/sent when negotiated, and
// why nothing travels otherwise.
func familyRoutes(f status.FamilyRoutes) string {
	switch f.State {
	case status.FamilyUp:
		return fmt.Sprintf("%s %d/%d/%d", f.Family, f.Received, f.Accepted, f.Sent)
	case status.FamilyNotNegotiated:
		return f.Family + " not negotiated"
	case status.FamilyOffered:
		return f.Family + " -"
	}
	// A tabby-node that predates the per-family state does not count what it accepted.
	return fmt.Sprintf("%s %d/?/%d", f.Family, f.Received, f.Sent)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Dial opens the status socket.
func Dial(socket string) (Source, func(), error) {
	c, err := status.Dial(socket)
	if err != nil {
		return nil, nil, err
	}
	return birdSource{c}, func() { c.Close() }, nil
}
