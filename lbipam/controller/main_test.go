package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/lbipam/controller"
)

// One control plane serves every test of the package (each start costs seconds); each test has
// its own namespace and pools, and removes its Services and pools when it ends.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		env.Stop()
	}
	os.Exit(code)
}

func sharedEnv(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real API server (skipped with -short)")
	}
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		env, envErr = testenv.StartProcess(ctx, testenv.Options{DualStackServices: true})
	})
	if envErr != nil {
		t.Fatalf("control plane: %v", envErr)
	}
	return env
}

// wait is how long a test waits for the controller: generous, the machine is shared.
const wait = 60 * time.Second

type scene struct {
	t  *testing.T
	e  *testenv.Env
	c  *client.Client
	ns string
}

// newScene makes the test's namespace and LoadBalancer pools (name=cidr, "!manual" or
// "!disabled" after the cidr), and removes its Services and pools when the test ends.
func newScene(t *testing.T, pools ...string) *scene {
	e := sharedEnv(t)
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	s := &scene{t: t, e: e, c: e.Client, ns: ns}
	ctx := context.Background()
	if _, err := e.Client.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, p := range pools {
		s.pool(p)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := e.Client.Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, svc := range list.Items {
			if err := e.Client.Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
		for _, p := range pools {
			name, _, _ := strings.Cut(p, "=")
			if err := e.Client.IPPools().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return s
}

func (s *scene) pool(spec string) {
	s.t.Helper()
	name, rest, _ := strings.Cut(spec, "=")
	cidr, flag, _ := strings.Cut(rest, "!")
	p := &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.IPPoolSpec{CIDR: cidr, AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}}
	switch flag {
	case "manual":
		p.Spec.AssignmentMode = v1.AssignmentModeManual
	case "disabled":
		p.Spec.Disabled = true
	}
	if _, err := s.c.IPPools().Create(context.Background(), p); err != nil {
		s.t.Fatalf("create pool %s: %v", spec, err)
	}
}

// run starts a controller (a leadership term) until the test ends or stop is called.
func (s *scene) run(reg prometheus.Registerer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var m *controller.Metrics
	if reg != nil {
		m = controller.NewMetrics(reg)
	}
	go func() {
		done <- controller.Run(ctx, controller.Config{Client: s.c, Identity: "test", Logger: slog.New(slog.NewTextHandler(testWriter{s.t}, nil)), Metrics: m})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				s.t.Errorf("controller: %v", err)
			}
		})
	}
	s.t.Cleanup(stop)
	return stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func service(name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	for _, m := range mods {
		m(s)
	}
	return s
}

func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations[k] = v }
}

func port(p int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP}}
	}
}

func families(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, fams }
}

func (s *scene) create(svc *corev1.Service) {
	s.t.Helper()
	svc.Namespace = s.ns
	if _, err := s.c.Services(s.ns).Create(context.Background(), svc); err != nil {
		s.t.Fatalf("create Service %s: %v", svc.Name, err)
	}
}

func (s *scene) get(name string) *corev1.Service {
	s.t.Helper()
	svc, err := s.c.Services(s.ns).Get(context.Background(), name)
	if err != nil {
		s.t.Fatalf("get Service %s: %v", name, err)
	}
	return svc
}

func ips(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// addrs waits until the Service's ingress is want (no address: want empty, checked after the
// Service's refusal event).
func (s *scene) addrs(name string, want ...string) {
	s.t.Helper()
	var got []string
	testwait.Until(s.t, fmt.Sprintf("Service %s to have ingress %v (has %v)", name, want, got), wait, func() bool {
		got = ips(s.get(name))
		return slices.Equal(got, want)
	})
}

// anyAddr waits for the Service to have n addresses and returns them.
func (s *scene) anyAddr(name string, n int) []string {
	s.t.Helper()
	var got []string
	testwait.Until(s.t, fmt.Sprintf("Service %s to have %d addresses", name, n), wait, func() bool {
		got = ips(s.get(name))
		return len(got) == n
	})
	return got
}

// event waits for an event of the reason on the Service whose message holds every want.
func (s *scene) event(name, reason string, want ...string) corev1.Event {
	s.t.Helper()
	var found corev1.Event
	var seen []string
	testwait.Until(s.t, fmt.Sprintf("a %s event on Service %s saying %q", reason, name, want), wait, func() bool {
		list, err := s.c.Events(s.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		seen = seen[:0]
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name != name || ev.Reason != reason {
				continue
			}
			seen = append(seen, ev.Message)
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(ev.Message, w) }) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

func (s *scene) delete(name string) {
	s.t.Helper()
	if err := s.c.Services(s.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
}
