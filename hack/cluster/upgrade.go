package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/hack/cluster/images"
	"github.com/tabbynet/tabby/hack/lab"
)

// Version is a version of tabby a cluster can run: its chart, its binaries, and the tag its
// image is imported under.
type Version struct {
	// Name is what the user named: a tag or commit, or "the working tree".
	Name     string
	Chart    string
	Bin      string
	ImageTag string
}

// WorkingTree is the version of the repository's working tree, built by `make build` into bin.
func WorkingTree(repo, bin string) Version {
	return Version{Name: "the working tree", Chart: filepath.Join(repo, "charts", "tabby"), Bin: bin, ImageTag: ImageTag}
}

// CheckoutVersion checks ref (a release tag such as v0.1.0, or any commit) out of repo with `git
// worktree add` into a directory under dir and builds its binaries there as `make build` does.
// remove takes the checkout away again; it is set whenever the checkout was made.
func CheckoutVersion(ctx context.Context, repo, ref, dir string) (v Version, remove func() error, err error) {
	if _, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return Version{}, nil, fmt.Errorf("version %q is not a tag or commit of this repository (a shallow clone has no tags: run `git fetch --tags`, or `git fetch --unshallow --tags`)", ref)
	}
	tree := filepath.Join(dir, "tabby-"+imageTag(ref))
	if _, err := git(ctx, repo, "worktree", "add", "--detach", tree, ref); err != nil {
		return Version{}, nil, err
	}
	remove = func() error {
		_, err := git(context.WithoutCancel(ctx), repo, "worktree", "remove", "--force", tree)
		return err
	}
	bin := filepath.Join(tree, "bin")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/tabbynet/tabby/internal/version.Version="+ref, "-o", bin+"/", "./cmd/...")
	build.Dir = tree
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return Version{}, remove, fmt.Errorf("build %s: %w: %s", ref, err, out)
	}
	return Version{Name: ref, Chart: filepath.Join(tree, "charts", "tabby"), Bin: bin, ImageTag: imageTag(ref)}, remove, nil
}

