package ui

import (
	"cmp"
	"slices"
	"time"

	"github.com/tabbynet/tabby/bird/status"
)

// Topology is the BGP mesh as the page draws it: vertices (tabby nodes and the routers they
// peer with) and one edge per session as one end reports it. A session between two tabby nodes
// is two edges, one from each end, each with what that end received, accepted and sent.
type Topology struct {
	Nodes []Vertex `json:"nodes"`
	Edges []Edge   `json:"edges"`
	// Errors are the nodes that did not answer, with why, by node name.
	Errors []NodeError `json:"errors,omitempty"`
}

// Vertex kinds.
const (
	KindNode     = "node"     // a tabby node
	KindExternal = "external" // a router that is not a tabby node (a ToR, an external reflector)
)

// Vertex is a BGP speaker.
type Vertex struct {
	// ID is the node's name for a tabby node, "peer/" and the address for a router.
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Name     string `json:"name"` // the node's name or the router's address
	RouterID string `json:"routerID,omitempty"`
	ASN      uint32 `json:"asn,omitempty"`
	// RouteReflector is set when the speaker reflects routes for at least one client.
	RouteReflector bool `json:"routeReflector,omitempty"`
	// Answered is false for a tabby node that did not answer (Error says why) or that only
	// appears as another node's peer.
	Answered   bool     `json:"answered"`
	Error      string   `json:"error,omitempty"`
	Advertised int      `json:"advertised,omitempty"` // the node's own prefixes
	Learned    int      `json:"learned,omitempty"`    // best paths in its dataplane
	Problems   []string `json:"problems,omitempty"`
}

// Edge is one session as the node From reports it.
type Edge struct {
	From    string `json:"from"` // the reporting node's vertex ID
	To      string `json:"to"`   // the peer's vertex ID
	Address string `json:"address"`
	// Type is the peer's role as status.PeerStatus gives it (mesh, global, node-specific,
	// route-reflector, route-reflector-client).
	Type     string                `json:"type"`
	State    string                `json:"state"`
	Since    time.Time             `json:"since,omitzero"`
	Info     string                `json:"info,omitempty"`
	BFD      string                `json:"bfd,omitempty"`
	Received uint64                `json:"received"`
	Accepted uint64                `json:"accepted"`
	Sent     uint64                `json:"sent"`
	Families []status.FamilyRoutes `json:"families,omitempty"`
}

// NodeError is a node that did not answer.
type NodeError struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// ExternalID is the vertex ID of a router that is not a tabby node.
func ExternalID(address string) string { return "peer/" + address }

// BuildTopology derives the graph from every node's BGP status. A node is a route reflector
// when it reports a route-reflector client, or another node reports it as its reflector; a
// router that is not a tabby node is one vertex however many nodes peer with it. Vertices are
// sorted (tabby nodes first, then routers, by ID) and edges by (From, To), so a refreshed
// page keeps its layout.
func BuildTopology(replies []status.NodeReply) Topology {
	t := Topology{Nodes: []Vertex{}, Edges: []Edge{}}
	byID := map[string]*Vertex{}
	vertex := func(id, kind, name string) *Vertex {
		if v, ok := byID[id]; ok {
			return v
		}
		v := &Vertex{ID: id, Kind: kind, Name: name}
		byID[id] = v
		return v
	}
	for _, r := range replies {
		if r.Reply == nil {
			v := vertex(r.Node, KindNode, r.Node)
			v.Error = r.Err
			if v.Error == "" {
				v.Error = "no reply"
			}
			t.Errors = append(t.Errors, NodeError{Node: r.Node, Error: v.Error})
			continue
		}
		p := r.Reply
		name := cmp.Or(r.Node, p.Node)
		v := vertex(name, KindNode, name)
		v.Answered = true
		v.Error = ""
		v.RouterID, v.ASN = p.RouterID, p.ASN
		v.Advertised, v.Learned = p.RoutesAdvertised, p.RoutesLearned
		v.Problems = p.Problems
		for _, peer := range p.Peers {
			var to *Vertex
			if peer.Node != "" {
				to = vertex(peer.Node, KindNode, peer.Node)
			} else {
				to = vertex(ExternalID(peer.Address), KindExternal, peer.Address)
			}
			// A node that answered gave its own ASN; its peers' view fills in for one that did not.
			if !to.Answered && to.ASN == 0 {
				to.ASN = peer.ASN
			}
			switch peer.Type {
			case "route-reflector-client":
				v.RouteReflector = true
			case "route-reflector":
				to.RouteReflector = true
			}
			t.Edges = append(t.Edges, Edge{
				From: v.ID, To: to.ID, Address: peer.Address, Type: peer.Type,
				State: peer.State, Since: peer.Since, Info: peer.Info, BFD: peer.BFD,
				Received: peer.RoutesReceived, Accepted: peer.RoutesAccepted, Sent: peer.RoutesSent,
				Families: peer.Families,
			})
		}
	}
	for _, v := range byID {
		t.Nodes = append(t.Nodes, *v)
	}
	slices.SortFunc(t.Nodes, func(a, b Vertex) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.ID, b.ID))
	})
	slices.SortStableFunc(t.Edges, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Address, b.Address))
	})
	slices.SortFunc(t.Errors, func(a, b NodeError) int { return cmp.Compare(a.Node, b.Node) })
	return t
}

func kindOrder(k string) int {
	if k == KindNode {
		return 0
	}
	return 1
}
