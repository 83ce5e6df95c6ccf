// Package nodeview is tabby's view of a Kubernetes Node: the BGP settings tabby keeps as
// annotations on the Node (apis/v1 constants), shown and edited as a `kind: Node` object of
// apiVersion tabby.dev/v1, the way calicoctl shows Calico's Node resource. Nothing else of the
// Kubernetes Node is ever written: tabbyctl does not create or delete Kubernetes Nodes.
package nodeview

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// Kind is the kind name of the view.
const Kind = "Node"

// BGPSpec holds a node's BGP settings. Field names follow Calico's Node resource so users'
// existing manifests translate one to one.
type BGPSpec struct {
	// ASNumber overrides BGPConfiguration.asNumber (annotation tabby.dev/bgp-asn).
	ASNumber *uint32 `json:"asNumber,omitempty"`
	// IPv4Address with prefix length, 198.51.100.11/24 (tabby.dev/bgp-ipv4-address).
	IPv4Address string `json:"ipv4Address,omitempty"`
	// IPv6Address with prefix length, 2001:db8:100::11/64 (tabby.dev/bgp-ipv6-address): the
	// next hop of the node's IPv6 blocks; empty on a node without IPv6.
	IPv6Address string `json:"ipv6Address,omitempty"`
	// RouteReflectorClusterID makes the node a route reflector (tabby.dev/route-reflector-cluster-id).
	RouteReflectorClusterID string `json:"routeReflectorClusterID,omitempty"`
	// IPv4IPIPTunnelAddr is the tunl0 address (tabby.dev/ipip-tunnel-address).
	IPv4IPIPTunnelAddr string `json:"ipv4IPIPTunnelAddr,omitempty"`
}

// Spec of the view. The VXLAN fields are the node's VTEP of each family and its device's MAC,
// which its tabby-node allocates and records (named as on Calico's Node resource).
type Spec struct {
	BGP *BGPSpec `json:"bgp,omitempty"`
	// IPv4VXLANTunnelAddr is vxlan.tabby's address (tabby.dev/vxlan-ipv4-tunnel-address).
	IPv4VXLANTunnelAddr string `json:"ipv4VXLANTunnelAddr,omitempty"`
	// VXLANTunnelMACAddr is vxlan.tabby's MAC (tabby.dev/vxlan-ipv4-mac).
	VXLANTunnelMACAddr string `json:"vxlanTunnelMACAddr,omitempty"`
	// IPv6VXLANTunnelAddr is vxlan-v6.tabby's address (tabby.dev/vxlan-ipv6-tunnel-address).
	IPv6VXLANTunnelAddr string `json:"ipv6VXLANTunnelAddr,omitempty"`
	// VXLANTunnelMACAddrV6 is vxlan-v6.tabby's MAC (tabby.dev/vxlan-ipv6-mac).
	VXLANTunnelMACAddrV6 string `json:"vxlanTunnelMACAddrV6,omitempty"`
}

// vxlanField is a VXLAN field of the view: its annotation, its name in the view, its value.
type vxlanField struct {
	key, name string
	v         *string
}

// vxlanFields are the VXLAN fields of the view, in display order.
func (s *Spec) vxlanFields() []vxlanField {
	return []vxlanField{
		{v1.AnnotationVXLANIPv4TunnelAddress, "ipv4VXLANTunnelAddr", &s.IPv4VXLANTunnelAddr},
		{v1.AnnotationVXLANIPv4MAC, "vxlanTunnelMACAddr", &s.VXLANTunnelMACAddr},
		{v1.AnnotationVXLANIPv6TunnelAddress, "ipv6VXLANTunnelAddr", &s.IPv6VXLANTunnelAddr},
		{v1.AnnotationVXLANIPv6MAC, "vxlanTunnelMACAddrV6", &s.VXLANTunnelMACAddrV6},
	}
}

// Resource is the Node resource as tabbyctl shows and edits it: one Kubernetes Node's labels and
// tabby's annotations on it, as written (an invalid value is shown, so that it can be fixed). It
// is a manifest, not what the agents read of a node: that is model.Node (validation.ParseNode).
type Resource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec"`
}

// DeepCopyObject makes Resource a runtime.Object.
func (n *Resource) DeepCopyObject() runtime.Object {
	out := &Resource{TypeMeta: n.TypeMeta, Spec: n.Spec}
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if n.Spec.BGP != nil {
		b := *n.Spec.BGP
		if b.ASNumber != nil {
			asn := *b.ASNumber
			b.ASNumber = &asn
		}
		out.Spec.BGP = &b
	}
	return out
}

// Annotations are the annotation keys the view owns, in display order.
var Annotations = []string{v1.AnnotationBGPASN, v1.AnnotationBGPIPv4Address, v1.AnnotationBGPIPv6Address, v1.AnnotationRRClusterID, v1.AnnotationIPIPTunnelAddress,
	v1.AnnotationVXLANIPv4TunnelAddress, v1.AnnotationVXLANIPv4MAC, v1.AnnotationVXLANIPv6TunnelAddress, v1.AnnotationVXLANIPv6MAC}

