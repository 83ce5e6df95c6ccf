package rpc

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/tabbynet/tabby/internal/grpcjson"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// Server serves an api.Service over gRPC. tabby-node builds it with NewServer(allocator) and
// registers it on the grpc.Server listening on DefaultSocket.
type Server struct {
	svc api.Service
	log *slog.Logger
}

// NewServerFor serves any api.Service (tests and the benchmark use it with Local).
func NewServerFor(svc api.Service) *Server {
	return &Server{svc: svc, log: slog.Default().With("component", "ipam-rpc")}
}

// Register adds the IPAM service to a gRPC server built with grpcjson.ServerOptions().
func (s *Server) Register(g *grpc.Server) { g.RegisterService(&serviceDesc, s) }

var serviceDesc = grpc.ServiceDesc{
	ServiceName: api.ServiceName,
	HandlerType: (*api.Service)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Assign", Handler: grpcjson.Unary(func(s api.Service, ctx context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
			return s.Assign(ctx, r)
		})},
		{MethodName: "Release", Handler: grpcjson.Unary(func(s api.Service, ctx context.Context, r *api.ReleaseRequest) (*api.ReleaseReply, error) {
			return s.Release(ctx, r)
		})},
		{MethodName: "Lookup", Handler: grpcjson.Unary(func(s api.Service, ctx context.Context, r *api.LookupRequest) (*api.LookupReply, error) {
			return s.Lookup(ctx, r)
		})},
		{MethodName: "Ready", Handler: grpcjson.Unary(func(s api.Service, ctx context.Context, r *api.ReadyRequest) (*api.ReadyReply, error) {
			return s.Ready(ctx, r)
		})},
		{MethodName: "GC", Handler: grpcjson.Unary(func(s api.Service, ctx context.Context, r *api.GCRequest) (*api.GCReply, error) {
			return s.GC(ctx, r)
		})},
	},
}

func (s *Server) done(method, key string, start time.Time, err error) error {
	if err != nil {
		s.log.Warn("ipam call failed", "method", method, "key", key, "took", time.Since(start), "err", err)
		return api.ToStatus(err)
	}
	s.log.Debug("ipam call", "method", method, "key", key, "took", time.Since(start))
	return nil
}

func (s *Server) Assign(ctx context.Context, r *api.AssignRequest) (*api.AssignReply, error) {
	start := time.Now()
	out, err := s.svc.Assign(ctx, r)
	return out, s.done("Assign", r.Handle, start, err)
}

func (s *Server) Release(ctx context.Context, r *api.ReleaseRequest) (*api.ReleaseReply, error) {
	start := time.Now()
	out, err := s.svc.Release(ctx, r)
	return out, s.done("Release", r.Handle, start, err)
}

func (s *Server) Lookup(ctx context.Context, r *api.LookupRequest) (*api.LookupReply, error) {
	start := time.Now()
	out, err := s.svc.Lookup(ctx, r)
	return out, s.done("Lookup", r.Handle, start, err)
}

func (s *Server) Ready(ctx context.Context, r *api.ReadyRequest) (*api.ReadyReply, error) {
	start := time.Now()
	out, err := s.svc.Ready(ctx, r)
	return out, s.done("Ready", r.Node, start, err)
}

func (s *Server) GC(ctx context.Context, r *api.GCRequest) (*api.GCReply, error) {
	start := time.Now()
	out, err := s.svc.GC(ctx, r)
	return out, s.done("GC", r.Node+"/"+r.Network, start, err)
}
