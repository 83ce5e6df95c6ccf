package lab

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// UseRouteReflectors turns the node-to-node mesh off and writes the peerings Calico users write
// for route reflectors: every client peers with the nodes labelled RouteReflectorLabel, and the
// reflectors peer with each other. Reflector nodes themselves are made with NodeSpec's
// route-reflector settings (the cluster ID annotation and the label).
func (l *Lab) UseRouteReflectors(ctx context.Context) error {
	if err := l.SetNodeToNodeMesh(ctx, false); err != nil {
		return err
	}
	rr := "has(" + RouteReflectorLabel + ")"
	for _, p := range []*v1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "rr-clients"}, Spec: v1.BGPPeerSpec{NodeSelector: "!" + rr, PeerSelector: rr}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rr-mesh"}, Spec: v1.BGPPeerSpec{NodeSelector: rr, PeerSelector: rr}},
	} {
		if _, err := l.Client.BGPPeers().Create(ctx, p); err != nil {
			return fmt.Errorf("BGPPeer %s: %w", p.Name, err)
		}
	}
	return nil
}

// SetNodeToNodeMesh turns the node-to-node mesh on or off in the default BGPConfiguration
// (made if there is none).
func (l *Lab) SetNodeToNodeMesh(ctx context.Context, on bool) error {
	cfg, err := l.Client.BGPConfigurations().Get(ctx, v1.DefaultBGPConfigurationName)
	switch {
	case apierrors.IsNotFound(err):
		cfg = &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1.DefaultBGPConfigurationName}, Spec: v1.BGPConfigurationSpec{NodeToNodeMeshEnabled: &on}}
		_, err = l.Client.BGPConfigurations().Create(ctx, cfg)
	case err == nil:
		cfg.Spec.NodeToNodeMeshEnabled = &on
		_, err = l.Client.BGPConfigurations().Update(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("BGPConfiguration %s: mesh %v: %w", v1.DefaultBGPConfigurationName, on, err)
	}
	return nil
}
