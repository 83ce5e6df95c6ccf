package ipamclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// ExecEnv, when set in tabby-ipam's environment, names a Service method that tabby-ipam serves
// once on stdin/stdout instead of acting as a CNI plugin. The tabby binary does not link the
// Kubernetes client (its init alone costs more than the rest of an ADD, at every ADD and DEL):
// its direct path, only used when tabby-node does not answer, runs the allocator in tabby-ipam.
const ExecEnv = "TABBY_IPAM_EXEC"

// ExecOpener is the tabby binary's direct path: every call runs binary (found in CNI_PATH, else
// next to the running executable) with ExecEnv set.
func ExecOpener(binary string) DirectOpener {
	return func(_ context.Context, kubeconfig string, strict bool) (api.Service, error) {
		path, err := findBinary(binary)
		if err != nil {
			return api.Service{}, fmt.Errorf("%w: direct IPAM path needs %s: %v", api.ErrUnavailable, binary, err)
		}
		return api.Connect(&execTransport{path: path, kubeconfig: kubeconfig, strict: strict}), nil
	}
}

func findBinary(name string) (string, error) {
	var dirs []string
	if p := os.Getenv("CNI_PATH"); p != "" {
		dirs = append(dirs, filepath.SplitList(p)...)
	}
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}

// execTransport runs one call per exec of tabby-ipam, in api's wire format on stdin and stdout.
type execTransport struct {
	path, kubeconfig string
	strict           bool
}

func (e *execTransport) Invoke(ctx context.Context, method string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	in, err := json.Marshal(api.Request{Method: method, Kubeconfig: e.kubeconfig, StrictAffinity: e.strict, Body: body})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, e.path)
	cmd.Env = append(os.Environ(), ExecEnv+"="+method)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	runErr := cmd.Run()
	var r api.Reply
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		err = fmt.Errorf("%s %s: %v (no reply: %v) %s", e.path, method, runErr, err, strings.TrimSpace(stderr.String()))
		if cerr := ctx.Err(); cerr != nil {
			// Killed at the invocation's deadline: the kubelet should try again.
			return fmt.Errorf("%w (%w)", err, cerr)
		}
		return err
	}
	return r.Decode(resp)
}

// ServeExec answers one ExecEnv call: decode the request from stdin, run method on the Service
// open builds, write the reply (or the error and its kind) to stdout.
func ServeExec(ctx context.Context, method string, open DirectOpener, stdin io.Reader, stdout io.Writer) error {
	reply := func(v any, err error) error { return json.NewEncoder(stdout).Encode(api.NewReply(v, err)) }
	var req api.Request
	if err := json.NewDecoder(stdin).Decode(&req); err != nil {
		return reply(nil, fmt.Errorf("%w: decode %s request: %v", api.ErrInvalid, method, err))
	}
	svc, err := open(ctx, req.Kubeconfig, req.StrictAffinity)
	if err != nil {
		return reply(nil, err)
	}
	return reply(api.Dispatch(ctx, api.InProcess(svc), method, req.Body))
}
