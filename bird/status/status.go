// Package status is the BGP status service of tabby-node on its unix socket, and the client
// `tabbyctl node status` uses. Messages are JSON (internal/grpcjson): no protoc in the build.
package status

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/tabbynet/tabby/internal/grpcjson"
)

// DefaultSocket is where tabby-node serves the status.
const DefaultSocket = "/var/run/tabby/bird.sock"

const (
	serviceName = "tabby.bird.Status"
	peersMethod = "/" + serviceName + "/Peers"
)

// PeerStatus is one BGP session.
type PeerStatus struct {
	Address string `json:"address"` // 198.51.100.2 or 198.51.100.2:1179
	ASN     uint32 `json:"asn"`
	// Type: mesh, global, node-specific, route-reflector (the peer reflects for us),
	// route-reflector-client (we reflect for the peer).
	Type   string `json:"type"`
	Node   string `json:"node,omitempty"`   // the peer's tabby node, empty for a router
	Source string `json:"source,omitempty"` // mesh or bgppeer/NAME
	// State: idle, connect, active, opensent, openconfirm, established, or "not configured"
	// when the session cannot be opened (Info says why).
	State          string    `json:"state"`
	Since          time.Time `json:"since,omitzero"`
	Info           string    `json:"info,omitempty"` // last error, graceful restart in progress, ...
	RoutesReceived uint64    `json:"routesReceived"` // what the peer sent, every family
	RoutesAccepted uint64    `json:"routesAccepted"` // what the import policy let in
	RoutesSent     uint64    `json:"routesSent"`
	// Families are the address families the session carries, each with its routes.
	Families []FamilyRoutes `json:"families,omitempty"`
	// Filters are the BGPFilters applied to the session, in order.
	Filters []string `json:"filters,omitempty"`
	// BFD is the session's BFD state (up, init, down, admin down), empty without BFD;
	// BFDDowns counts the times BFD declared the peer down.
	BFD      string `json:"bfd,omitempty"`
	BFDDowns uint64 `json:"bfdDowns,omitempty"`
}

// FamilyRoutes is one address family of a session.
type FamilyRoutes struct {
	Family string `json:"family"` // ipv4 or ipv6 (unicast)
	// State is FamilyUp, FamilyNotNegotiated or FamilyOffered; empty from a tabby-node that
	// predates it (then Accepted is unknown too).
	State    string `json:"state,omitempty"`
	Received uint64 `json:"received"` // what the peer sent, before the import policy
	Accepted uint64 `json:"accepted"` // what the import policy let in
	Sent     uint64 `json:"sent"`
}

// FamilyRoutes.State values.
const (
	FamilyUp            = "up"             // negotiated on the established session
	FamilyNotNegotiated = "not negotiated" // we offer it, the peer did not: nothing travels
	FamilyOffered       = "offered"        // the session is not established: nothing negotiated yet
)

// PeersRequest asks for the sessions.
type PeersRequest struct{}

// PeersReply lists the sessions and route counts of the node.
type PeersReply struct {
	Node             string       `json:"node"`
	RouterID         string       `json:"routerID"`
	ASN              uint32       `json:"asn"`
	Peers            []PeerStatus `json:"peers"`
	RoutesAdvertised int          `json:"routesAdvertised"` // our own prefixes
	RoutesLearned    int          `json:"routesLearned"`    // best paths handed to the dataplane
	// RoutesMultipath counts the learned routes over several equal-cost paths (ECMP).
	RoutesMultipath int `json:"routesMultipath"`
	// Learned are the learned routes over several paths and those outside the pools (an
	// external router's, such as a default route), by prefix, at most MaxLearnedShown.
	Learned []LearnedRoute `json:"learned,omitempty"`
	// LearnedMore counts those left out of Learned.
	LearnedMore int `json:"learnedMore,omitempty"`
	// ServiceRoutes counts the host routes this node announces for Services.
	ServiceRoutes int `json:"serviceRoutes,omitempty"`
	// Services are the Services this node announces, or would announce if it had a ready
	// endpoint of theirs (externalTrafficPolicy Local), by key, at most MaxServicesShown.
	Services []ServiceRoutes `json:"services,omitempty"`
	// ServicesMore counts those left out of Services.
	ServicesMore int `json:"servicesMore,omitempty"`
	// Problems are what keeps a configured session from existing (a BGPPeer naming an IPv6
	// address on a node without IPv6, a duplicate address, a bad selector).
	Problems []string `json:"problems,omitempty"`
}

// NodeReply is one node's status as a cluster-wide reader (tabbyctl, the web view) collects
// it: the reply, or why the node did not answer.
type NodeReply struct {
	Node  string      `json:"node"`
	Reply *PeersReply `json:"reply,omitempty"`
	Err   string      `json:"error,omitempty"`
}

// LearnedRoute is a learned route as the dataplane got it.
type LearnedRoute struct {
	Prefix   string   `json:"prefix"`
	NextHops []string `json:"nextHops"`           // the best path's first
	External bool     `json:"external,omitempty"` // outside the pools, from an external router
}

// ServiceRoutes are what a node announces for one Service and why.
type ServiceRoutes struct {
	Service  string   `json:"service"` // namespace/name
	Prefixes []string `json:"prefixes,omitempty"`
	Reason   string   `json:"reason"`
}

// MaxServicesShown bounds PeersReply.Services.
const MaxServicesShown = 500

// MaxLearnedShown bounds PeersReply.Learned: a status answers in the same time on a node that
// routes every block over two ToRs.
const MaxLearnedShown = 100

// Source produces the reply; bird.Bird implements it.
type Source interface {
	Status(ctx context.Context) (*PeersReply, error)
}

type statusServer interface {
	Peers(context.Context, *PeersRequest) (*PeersReply, error)
}

type server struct{ src Source }

func (s server) Peers(ctx context.Context, _ *PeersRequest) (*PeersReply, error) {
	return s.src.Status(ctx)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*statusServer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Peers", Handler: grpcjson.Unary(func(s statusServer, ctx context.Context, r *PeersRequest) (*PeersReply, error) {
		return s.Peers(ctx, r)
	})}},
}

// Serve serves src on a unix socket until ctx is done.
func Serve(ctx context.Context, socket string, src Source) error {
	l, err := grpcjson.Listen(socket)
	if err != nil {
		return fmt.Errorf("BGP status socket: %w", err)
	}
	return ServeListener(ctx, l, src)
}

// ServeListener serves src on l until ctx is done.
func ServeListener(ctx context.Context, l net.Listener, src Source) error {
	srv := grpc.NewServer(grpcjson.ServerOptions()...)
	srv.RegisterService(&serviceDesc, server{src})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return fmt.Errorf("BGP status service: %w", err)
	}
	return nil
}

// Client talks to a node's status service.
type Client struct{ conn *grpc.ClientConn }

// Dial returns a client of the service at socket (DefaultSocket if empty).
func Dial(socket string) (*Client, error) {
	if socket == "" {
		socket = DefaultSocket
	}
	conn, err := grpcjson.Dial(socket)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn}, nil
}

// Peers returns the node's sessions.
func (c *Client) Peers(ctx context.Context) (*PeersReply, error) {
	var out PeersReply
	if err := c.conn.Invoke(ctx, peersMethod, &PeersRequest{}, &out); err != nil {
		return nil, fmt.Errorf("BGP status: %w", err)
	}
	return &out, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
