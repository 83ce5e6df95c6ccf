package tabbyctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/tabbyctl/manifest"
	"github.com/tabbynet/tabby/tabbyctl/nodeview"
)

type writeMode int

const (
	modeCreate writeMode = iota
	modeApply
	modeReplace
)

func (a *app) writeCommand(use, short string, mode writeMode) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   use + " -f FILE|-",
		Short: short,
		Long: short + `.

Files hold one or more YAML or JSON documents (separated by ---) of apiVersion tabby.dev/v1 and
kind IPPool, BGPPeer, BGPFilter, BGPConfiguration, FelixConfiguration or Node (tabby's settings of an
existing Kubernetes Node:
spec.bgp.asNumber, ipv4Address, ipv6Address, routeReflectorClusterID, ipv4IPIPTunnelAddr, plus labels).
Every document is validated before anything is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("-f FILE is required (- reads stdin)")
			}
			docs, err := readDocs(files, a.In)
			if err != nil {
				return err
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := validateDocs(ctx, c, docs); err != nil {
				return err
			}
			for _, d := range docs {
				verb, err := writeDoc(ctx, c, d, mode)
				if err != nil {
					return fmt.Errorf("%s: %w", d.Where(), err)
				}
				fmt.Fprintf(a.Out, "%s %q %s\n", d.Kind, d.Obj.GetName(), verb)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file with resources (- for stdin); repeatable")
	return cmd
}

func readDocs(files []string, stdin interface{ Read([]byte) (int, error) }) ([]manifest.Document, error) {
	var docs []manifest.Document
	for _, f := range files {
		d, err := manifest.ReadFile(f, stdin)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// validateDocs checks every document, and pools against the cluster's pools, before any write.
func validateDocs(ctx context.Context, c *client.Client, docs []manifest.Document) error {
	var existing []v1.IPPool
	for _, d := range docs {
		if _, ok := d.Obj.(*v1.IPPool); ok {
			l, err := c.IPPools().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list IPPools to check for overlaps: %w", err)
			}
			existing = l.Items
			break
		}
	}
	return manifest.ValidateAll(docs, existing)
}

func writeDoc(ctx context.Context, c *client.Client, d manifest.Document, mode writeMode) (string, error) {
	r := resourceOfKind(d.Kind)
	obj := d.Obj
	if r.isLocal {
		n := obj.(*nodeview.Resource)
		if mode != modeReplace {
			n.ResourceVersion = ""
		}
		if err := r.update(ctx, c, n, mode == modeReplace); err != nil {
			return "", err
		}
		return map[writeMode]string{modeCreate: "configured", modeApply: "configured", modeReplace: "replaced"}[mode], nil
	}
	switch mode {
	case modeCreate:
		return "created", r.create(ctx, c, obj)
	case modeReplace:
		cur, err := r.get(ctx, c, obj.GetName())
		if err != nil {
			return "", err
		}
		if obj.GetResourceVersion() == "" {
			setRV(obj, cur.GetResourceVersion())
		}
		return "replaced", r.update(ctx, c, obj, true)
	}
	// apply: create, or replace what is there. The file's resourceVersion (from an old
	// `get -o yaml`) is ignored; a concurrent writer between our get and update is retried.
	for attempt := 0; ; attempt++ {
		cur, err := r.get(ctx, c, obj.GetName())
		if apierrors.IsNotFound(err) {
			if err := r.create(ctx, c, obj); err != nil {
				if apierrors.IsAlreadyExists(err) && attempt < 5 {
					continue
				}
				return "", err
			}
			return "created", nil
		}
		if err != nil {
			return "", err
		}
		setRV(obj, cur.GetResourceVersion())
		keepMetadata(obj, cur)
		err = r.update(ctx, c, obj, true)
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return "", err
		}
		return "configured", nil
	}
}

type metaObject interface {
	SetResourceVersion(string)
	GetLabels() map[string]string
	SetLabels(map[string]string)
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}

func setRV(obj manifest.Object, rv string) {
	if m, ok := obj.(metaObject); ok {
		m.SetResourceVersion(rv)
	}
}

// keepMetadata keeps the existing labels/annotations when the file has none: a file written
// before someone labelled the object should not silently strip the labels.
func keepMetadata(obj, cur manifest.Object) {
	m, ok1 := obj.(metaObject)
	c, ok2 := cur.(metaObject)
	if !ok1 || !ok2 {
		return
	}
	if m.GetLabels() == nil {
		m.SetLabels(c.GetLabels())
	}
	if m.GetAnnotations() == nil {
		m.SetAnnotations(c.GetAnnotations())
	}
}

func (a *app) deleteCommand() *cobra.Command {
	var files []string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME... | -f FILE)",
		Short: "Delete resources (for a node: remove tabby's settings, never the Kubernetes Node)",
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct {
				where string
				r     *resource
				name  string
			}
			var targets []target
			switch {
			case len(files) > 0 && len(args) > 0:
				return errors.New("give either -f FILE or KIND NAME..., not both")
			case len(files) > 0:
				docs, err := readDocs(files, a.In)
				if err != nil {
					return err
				}
				for _, d := range docs {
					targets = append(targets, target{d.Where(), resourceOfKind(d.Kind), d.Obj.GetName()})
				}
			case len(args) >= 2:
				r, err := lookupResource(args[0])
				if err != nil {
					return err
				}
				for _, n := range args[1:] {
					targets = append(targets, target{fmt.Sprintf("%s %q", r.kind, n), r, n})
				}
			default:
				return errors.New("give KIND NAME... or -f FILE")
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			for _, t := range targets {
				err := t.r.delete(cmd.Context(), c, t.name)
				if apierrors.IsNotFound(err) && ignoreNotFound {
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", t.where, err)
				}
				if t.r.isLocal {
					fmt.Fprintf(a.Out, "%s %q tabby settings removed\n", t.r.kind, t.name)
				} else {
					fmt.Fprintf(a.Out, "%s %q deleted\n", t.r.kind, t.name)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file with the resources to delete (- for stdin)")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "do not fail on resources that do not exist")
	return cmd
}

func (a *app) patchCommand() *cobra.Command {
	var patch string
	cmd := &cobra.Command{
		Use:   "patch KIND NAME -p PATCH",
		Short: "Change fields of a resource with a JSON merge patch (JSON or YAML); null removes a field",
		Example: `  tabbyctl patch ippool default-ipv4-ippool -p '{"spec":{"natOutgoing":false}}'
  tabbyctl patch node node-1 -p '{"spec":{"bgp":{"routeReflectorClusterID":"244.0.0.1"}},"metadata":{"labels":{"route-reflector":"true"}}}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(patch) == "" {
				return errors.New("-p PATCH is required")
			}
			r, err := lookupResource(args[0])
			if err != nil {
				return err
			}
			body, err := yaml.YAMLToJSON([]byte(patch))
			if err != nil {
				return fmt.Errorf("-p: not JSON or YAML: %w", err)
			}
			c, err := a.cluster()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			for attempt := 0; ; attempt++ {
				err := patchOnce(ctx, c, r, args[1], body)
				if apierrors.IsConflict(err) && attempt < 5 {
					continue
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(a.Out, "%s %q patched\n", r.kind, args[1])
				return nil
			}
		},
	}
	cmd.Flags().StringVarP(&patch, "patch", "p", "", "the merge patch")
	return cmd
}

