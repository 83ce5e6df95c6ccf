// Package grpcjson carries gRPC over a local unix socket with a JSON codec, so a service (the BGP
// status for tabbyctl) is plain Go structs with a hand-written service descriptor: no protoc in
// the build, and messages readable on the wire when debugging with strace or socat. The IPAM
// service does not use it (ipam/rpc/api: the CNI binary links no gRPC).
package grpcjson

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"

	"github.com/tabbynet/tabby/internal/unixsock"
)

// Name is the codec's content subtype.
const Name = "json"

type codec struct{}

func (codec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (codec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (codec) Name() string                       { return Name }

func init() { encoding.RegisterCodec(codec{}) }

// ServerOptions make a server speak JSON.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodec(codec{})}
}

// Dial connects to a unix socket lazily (the first call connects); calls use JSON.
func Dial(socketPath string) (*grpc.ClientConn, error) {
	// gRPC reads unix://rel/path as an authority and a path: a relative path, as an operator
	// types it (`tabbyctl node status --socket run/bird.sock`), failed with "invalid
	// (non-empty) authority".
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socketPath, err)
	}
	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(Name)),
	)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socketPath, err)
	}
	return conn, nil
}

// Listen opens a unix socket at path (unixsock.Listen).
func Listen(path string) (net.Listener, error) { return unixsock.Listen(path) }

// Unary builds the handler of one unary method for a hand-written grpc.ServiceDesc:
//
//	Methods: []grpc.MethodDesc{{MethodName: "Assign", Handler: grpcjson.Unary(func(s Server, ctx context.Context, r *AssignRequest) (*AssignReply, error) { return s.Assign(ctx, r) })}}
func Unary[S any, Req any, Resp any](call func(S, context.Context, *Req) (*Resp, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		s := srv.(S)
		if interceptor == nil {
			return call(s, ctx, req)
		}
		info := &grpc.UnaryServerInfo{Server: srv}
		return interceptor(ctx, req, info, func(ctx context.Context, r any) (any, error) {
			return call(s, ctx, r.(*Req))
		})
	}
}
