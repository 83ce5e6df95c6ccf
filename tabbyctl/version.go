package tabbyctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/version"
)

// VersionConfigMapSelector finds the ConfigMap the Helm chart writes with the cluster's tabby
// version (data key "version"), in whatever namespace the chart was installed.
const VersionConfigMapSelector = "app.kubernetes.io/name=tabby,tabby.dev/info=version"

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print tabbyctl's version and, when the cluster is reachable, the cluster's",
		Long: `Prints tabbyctl's version (tabbyctl --version prints it alone), the cluster's (the Helm
chart's version ConfigMap, else the tabby-node DaemonSet's image tag, else, for tabby installed
without the chart, what tabby-node runs), and the version each node's tabby-node recorded on its
Node when it started (annotation tabby.dev/version): during an upgrade, which nodes run which.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.Out, "Client Version:  %s\n", version.Version)
			if clientOnly {
				return nil
			}
			c, err := a.cluster()
			if err != nil {
				fmt.Fprintf(a.Out, "Cluster Version: unknown (%v)\n", err)
				return nil
			}
			printClusterVersion(cmd.Context(), a.Out, c)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client version only")
	return cmd
}

// printClusterVersion says what the cluster runs: the chart's version, else (tabby installed
// without the chart) the agents'; then the version each node's tabby-node recorded.
func printClusterVersion(ctx context.Context, w io.Writer, c *client.Client) {
	v, src, err := clusterVersion(ctx, c)
	agents, aerr := agentVersions(ctx, c)
	noChart := errors.Is(err, errNoChart) && aerr == nil
	switch {
	case err == nil:
		fmt.Fprintf(w, "Cluster Version: %s (%s)\n", v, src)
	case noChart && len(agents.versions) == 0:
		fmt.Fprintf(w, "Cluster Version: unknown (tabby is not installed: %v, and no Node has a %s annotation)\n", err, v1.AnnotationVersion)
		return
	case noChart && len(agents.versions) == 1:
		fmt.Fprintf(w, "Cluster Version: %s (what tabby-node runs)\n", agents.versions[0].version)
	case noChart:
		fmt.Fprintln(w, "Cluster Version: mixed (what tabby-node runs)")
	default:
		fmt.Fprintf(w, "Cluster Version: unknown (%v)\n", err)
	}
	if aerr != nil {
		fmt.Fprintf(w, "tabby-node:      unknown (%v)\n", aerr)
		return
	}
	for _, l := range agents.lines() {
		fmt.Fprintf(w, "tabby-node:      %s\n", l)
	}
}

// clusterVersion reads the chart's version ConfigMap, else the image tag of the tabby-node
// DaemonSet.
func clusterVersion(ctx context.Context, c *client.Client) (string, string, error) {
	cms, err := c.ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: VersionConfigMapSelector})
	if err != nil {
		return "", "", fmt.Errorf("list ConfigMaps: %w", err)
	}
	for _, cm := range cms.Items {
		if v := cm.Data["version"]; v != "" {
			return v, fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name), nil
		}
	}
	// tabby's client knows the core API only; a DaemonSet list is read as JSON.
	raw, err := c.Core.Get().AbsPath("/apis/apps/v1/daemonsets").Param("labelSelector", "app.kubernetes.io/name=tabby").
		SetHeader("Accept", runtime.ContentTypeJSON).Timeout(c.RequestTimeout()).DoRaw(ctx)
	if err != nil {
		return "", "", fmt.Errorf("list DaemonSets: %w", err)
	}
	var dss appsv1.DaemonSetList
	if err := json.Unmarshal(raw, &dss); err != nil {
		return "", "", fmt.Errorf("list DaemonSets: %w", err)
	}
	for _, ds := range dss.Items {
		for _, ctr := range ds.Spec.Template.Spec.Containers {
			if ctr.Name != "tabby-node" {
				continue
			}
			if i := strings.LastIndex(ctr.Image, ":"); i > 0 && !strings.Contains(ctr.Image[i:], "/") {
				return ctr.Image[i+1:], fmt.Sprintf("image of DaemonSet %s/%s", ds.Namespace, ds.Name), nil
			}
		}
	}
	return "", "", errNoChart
}

// errNoChart: neither the chart's version ConfigMap nor a tabby-node DaemonSet is there.
var errNoChart = fmt.Errorf("no ConfigMap labelled %s and no tabby-node DaemonSet", VersionConfigMapSelector)

// nodesByVersion is what the tabby-node agents recorded on their Nodes (v1.AnnotationVersion):
// during an upgrade, several versions at once.
type nodesByVersion struct {
	total    int // Nodes in the cluster
	versions []versionNodes
	// without are the Nodes with no version recorded: no tabby-node started there, or one
	// older than the annotation.
	without []string
}

type versionNodes struct {
	version string
	nodes   []string
}

// agentVersions reads the versions the agents recorded, the most widespread first.
func agentVersions(ctx context.Context, c *client.Client) (nodesByVersion, error) {
	nodes, err := c.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nodesByVersion{}, fmt.Errorf("list Nodes: %w", err)
	}
	out := nodesByVersion{total: len(nodes.Items)}
	byVersion := map[string][]string{}
	for _, n := range nodes.Items {
		if v := n.Annotations[v1.AnnotationVersion]; v != "" {
			byVersion[v] = append(byVersion[v], n.Name)
		} else {
			out.without = append(out.without, n.Name)
		}
	}
	for v, names := range byVersion {
		slices.Sort(names)
		out.versions = append(out.versions, versionNodes{version: v, nodes: names})
	}
	slices.SortFunc(out.versions, func(a, b versionNodes) int {
		if d := len(b.nodes) - len(a.nodes); d != 0 {
			return d
		}
		return strings.Compare(a.version, b.version)
	})
	slices.Sort(out.without)
	return out, nil
}

// lines are the "tabby-node:" lines of `tabbyctl version`: each version with its nodes, and the
// nodes without one when some have one.
func (n nodesByVersion) lines() []string {
	var out []string
	for _, v := range n.versions {
		out = append(out, fmt.Sprintf("%s on %d of %d nodes (%s)", v.version, len(v.nodes), n.total, someNames(v.nodes)))
	}
	if len(n.versions) > 0 && len(n.without) > 0 {
		out = append(out, fmt.Sprintf("no version recorded on %d of %d nodes (%s)", len(n.without), n.total, someNames(n.without)))
	}
	return out
}

// someNames lists the first few names, and how many more there are.
func someNames(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}