func git(ctx context.Context, repo string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// imageTag is a version's image tag: the ref, with what a tag may not hold replaced.
func imageTag(ref string) string { return notInTag.ReplaceAllString(ref, "-") }

// ImportVersion builds the tabby image of v from its binaries with this tree's image builder and
// imports it into every node's containerd under v.ImageTag.
func (c *Cluster) ImportVersion(ctx context.Context, v Version) error {
	as, err := images.WriteArchives(ctx, images.Options{
		Dir: filepath.Join(c.Lab.Dir, "images-"+v.ImageTag), TabbyBin: v.Bin, TabbyTag: v.ImageTag, Only: []string{"tabby"},
	})
	if err != nil {
		return fmt.Errorf("image of %s: %w", v.Name, err)
	}
	paths := make([]string, len(as))
	for i, a := range as {
		paths[i] = a.Path
	}
	return c.eachNode(func(n *Node) error { return n.importImages(ctx, paths) })
}

// InstallVersion installs v's chart with helm, then the cluster's DNS, and waits for both.
func (c *Cluster) InstallVersion(ctx context.Context, v Version, set ...string) error {
	args := []string{"--create-namespace"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if err := c.Helm(ctx, "install", v.Chart, v.ImageTag, args...); err != nil {
		return err
	}
	if err := c.waitTabbyReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	return c.installDNS(ctx)
}

// Rollback runs `helm rollback` of tabby's release to revision.
func (c *Cluster) Rollback(ctx context.Context, revision int) error {
	return c.helm(ctx, "rollback", Release, fmt.Sprint(revision), "--namespace", lab.Namespace, "--kubeconfig", c.Kubeconfig)
}

// ApplyCRDs applies a chart's crds/ as the chart's README tells a user to before `helm upgrade`
// (helm installs CRDs only with the release, never upgrades them).
func (c *Cluster) ApplyCRDs(ctx context.Context, chartDir string) error {
	_, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(chartDir, "crds"))
	return err
}

// CheckCRDVersions: every CRD of tabby's groups stores only versions it still serves, so no
// object is kept in a version the API server can no longer read.
func (c *Cluster) CheckCRDVersions(ctx context.Context) error {
	out, err := c.Kubectl(ctx, "get", "crd", "-o", "json")
	if err != nil {
		return err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				Group    string
				Versions []struct {
					Name   string
					Served bool
				}
			}
			Status struct{ StoredVersions []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return fmt.Errorf("parse CRDs: %w", err)
	}
	var errs []error
	for _, crd := range list.Items {
		if crd.Spec.Group != v1.GroupName && crd.Spec.Group != "policy.networking.k8s.io" {
			continue
		}
		for _, s := range crd.Status.StoredVersions {
			if !slices.ContainsFunc(crd.Spec.Versions, func(v struct {
				Name   string
				Served bool
			}) bool {
				return v.Name == s && v.Served
			}) {
				errs = append(errs, fmt.Errorf("CRD %s: stored version %s is not served", crd.Metadata.Name, s))
			}
		}
	}
	return errors.Join(errs...)
}

// WaitRollout waits until tabby's DaemonSet and Deployments have rolled to the pod template the
// release now has, every tabby-node pod runs the image tagged tag, and every node is Ready with
// a ready tabby-node.
func (c *Cluster) WaitRollout(ctx context.Context, tag string, timeout time.Duration) error {
	kube := c.Lab.Kube
	return lab.Eventually(ctx, timeout, func(ctx context.Context) error {
		dss, err := kube.AppsV1().DaemonSets(lab.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ds := range dss.Items {
			if err := daemonSetRolled(&ds); err != nil {
				return err
			}
		}
		deps, err := kube.AppsV1().Deployments(lab.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, d := range deps.Items {
			if err := deploymentRolled(&d); err != nil {
				return err
			}
		}
		pods, err := kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, ct := range p.Spec.Containers {
				if !strings.HasSuffix(ct.Image, ":"+tag) {
					return fmt.Errorf("pod %s on %s: container %s runs %s, not the tag %s", p.Name, p.Spec.NodeName, ct.Name, ct.Image, tag)
				}
			}
		}
		return c.tabbyReady(ctx)
	})
}

func daemonSetRolled(ds *appsv1.DaemonSet) error {
	s := ds.Status
	if s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled != s.DesiredNumberScheduled ||
		s.NumberAvailable != s.DesiredNumberScheduled || s.NumberUnavailable != 0 {
		return fmt.Errorf("DaemonSet %s rolling: generation %d observed %d, %d of %d updated, %d available",
			ds.Name, ds.Generation, s.ObservedGeneration, s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable)
	}
	return nil
}

func deploymentRolled(d *appsv1.Deployment) error {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return fmt.Errorf("deployment %s rolling: generation %d observed %d, %d of %d updated, %d available, %d in all",
			d.Name, d.Generation, s.ObservedGeneration, s.UpdatedReplicas, want, s.AvailableReplicas, s.Replicas)
	}
	return nil
}

// CheckRoutes compares every node's tabby routes (protocol 201) with what the datastore says
// they must be: a /32 (or /128) to each pod on the node, a blackhole for each of the node's
// blocks, and each other node's blocks via that node. A route left by a deleted pod or a block
// no longer the node's is a leak; a missing one a gap.
func (c *Cluster) CheckRoutes(ctx context.Context) error {
	blocks, err := c.Lab.Blocks(ctx)
	if err != nil {
		return err
	}
	pods, err := c.Lab.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range c.Nodes {
		var want []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != n.Name || p.Spec.HostNetwork || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			for _, ip := range p.Status.PodIPs {
				a, err := netip.ParseAddr(ip.IP)
				if err != nil {
					return fmt.Errorf("pod %s/%s: address %q: %w", p.Namespace, p.Name, ip.IP, err)
				}
				want = append(want, netip.PrefixFrom(a, a.BitLen()).String()+" dev")
			}
		}
		for node, bs := range blocks {
			for _, b := range bs {
				switch other := c.node(node); {
				case node == n.Name:
					want = append(want, "blackhole "+b.String())
				case other != nil:
					gw := other.IP()
					if b.Addr().Is6() {
						gw = other.IP6()
					}
					want = append(want, b.String()+" via "+gw.String())
				}
			}
		}
		rs, err := n.TabbyRoutes(ctx)
		if err != nil {
			return err
		}
		if n.IP6().IsValid() {
			rs6, err := n.TabbyRoutes6(ctx)
			if err != nil {
				return err
			}
			rs = append(rs, rs6...)
		}
		var got []string
		for _, r := range rs {
			s := lab.Canon(r)
			if r.Type != "blackhole" && r.Gateway == "" {
				// A pod's route: its host veth's name depends on the sandbox's ID.
				s, _, _ = strings.Cut(s, " dev ")
				s += " dev"
			} else {
				s, _, _ = strings.Cut(s, " dev ")
			}
			got = append(got, s)
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			errs = append(errs, fmt.Errorf("node %s: tabby routes %q, want %q", n.Name, got, want))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// CheckBGP: every tabby-node, asked through its own pod's tabbyctl (the version it runs), has an
// established session with every other node.
func (c *Cluster) CheckBGP(ctx context.Context) error {
	pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		out, err := c.Kubectl(ctx, "exec", "-n", lab.Namespace, p.Name, "-c", "tabby-node", "--", "tabbyctl", "node", "status")
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", p.Spec.NodeName, err))
			continue
		}
		peers, err := lab.ParsePeers(out)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", p.Spec.NodeName, err))
			continue
		}
		up := 0
		for _, pr := range peers {
			if pr.Established() {
				up++
			}
		}
		if up != len(c.Nodes)-1 || len(peers) != up {
			errs = append(errs, fmt.Errorf("node %s: %d of %d sessions established, want one to each of the %d other nodes: %+v", p.Spec.NodeName, up, len(peers), len(c.Nodes)-1, peers))
		}
	}
	return errors.Join(errs...)
}

