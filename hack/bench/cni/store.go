package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
)

// timedStore counts and times the datastore calls the IPAM service makes, to say where an
// Assign's time goes.
type timedStore struct {
	ipam.Store
	mu    sync.Mutex
	calls map[string][]time.Duration
}

func newTimedStore(s ipam.Store) *timedStore {
	return &timedStore{Store: s, calls: map[string][]time.Duration{}}
}

func (s *timedStore) record(op string, start time.Time) {
	s.mu.Lock()
	s.calls[op] = append(s.calls[op], time.Since(start))
	s.mu.Unlock()
}

func (s *timedStore) reset() {
	s.mu.Lock()
	s.calls = map[string][]time.Duration{}
	s.mu.Unlock()
}

func (s *timedStore) summary(pods int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ops []string
	for op := range s.calls {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	for _, op := range ops {
		d := append([]time.Duration(nil), s.calls[op]...)
		p50, _ := percentiles(d)
		fmt.Fprintf(&b, "  %-16s %5.2f per pod, p50 %s\n", op, float64(len(d))/float64(pods), ms(p50))
	}
	return b.String()
}

func (s *timedStore) GetPod(ctx context.Context, ns, name string) (*ipam.Pod, error) {
	defer s.record("GetPod", time.Now())
	return s.Store.GetPod(ctx, ns, name)
}

func (s *timedStore) GetNode(ctx context.Context, name string) (*model.Node, error) {
	defer s.record("GetNode", time.Now())
	return s.Store.GetNode(ctx, name)
}

func (s *timedStore) ListPools(ctx context.Context) ([]v1.IPPool, error) {
	defer s.record("ListPools", time.Now())
	return s.Store.ListPools(ctx)
}

func (s *timedStore) GetBlock(ctx context.Context, name string) (*v1.IPAMBlock, error) {
	defer s.record("GetBlock", time.Now())
	return s.Store.GetBlock(ctx, name)
}

func (s *timedStore) UpdateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error) {
	defer s.record("UpdateBlock", time.Now())
	return s.Store.UpdateBlock(ctx, b)
}

func (s *timedStore) GetHandle(ctx context.Context, name string) (*v1.IPAMHandle, error) {
	defer s.record("GetHandle", time.Now())
	return s.Store.GetHandle(ctx, name)
}

func (s *timedStore) CreateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	defer s.record("CreateHandle", time.Now())
	return s.Store.CreateHandle(ctx, h)
}

func (s *timedStore) UpdateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error) {
	defer s.record("UpdateHandle", time.Now())
	return s.Store.UpdateHandle(ctx, h)
}

func (s *timedStore) DeleteHandle(ctx context.Context, name, rv string) error {
	defer s.record("DeleteHandle", time.Now())
	return s.Store.DeleteHandle(ctx, name, rv)
}

func (s *timedStore) GetNamespaceAnnotations(ctx context.Context, name string) (map[string]string, error) {
	defer s.record("GetNamespaceAnn", time.Now())
	return s.Store.GetNamespaceAnnotations(ctx, name)
}