// patchOnce applies the patch locally, validates the result, then writes it conditionally on the
// resourceVersion it read, so an invalid result is never sent and a concurrent change is not lost.
func patchOnce(ctx context.Context, c *client.Client, r *resource, name string, body []byte) error {
	cur, err := r.get(ctx, c, name)
	if err != nil {
		return err
	}
	setTypeMeta(cur)
	doc, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	merged, err := mergePatch(doc, body)
	if err != nil {
		return err
	}
	next := r.newObj()
	if err := manifest.Unmarshal(merged, next); err != nil {
		return fmt.Errorf("%s %q: patched object does not decode: %w", r.kind, name, err)
	}
	if next.GetName() != name {
		return fmt.Errorf("%s %q: metadata.name cannot be patched", r.kind, name)
	}
	d := manifest.Document{Label: fmt.Sprintf("%s %q", r.kind, name), Kind: r.kind, Obj: next}
	var pools []v1.IPPool
	if _, ok := next.(*v1.IPPool); ok {
		l, err := c.IPPools().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list IPPools to check for overlaps: %w", err)
		}
		pools = l.Items
	}
	if err := manifest.ValidateAll([]manifest.Document{d}, pools); err != nil {
		return err
	}
	if r.isLocal {
		n := next.(*nodeview.Resource)
		n.ResourceVersion = cur.GetResourceVersion()
		pb, err := n.MergePatch(true, cur.(*nodeview.Resource).Labels)
		if err != nil {
			return err
		}
		_, err = c.Nodes().Patch(ctx, name, "application/merge-patch+json", pb)
		return err
	}
	setRV(next, cur.GetResourceVersion())
	return r.update(ctx, c, next, true)
}