// CheckIPAM: `tabbyctl ipam check` finds no leaked or missing allocation.
func (c *Cluster) CheckIPAM(ctx context.Context) error {
	out, err := c.Lab.Tabbyctl(ctx, "ipam", "check")
	if err != nil || !strings.Contains(out, "No problems found") {
		return fmt.Errorf("tabbyctl ipam check: %v\n%s", err, out)
	}
	return nil
}

// AttachPodNetns names the network namespace of a running pod's first container for `ip netns`
// (and lab.InNetns), as name; the returned function removes the name again.
func (c *Cluster) AttachPodNetns(ctx context.Context, p *corev1.Pod, name string) (func() error, error) {
	n := c.node(p.Spec.NodeName)
	if n == nil || len(p.Status.ContainerStatuses) == 0 {
		return nil, fmt.Errorf("pod %s: not running on a node of the cluster", p.Name)
	}
	_, id, ok := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	if !ok {
		return nil, fmt.Errorf("pod %s: no container ID yet", p.Name)
	}
	out, err := n.ctr(ctx, "task", "ls")
	if err != nil {
		return nil, err
	}
	var pid string
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == id {
			pid = f[1]
		}
	}
	if pid == "" {
		return nil, fmt.Errorf("pod %s: no task of container %s on %s", p.Name, id, n.Name)
	}
	if err := run(ctx, "ip", "netns", "attach", name, pid); err != nil {
		return nil, err
	}
	return func() error { return run(context.WithoutCancel(ctx), "ip", "netns", "delete", name) }, nil
}

// CheckPolicy: `tabbyctl policy check` of version v (the tabbyctl that matches the agents'
// rendering) finds every node's chains and ipsets as the policies and pods call for.
func (c *Cluster) CheckPolicy(ctx context.Context, v Version) error {
	var errs []error
	for _, n := range c.Nodes {
		out, err := exec.CommandContext(ctx, filepath.Join(v.Bin, "tabbyctl"), "--kubeconfig", c.Kubeconfig,
			"policy", "check", "--node", n.Name, "--netns", n.NS).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: tabbyctl policy check of %s: %w: %s", n.Name, v.Name, err, out))
		}
	}
	return errors.Join(errs...)
}

// AgentPod is one node's tabby-node pod: when it was created and when it became Ready.
type AgentPod struct {
	Node, Name, UID  string
	Created, ReadyAt time.Time
}

