package grpcjson

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
)

type echoReq struct{ Text string }
type echoResp struct{ Text string }

type echoServer interface {
	Echo(context.Context, *echoReq) (*echoResp, error)
}

type echo struct{}

func (echo) Echo(_ context.Context, r *echoReq) (*echoResp, error) {
	return &echoResp{Text: "echo: " + r.Text}, nil
}

func TestUnixRoundTrip(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "echo.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "tabby.test.Echo",
		HandlerType: (*echoServer)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Echo", Handler: Unary(func(s echoServer, ctx context.Context, r *echoReq) (*echoResp, error) {
			return s.Echo(ctx, r)
		})}},
	}, echo{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)

	conn, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out echoResp
	if err := conn.Invoke(context.Background(), "/tabby.test.Echo/Echo", &echoReq{Text: "hi"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Text != "echo: hi" {
		t.Fatalf("got %q", out.Text)
	}
}
