package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/hack/lab"
)

const (
	// DNSServiceIP is the cluster DNS Service's ClusterIP, which kubelet writes into every pod's
	// resolv.conf: the tenth address of testenv.ServiceCIDR, as kubeadm picks it.
	DNSServiceIP = "10.96.0.10"
	// ClusterDomain is the DNS domain of Services and pods.
	ClusterDomain = "cluster.local"
	// dnsNamespace and dnsApp are where kubeadm's add-on runs and its pods' label; the e2e
	// tests look for the DNS pods by k8s-app=kube-dns in kube-system.
	dnsNamespace = "kube-system"
	dnsApp       = "kube-dns"
	dnsName      = "coredns"
)

// corefile is kubeadm's (cmd/kubeadm/app/phases/addons/dns) without its `forward .
// /etc/resolv.conf`: nothing outside the cluster is reachable, and pods must not query the
// machine's resolver. An empty root zone answers every other name instead, with NXDOMAIN and an
// SOA to cache it by, where without it CoreDNS would answer SERVFAIL ("no next plugin found"),
// which resolvers take for a failure to retry instead of a name that does not exist.
const corefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    file /etc/coredns/db.root .
    cache 30 {
       disable success ` + ClusterDomain + `
       disable denial ` + ClusterDomain + `
    }
    loop
    reload
    loadbalance
}
`

// rootZone is the zone of every name outside the cluster: its SOA alone, so that every name in
// it does not exist. The SOA's last field is how long resolvers cache that answer.
const rootZone = `. 30 IN SOA ns.dns.` + ClusterDomain + `. hostmaster.` + ClusterDomain + `. 1 7200 1800 86400 30
`

// installDNS creates what kubeadm's CoreDNS add-on creates (service account and its RBAC,
// Corefile, Deployment, the kube-dns Service at DNSServiceIP) and waits until a CoreDNS pod is
// Ready. It needs the pod network: CoreDNS runs in pods like any add-on.
func (c *Cluster) installDNS(ctx context.Context) error {
	start := time.Now()
	kube := c.Lab.Kube
	opts := metav1.CreateOptions{}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: dnsNamespace, Labels: map[string]string{"k8s-app": dnsApp}}
	}
	if _, err := kube.CoreV1().ServiceAccounts(dnsNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(dnsName)}, opts); err != nil {
		return fmt.Errorf("dns: service account: %w", err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, opts); err != nil {
		return fmt.Errorf("dns: cluster role: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dnsName, Namespace: dnsNamespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, opts); err != nil {
		return fmt.Errorf("dns: cluster role binding: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta(dnsName), Data: map[string]string{"Corefile": corefile, "db.root": rootZone}}
	if _, err := kube.CoreV1().ConfigMaps(dnsNamespace).Create(ctx, cm, opts); err != nil {
		return fmt.Errorf("dns: config map: %w", err)
	}
	if _, err := kube.AppsV1().Deployments(dnsNamespace).Create(ctx, dnsDeployment(), opts); err != nil {
		return fmt.Errorf("dns: deployment: %w", err)
	}
	svc := &corev1.Service{
		ObjectMeta: meta(dnsApp),
		Spec: corev1.ServiceSpec{
			ClusterIP: DNSServiceIP,
			Selector:  map[string]string{"k8s-app": dnsApp},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	svc.Labels["kubernetes.io/cluster-service"] = "true"
	svc.Labels["kubernetes.io/name"] = "CoreDNS"
	if _, err := kube.CoreV1().Services(dnsNamespace).Create(ctx, svc, opts); err != nil {
		return fmt.Errorf("dns: service %s: %w", DNSServiceIP, err)
	}
	if err := c.waitDNSReady(ctx, 3*time.Minute); err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	c.log.Info("cluster DNS ready", "service", DNSServiceIP, "image", CoreDNSImage, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// dnsDeployment is kubeadm's CoreDNS Deployment, with one replica (enough for one machine), the
// image that was imported (nothing to pull), and a toleration for not-ready nodes.
func dnsDeployment() *appsv1.Deployment {
	labels := map[string]string{"k8s-app": dnsApp}
	port := func(name string, n int32, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: n, Protocol: proto}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: dnsName, Namespace: dnsNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: dnsName,
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
						// The node lifecycle controller lifts this taint a while after the node
						// turned Ready; DNS, which the rest of the cluster waits for, need not wait.
						{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					},
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					// CoreDNS resolves nothing through the node's resolver; ClusterFirst would
					// point it at itself.
					DNSPolicy: corev1.DNSDefault,
					Containers: []corev1.Container{{
						Name:            dnsName,
						Image:           CoreDNSImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Resources: corev1.ResourceRequirements{
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
						Ports: []corev1.ContainerPort{
							port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP),
							port("metrics", 9153, corev1.ProtocolTCP),
							port("liveness-probe", 8080, corev1.ProtocolTCP), port("readiness-probe", 8181, corev1.ProtocolTCP),
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("liveness-probe")}},
							InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5,
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("readiness-probe")}},
							PeriodSeconds: 1,
						},
						// Port 53 needs NET_BIND_SERVICE, the only capability CoreDNS keeps.
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: new(false),
							Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
							ReadOnlyRootFilesystem:   new(true),
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "config-volume",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: dnsName},
							Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}, {Key: "db.root", Path: "db.root"}},
						}},
					}},
				},
			},
		},
	}
}

// waitDNSReady waits for a Ready CoreDNS pod, saying what holds it up until then.
func (c *Cluster) waitDNSReady(ctx context.Context, timeout time.Duration) error {
	return lab.Eventually(ctx, timeout, func(context.Context) error {
		pods, err := c.Lab.Kube.CoreV1().Pods(dnsNamespace).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + dnsApp})
		if err != nil {
			return err
		}
		var states []string
		for _, p := range pods.Items {
			if podReady(&p) {
				return nil
			}
			s := fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil {
					s += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
				}
				if cs.RestartCount > 0 {
					s += fmt.Sprintf(" (%d restarts)", cs.RestartCount)
				}
			}
			states = append(states, s)
		}
		return fmt.Errorf("no ready CoreDNS pod: [%s]", strings.Join(states, "; "))
	})
}
