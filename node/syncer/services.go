package syncer

import (
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/apis/validation"
)

// byService indexes EndpointSlices by their Service's key (namespace/name), so that a pass reads
// a Service's slices alone.
const byService = "service"

// serviceKeyOf is the key of the Service an EndpointSlice belongs to, "" for a slice of none.
func serviceKeyOf(slice *discoveryv1.EndpointSlice) string {
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return slice.Namespace + "/" + name
}

func indexByService(obj any) ([]string, error) {
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		if key := serviceKeyOf(slice); key != "" {
			return []string{key}, nil
		}
	}
	return nil, nil
}

// sliceRef is what an EndpointSlice means to this node: its Service (namespace and name: no key
// is made for the many events that change nothing here), and whether it lists a ready endpoint
// here.
type sliceRef struct {
	namespace, service string
	local              bool
}

func (r sliceRef) key() string { return r.namespace + "/" + r.service }

// refOf is obj's sliceRef: zero for anything but an EndpointSlice of a Service (a deleted
// slice's last state is looked into).
func refOf(obj any, nodeName string) sliceRef {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return sliceRef{}
	}
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return sliceRef{}
	}
	return sliceRef{namespace: slice.Namespace, service: name, local: hasLocalEndpoint(slice, nodeName)}
}

// hasLocalEndpoint: the slice lists an endpoint on the node that is not known to be unready
// (kube-proxy forwards to an endpoint whose readiness is unknown).
func hasLocalEndpoint(slice *discoveryv1.EndpointSlice, nodeName string) bool {
	for _, e := range slice.Endpoints {
		if e.NodeName != nil && *e.NodeName == nodeName && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
			return true
		}
	}
	return false
}

// sliceHandler records an EndpointSlice's events as its Service's, and only those that change
// whether the Service has a ready endpoint on this node: in a large cluster most slice updates
// are endpoints on other nodes coming and going, and cost this node nothing but the decoding.
func (s *Syncer) sliceHandler() cache.ResourceEventHandlerFuncs {
	const resource = "endpointslices"
	changed := func(old, cur any) {
		o, c := refOf(old, s.nodeName), refOf(cur, s.nodeName)
		marked := o != c && (o.local || c.local)
		if marked {
			s.mu.Lock()
			if s.since.IsZero() {
				s.since = time.Now()
			}
			for _, r := range []sliceRef{o, c} {
				if r.local {
					s.dirty.services[r.key()] = struct{}{}
				}
			}
			s.mu.Unlock()
		}
		s.metrics.event(resource) // after since: whoever sees the count sees the lag's start
		if marked {
			s.kick()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(nil, obj) },
		UpdateFunc: changed,
		DeleteFunc: func(obj any) { changed(obj, nil) },
	}
}

// localEndpoint tells whether one of the Service's EndpointSlices lists a ready endpoint on
// this node.
func (s *Syncer) localEndpoint(key string) bool {
	objs, _ := s.slices.GetIndexer().ByIndex(byService, key)
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok && hasLocalEndpoint(slice, s.nodeName) {
			return true
		}
	}
	return false
}

// parseService is the Service as the BGP agents read it, LocalEndpoint aside, or false when it
// may not be announced; an address that does not parse is left out and logged with its field.
func parseService(svc *corev1.Service, log *slog.Logger) (model.Service, bool) {
	out, ok, errs := validation.AnnouncedService(svc)
	if len(errs) > 0 {
		log.Warn("Service has addresses that do not parse: announcing the others", "service", out.Key, "error", errs.ToAggregate())
	}
	return out, ok
}

// serviceMessages appends the Services that changed (keys), by key: an update for an
// announceable one that differs from what was sent, a removal for one sent that is gone or no
// longer announceable.
func (st *stream) serviceMessages(msgs []any, keys map[string]struct{}, get func(key string) *corev1.Service, local func(key string) bool, log *slog.Logger) []any {
	for _, key := range sortedKeys(keys) {
		var svc model.Service
		ok := false
		if obj := get(key); obj != nil {
			if svc, ok = parseService(obj, log); ok {
				svc.LocalEndpoint = local(key)
			}
		}
		sent, was := st.services[key]
		switch {
		case !ok && was:
			delete(st.services, key)
			msgs = append(msgs, model.ServiceRemove{Key: key})
		case ok && (!was || !sent.Equal(svc)):
			st.services[key] = svc
			msgs = append(msgs, model.ServiceUpdate{Service: svc})
		}
	}
	return msgs
}

// buildServices are the announceable Services, by key, each with whether one of its slices
// lists a ready endpoint on the node: Build's, from every object.
func buildServices(services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, nodeName string, log *slog.Logger) []model.Service {
	local := map[string]bool{}
	for _, sl := range endpointSlices {
		if r := refOf(sl, nodeName); r.local {
			local[r.key()] = true
		}
	}
	var out []model.Service
	for _, obj := range services {
		if svc, ok := parseService(obj, log); ok {
			svc.LocalEndpoint = local[svc.Key]
			out = append(out, svc)
		}
	}
	slices.SortFunc(out, func(a, b model.Service) int { return strings.Compare(a.Key, b.Key) })
	return out
}