// AgentPods are the tabby-node pods, in the order they were created.
func (c *Cluster) AgentPods(ctx context.Context) ([]AgentPod, error) {
	pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
	if err != nil {
		return nil, err
	}
	var out []AgentPod
	for _, p := range pods.Items {
		a := AgentPod{Node: p.Spec.NodeName, Name: p.Name, UID: string(p.UID), Created: p.CreationTimestamp.Time}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				a.ReadyAt = cond.LastTransitionTime.Time
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// AgentMaxUnavailable is the live tabby-node DaemonSet's rolling update maxUnavailable.
func (c *Cluster) AgentMaxUnavailable(ctx context.Context) (string, error) {
	ds, err := c.Lab.Kube.AppsV1().DaemonSets(lab.Namespace).Get(ctx, "tabby-node", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return "", errors.New("tabby-node's DaemonSet has no rolling update maxUnavailable")
	}
	return ru.MaxUnavailable.String(), nil
}

// configKinds are the kinds users write (IPAM's own kinds change with every pod).
var configKinds = []string{"ippools", "bgpconfigurations", "bgppeers", "bgpfilters", "felixconfigurations"}

// ConfigSpecs are the specs of every object of tabby's configuration kinds, by kind/name.
func (c *Cluster) ConfigSpecs(ctx context.Context) (map[string]any, error) {
	out := map[string]any{}
	for _, k := range configKinds {
		raw, err := c.Kubectl(ctx, "get", k+"."+v1.GroupName, "-o", "json")
		if err != nil {
			return nil, err
		}
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     any
			}
		}
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return nil, fmt.Errorf("parse %s: %w", k, err)
		}
		for _, o := range list.Items {
			out[k+"/"+o.Metadata.Name] = o.Spec
		}
	}
	return out, nil
}

// LostFields lists what of before is not in after: objects gone, and fields of their specs
// missing or changed. A field after has and before had not (a newer chart's default) is not a
// loss.
func LostFields(before, after map[string]any) []string {
	var lost []string
	for key, b := range before {
		a, ok := after[key]
		if !ok {
			lost = append(lost, key+": gone")
			continue
		}
		lost = append(lost, lostIn(key+" spec", b, a)...)
	}
	sort.Strings(lost)
	return lost
}

func lostIn(path string, before, after any) []string {
	bm, ok := before.(map[string]any)
	if !ok {
		// A list or a value: equal as a whole (json.Marshal of decoded JSON cannot fail).
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		if string(a) != string(b) {
			return []string{fmt.Sprintf("%s: %s, was %s", path, a, b)}
		}
		return nil
	}
	am, ok := after.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: no longer an object", path)}
	}
	var lost []string
	for k, bv := range bm {
		av, ok := am[k]
		if !ok {
			lost = append(lost, path+"."+k+": missing")
			continue
		}
		lost = append(lost, lostIn(path+"."+k, bv, av)...)
	}
	return lost
}

// CNITokenBoundTo tells, per node, which pod the token in the CNI plugins' kubeconfig is bound
// to: "" for a token of its own, which outlives tabby-node's pods.
func (c *Cluster) CNITokenBoundTo() (map[string]string, error) {
	out := map[string]string{}
	for _, n := range c.Nodes {
		path := filepath.Join(n.Root, "etc-cni", "net.d", "tabby-kubeconfig")
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var kc struct {
			Users []struct {
				User struct{ Token string }
			}
		}
		if err := json.Unmarshal(raw, &kc); err != nil || len(kc.Users) != 1 {
			return nil, fmt.Errorf("%s: not the kubeconfig install-cni writes: %v", path, err)
		}
		parts := strings.Split(kc.Users[0].User.Token, ".")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s: the token is not a JWT", path)
		}
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			return nil, fmt.Errorf("%s: token claims: %w", path, err)
		}
		var claims struct {
			K8s struct {
				Pod *struct{ Name string }
			} `json:"kubernetes.io"`
		}
		if err := json.Unmarshal(payload, &claims); err != nil {
			return nil, fmt.Errorf("%s: token claims: %w", path, err)
		}
		if claims.K8s.Pod != nil {
			out[n.Name] = claims.K8s.Pod.Name
		} else {
			out[n.Name] = ""
		}
	}
	return out, nil
}
