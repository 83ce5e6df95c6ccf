package ui

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tabbynet/tabby/bird/status"
)

func TestBuildTopology(t *testing.T) {
	fams := []status.FamilyRoutes{{Family: "ipv4", State: status.FamilyUp, Received: 2, Accepted: 2, Sent: 1}}
	reply := func(node, rid string, asn uint32, peers ...status.PeerStatus) status.NodeReply {
		return status.NodeReply{Node: node, Reply: &status.PeersReply{Node: node, RouterID: rid, ASN: asn, Peers: peers, RoutesAdvertised: 1, RoutesLearned: 2}}
	}
	mesh := func(node, addr, state string) status.PeerStatus {
		return status.PeerStatus{Address: addr, ASN: 64512, Type: "mesh", Node: node, State: state,
			RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams}
	}
	node := func(name, rid string, asn uint32) Vertex {
		return Vertex{ID: name, Kind: KindNode, Name: name, RouterID: rid, ASN: asn, Answered: true, Advertised: 1, Learned: 2}
	}
	edge := func(from, to, addr, typ, state string) Edge {
		return Edge{From: from, To: to, Address: addr, Type: typ, State: state, Received: 2, Accepted: 2, Sent: 1, Families: fams}
	}
	tor := status.PeerStatus{Address: "203.0.113.1", ASN: 64513, Type: "global", Source: "bgppeer/tor", State: "established", BFD: "up",
		RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams}
	torEdge := func(from string) Edge {
		e := edge(from, "peer/203.0.113.1", "203.0.113.1", "global", "established")
		e.BFD = "up"
		return e
	}
	torVertex := Vertex{ID: "peer/203.0.113.1", Kind: KindExternal, Name: "203.0.113.1", ASN: 64513}

	for _, tc := range []struct {
		name    string
		replies []status.NodeReply
		want    Topology
	}{{
		name: "no nodes",
		want: Topology{Nodes: []Vertex{}, Edges: []Edge{}},
	}, {
		name: "full mesh and a ToR every node peers with: one vertex for the ToR, an edge per session end",
		replies: []status.NodeReply{
			reply("node-2", "198.51.100.12", 64512, mesh("node-1", "198.51.100.11", "established"), tor),
			reply("node-1", "198.51.100.11", 64512, tor, mesh("node-2", "198.51.100.12", "established")),
		},
		want: Topology{
			Nodes: []Vertex{node("node-1", "198.51.100.11", 64512), node("node-2", "198.51.100.12", 64512), torVertex},
			Edges: []Edge{
				edge("node-1", "node-2", "198.51.100.12", "mesh", "established"), torEdge("node-1"),
				edge("node-2", "node-1", "198.51.100.11", "mesh", "established"), torEdge("node-2"),
			},
		},
	}, {
		name: "a node that does not answer is a vertex with its error, its ASN from a peer's view",
		replies: []status.NodeReply{
			reply("node-1", "198.51.100.11", 64512, mesh("node-3", "198.51.100.13", "active")),
			{Node: "node-3", Err: "dial node-3: connection refused"},
			{Node: "node-4"},
		},
		want: Topology{
			Nodes: []Vertex{
				node("node-1", "198.51.100.11", 64512),
				{ID: "node-3", Kind: KindNode, Name: "node-3", ASN: 64512, Error: "dial node-3: connection refused"},
				{ID: "node-4", Kind: KindNode, Name: "node-4", Error: "no reply"},
			},
			Edges:  []Edge{edge("node-1", "node-3", "198.51.100.13", "mesh", "active")},
			Errors: []NodeError{{Node: "node-3", Error: "dial node-3: connection refused"}, {Node: "node-4", Error: "no reply"}},
		},
	}, {
		name: "a peer's own reply overrides what others say of it",
		replies: []status.NodeReply{
			reply("node-1", "198.51.100.11", 64512, status.PeerStatus{Address: "198.51.100.12", ASN: 65000, Type: "node-specific", Node: "node-2", State: "established",
				RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams}),
			reply("node-2", "198.51.100.12", 64999),
		},
		want: Topology{
			Nodes: []Vertex{node("node-1", "198.51.100.11", 64512), node("node-2", "198.51.100.12", 64999)},
			Edges: []Edge{edge("node-1", "node-2", "198.51.100.12", "node-specific", "established")},
		},
	}, {
		name: "route reflectors: a node reflecting for clients, one its client names, an external reflector",
		replies: []status.NodeReply{
			reply("rr-1", "198.51.100.1", 64512, status.PeerStatus{Address: "198.51.100.11", ASN: 64512, Type: "route-reflector-client", Node: "node-1", State: "established",
				RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams}),
			reply("node-1", "198.51.100.11", 64512,
				status.PeerStatus{Address: "198.51.100.1", ASN: 64512, Type: "route-reflector", Node: "rr-1", State: "established",
					RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams},
				status.PeerStatus{Address: "198.51.100.2", ASN: 64512, Type: "route-reflector", Node: "rr-2", State: "connect",
					RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams},
				status.PeerStatus{Address: "203.0.113.9:1179", ASN: 64512, Type: "route-reflector", State: "idle", Info: "connection refused",
					RoutesReceived: 2, RoutesAccepted: 2, RoutesSent: 1, Families: fams}),
		},
		want: Topology{
			Nodes: []Vertex{
				node("node-1", "198.51.100.11", 64512),
				func() Vertex { v := node("rr-1", "198.51.100.1", 64512); v.RouteReflector = true; return v }(),
				{ID: "rr-2", Kind: KindNode, Name: "rr-2", ASN: 64512, RouteReflector: true},
				{ID: "peer/203.0.113.9:1179", Kind: KindExternal, Name: "203.0.113.9:1179", ASN: 64512, RouteReflector: true},
			},
			Edges: []Edge{
				func() Edge {
					e := edge("node-1", "peer/203.0.113.9:1179", "203.0.113.9:1179", "route-reflector", "idle")
					e.Info = "connection refused"
					return e
				}(),
				edge("node-1", "rr-1", "198.51.100.1", "route-reflector", "established"),
				edge("node-1", "rr-2", "198.51.100.2", "route-reflector", "connect"),
				edge("rr-1", "node-1", "198.51.100.11", "route-reflector-client", "established"),
			},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := BuildTopology(tc.replies)
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tc.want, "", " ")
				t.Errorf("BuildTopology:\ngot  %s\nwant %s", g, w)
			}
		})
	}
}