// FromKube builds the view of a Kubernetes Node. Only tabby's annotations are carried over;
// labels are kept because BGPPeer and IPPool selectors match on them.
func FromKube(k *corev1.Node) *Resource {
	n := &Resource{TypeMeta: metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: Kind}}
	n.Name = k.Name
	n.UID = k.UID
	n.ResourceVersion = k.ResourceVersion
	n.CreationTimestamp = k.CreationTimestamp
	if len(k.Labels) > 0 {
		n.Labels = make(map[string]string, len(k.Labels))
		for key, v := range k.Labels {
			n.Labels[key] = v
		}
	}
	a := k.Annotations
	b := BGPSpec{
		IPv4Address:             a[v1.AnnotationBGPIPv4Address],
		IPv6Address:             a[v1.AnnotationBGPIPv6Address],
		RouteReflectorClusterID: a[v1.AnnotationRRClusterID],
		IPv4IPIPTunnelAddr:      a[v1.AnnotationIPIPTunnelAddress],
	}
	if s, ok := a[v1.AnnotationBGPASN]; ok {
		// An unparsable annotation is shown as absent; `tabbyctl get node -o yaml` is not the place
		// to fail, and validation refuses writing such a value.
		if v, err := strconv.ParseUint(s, 10, 32); err == nil {
			asn := uint32(v)
			b.ASNumber = &asn
		}
	}
	if b != (BGPSpec{}) {
		n.Spec.BGP = &b
	}
	for _, f := range n.Spec.vxlanFields() {
		*f.v = a[f.key]
	}
	return n
}

// TabbyAnnotations renders the view's BGP settings as annotations; absent settings are absent.
func (n *Resource) TabbyAnnotations() map[string]string {
	out := map[string]string{}
	spec := n.Spec
	for _, f := range spec.vxlanFields() {
		if *f.v != "" {
			out[f.key] = *f.v
		}
	}
	b := n.Spec.BGP
	if b == nil {
		return out
	}
	if b.ASNumber != nil {
		out[v1.AnnotationBGPASN] = strconv.FormatUint(uint64(*b.ASNumber), 10)
	}
	if b.IPv4Address != "" {
		out[v1.AnnotationBGPIPv4Address] = b.IPv4Address
	}
	if b.IPv6Address != "" {
		out[v1.AnnotationBGPIPv6Address] = b.IPv6Address
	}
	if b.RouteReflectorClusterID != "" {
		out[v1.AnnotationRRClusterID] = b.RouteReflectorClusterID
	}
	if b.IPv4IPIPTunnelAddr != "" {
		out[v1.AnnotationIPIPTunnelAddress] = b.IPv4IPIPTunnelAddr
	}
	return out
}

// Validate checks the view with the same rules the agents apply to the annotations, and reports
// errors against the view's own field paths (spec.bgp.asNumber), which is what the user wrote.
func (n *Resource) Validate() field.ErrorList {
	errs := validation.NodeAnnotations(n.TabbyAnnotations())
	bgp := field.NewPath("spec", "bgp")
	paths := map[string]*field.Path{
		v1.AnnotationBGPASN:            bgp.Child("asNumber"),
		v1.AnnotationBGPIPv4Address:    bgp.Child("ipv4Address"),
		v1.AnnotationBGPIPv6Address:    bgp.Child("ipv6Address"),
		v1.AnnotationRRClusterID:       bgp.Child("routeReflectorClusterID"),
		v1.AnnotationIPIPTunnelAddress: bgp.Child("ipv4IPIPTunnelAddr"),
	}
	spec := n.Spec
	for _, f := range spec.vxlanFields() {
		paths[f.key] = field.NewPath("spec", f.name)
	}
	for _, e := range errs {
		for key, p := range paths {
			if e.Field == field.NewPath("metadata", "annotations").Key(key).String() {
				e.Field = p.String()
			}
		}
	}
	if n.Spec.BGP != nil && n.Spec.BGP.ASNumber != nil && *n.Spec.BGP.ASNumber == 0 {
		errs = append(errs, field.Invalid(bgp.Child("asNumber"), 0, "not an AS number in 1..4294967295"))
	}
	return errs
}

// MergePatch is the JSON merge patch that makes the Kubernetes Node carry the view's
// annotations and labels. With replace, tabby annotations the view does not set are removed;
// otherwise they are left as they are. Labels are added or changed; a label is removed only when
// it is in oldLabels and not in the view (an explicit edit by `tabbyctl patch`): labels belong to
// Kubernetes as much as to tabby, so a file that omits them does not wipe them. A resourceVersion
// on the view makes the patch conditional on it.
func (n *Resource) MergePatch(replace bool, oldLabels map[string]string) ([]byte, error) {
	ann := map[string]any{}
	for k, v := range n.TabbyAnnotations() {
		ann[k] = v
	}
	if replace {
		for _, k := range Annotations {
			if _, ok := ann[k]; !ok {
				ann[k] = nil
			}
		}
	}
	meta := map[string]any{"annotations": ann}
	labels := map[string]any{}
	for k, v := range n.Labels {
		labels[k] = v
	}
	for k := range oldLabels {
		if _, ok := n.Labels[k]; !ok {
			labels[k] = nil
		}
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if n.ResourceVersion != "" {
		meta["resourceVersion"] = n.ResourceVersion
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("node %s: build patch: %w", n.Name, err)
	}
	return b, nil
}

// RemovePatch removes every tabby annotation from the Node.
func RemovePatch() []byte {
	ann := map[string]any{}
	for _, k := range Annotations {
		ann[k] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return b
}
