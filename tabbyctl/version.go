package tabbyctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/apis/client"
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
		Args:  cobra.NoArgs,
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
			v, src, err := clusterVersion(cmd.Context(), c)
			if err != nil {
				fmt.Fprintf(a.Out, "Cluster Version: unknown (%v)\n", err)
				return nil
			}
			fmt.Fprintf(a.Out, "Cluster Version: %s (%s)\n", v, src)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client version only")
	return cmd
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
	return "", "", fmt.Errorf("tabby is not installed: no ConfigMap labelled %s and no tabby-node DaemonSet", VersionConfigMapSelector)
}
