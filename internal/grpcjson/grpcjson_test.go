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

	// An absolute path, and a relative one as an operator types it.
	t.Chdir(filepath.Dir(sock))
	for _, path := range []string{sock, filepath.Base(sock)} {
		conn, err := Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		var out echoResp
		err = conn.Invoke(context.Background(), "/tabby.test.Echo/Echo", &echoReq{Text: "hi"}, &out)
		conn.Close()
		if err != nil {
			t.Fatalf("socket %s: %v", path, err)
		}
		if out.Text != "echo: hi" {
			t.Fatalf("socket %s: got %q", path, out.Text)
		}
	}
}
