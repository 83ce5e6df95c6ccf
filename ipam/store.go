package ipam

import (
	"context"
	"net/netip"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
)

// Store is everything the allocator, the garbage collector and the reports need from the
// datastore. Errors follow the Kubernetes API's conventions (k8s.io/apimachinery/pkg/api/errors):
// a missing object is IsNotFound, a stale resourceVersion on Update or on a Delete precondition
// is IsConflict, a taken name on Create is IsAlreadyExists. Every method returns objects the
// caller may modify.
type Store interface {
	ListPools(ctx context.Context) ([]v1.IPPool, error)

	GetBlock(ctx context.Context, name string) (*v1.IPAMBlock, error)
	ListBlocks(ctx context.Context) ([]v1.IPAMBlock, error)
	CreateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error)
	// UpdateBlock is a compare-and-swap on b's resourceVersion.
	UpdateBlock(ctx context.Context, b *v1.IPAMBlock) (*v1.IPAMBlock, error)
	// DeleteBlock deletes only if the object still has resourceVersion (when not empty).
	DeleteBlock(ctx context.Context, name, resourceVersion string) error

	ListAffinities(ctx context.Context) ([]v1.BlockAffinity, error)
	CreateAffinity(ctx context.Context, a *v1.BlockAffinity) (*v1.BlockAffinity, error)
	DeleteAffinity(ctx context.Context, name, resourceVersion string) error

	GetHandle(ctx context.Context, name string) (*v1.IPAMHandle, error)
	ListHandles(ctx context.Context) ([]v1.IPAMHandle, error)
	CreateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error)
	UpdateHandle(ctx context.Context, h *v1.IPAMHandle) (*v1.IPAMHandle, error)
	DeleteHandle(ctx context.Context, name, resourceVersion string) error

	// GetNode and ListNodes read Nodes as validation.ParseNode does: a Node's tabby annotations
	// count only when they are all valid.
	GetNode(ctx context.Context, name string) (*model.Node, error)
	ListNodes(ctx context.Context) ([]model.Node, error)
	// SetNodeAnnotation sets one annotation on a Node; an empty value removes it.
	SetNodeAnnotation(ctx context.Context, node, key, value string) error

	// GetPod always asks the datastore (no cache): the garbage collector's second look relies on it.
	GetPod(ctx context.Context, namespace, name string) (*Pod, error)
	// ListPods lists the pods bound to node (every pod when node is empty).
	ListPods(ctx context.Context, node string) ([]Pod, error)
	GetNamespaceAnnotations(ctx context.Context, name string) (map[string]string, error)
}

// Pod is the part of a Kubernetes Pod IPAM looks at.
type Pod struct {
	Namespace, Name string
	UID             string
	NodeName        string
	Annotations     map[string]string
	// IPs from status.podIPs; empty until the kubelet reports them.
	IPs []netip.Addr
	// HostNetwork pods use the node's address, not one of tabby's.
	HostNetwork bool
	// Terminated: phase Succeeded or Failed, so the runtime has torn the pod's network down.
	Terminated bool
	// Deleting: deletionTimestamp is set; the pod may still run until its grace period ends.
	Deleting bool
}

// Labels and annotations tabby sets on its IPAM objects.
const (
	// AnnotationHandleNode on an IPAMHandle names the node that created it, so that node's
	// garbage collector can recognise the handle when a crash left it without an allocation.
	AnnotationHandleNode = "tabby.dev/node"
)
