package netpol

import (
	"maps"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
)

// Baseline is the case every run starts with: no policy, so everything is allowed. It proves
// the harness (servers, probes, oracle) before any policy does anything.
func Baseline() Case { return One("no-policies") }

// UpstreamCases are the scenarios of the Kubernetes NetworkPolicy e2e tests
// (test/e2e/network/netpol/network_policy.go), as policies; where a test has several steps,
// so does the case. The expectations are the oracle's, on all nine pods and every port and
// protocol, not only the pods and port the upstream test looks at. Upstream tests that repeat
// another's policy for UDP or SCTP are left out: every case is probed over TCP and UDP anyway.
func UpstreamCases(w *World) []Case {
	podA := Labels("pod", "a")
	nsY := Labels(MetadataName, "y")
	notX := Exprs(Req(MetadataName, NotIn, "x"))
	bIP := w.IP("x/b")
	// Upstream's makeLargeCIDRForIP: the /4 around the address.
	large := netip.PrefixFrom(bIP, 4).Masked().String()

	return []Case{
		One("default-deny-ingress", Policy("x", "deny-ingress", Labels()).Ingress().P()),
		One("default-deny-all", Policy("x", "deny-all", Labels()).Ingress().Egress().P()),
		One("allow-from-pod-by-podselector",
			Policy("x", "x-a-allows-x-b", podA).Ingress(From(Pods(Labels("pod", "b")))).P()),
		One("allow-ingress-for-a-target",
			Policy("x", "deny-all", Labels()).Ingress().P(),
			Policy("x", "allow-all-to-a", podA).Ingress(From(PodsIn(Labels(), Labels()))).P()),
		One("allow-from-all-namespaces",
			Policy("x", "allow-from-another-ns", podA).Ingress(From(NamespacesOf(Labels()))).P()),
		One("allow-only-from-namespace-y",
			Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(nsY))).P()),
		One("podselector-matchexpressions",
			Policy("x", "x-a-allows-x-b", podA).Ingress(From(Pods(Exprs(Req("pod", In, "b"))))).P()),
		One("namespaceselector-matchexpressions",
			Policy("x", "allow-ns-y-match-selector", podA).Ingress(From(NamespacesOf(Exprs(Req(MetadataName, In, "y"))))).P()),
		One("podselector-or-namespaceselector",
			Policy("x", "allow-ns-y-match-selector", podA).Ingress(From(NamespacesOf(notX), Pods(Labels("pod", "b")))).P()),
		One("podselector-and-namespaceselector",
			Policy("x", "allow-ns-y-podselector-and-nsselector", podA).Ingress(From(PodsIn(notX, Labels("pod", "b")))).P()),
		One("multiple-podselectors-and-namespaceselectors",
			Policy("x", "allow-ns-y-z-pod-b-c", podA).Ingress(From(PodsIn(notX, Exprs(Req("pod", In, "b", "c"))))).P()),
		One("any-podselectors",
			Policy("x", "allow-ns-x-pod-b-c", podA).Ingress(From(Pods(Labels("pod", "b")), Pods(Labels("pod", "c")))).P()),
		One("pod-in-other-namespace",
			Policy("x", "allow-ns-y-pod-a-via-namespace-pod-selector", podA).Ingress(From(PodsIn(nsY, podA))).P()),
		One("ports",
			Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(nsY)).On(TCP(81))).P()),
		{Name: "stacked-policies", Steps: []Step{
			{Note: "allow 81 from y", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(nsY)).On(TCP(81))).P()}},
			{Note: "add a policy allowing 80 from y", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(nsY)).On(TCP(81))).P(),
				Policy("x", "allow-client-a-via-ns-selector-80", podA).Ingress(From(NamespacesOf(nsY)).On(TCP(80))).P()}},
		}},
		One("allow-all", Policy("x", "allow-all", Labels()).Ingress(AnyPeer()).P()),
		One("ingress-named-port",
			Policy("x", "allow-all", Labels()).Ingress(AnyPeer().On(Named("serve-81-tcp"))).P()),
		One("ingress-named-port-from-namespace",
			Policy("x", "allow-client-a-via-ns-selector-80", podA).Ingress(From(NamespacesOf(nsY)).On(NamedAs("serve-80-tcp", protoTCP))).P()),
		One("egress-named-port",
			Policy("x", "allow-egress", Labels()).Egress(AnyPeer().On(Named("serve-80-tcp"))).P()),
		{Name: "updated-policy", Steps: []Step{
			{Note: "allow all", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-all-mutate-to-deny-all", Labels()).Ingress(AnyPeer()).P()}},
			{Note: "update it to deny all", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-all-mutate-to-deny-all", Labels()).Ingress().P()}},
		}},
		{Name: "updated-namespace-labels", Steps: []Step{
			{Note: "allow from ns2=updated: nobody", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(Labels("ns2", "updated")))).P()}},
			{Note: "label y ns2=updated", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-ns-selector", podA).Ingress(From(NamespacesOf(Labels("ns2", "updated")))).P()},
				NamespaceLabels: map[string]map[string]string{"y": with(BaseNamespaceLabels("y"), "ns2", "updated")}},
		}},
		{Name: "updated-pod-labels", Steps: []Step{
			{Note: "allow from pod=b,pod2=updated: nobody", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-pod-selector", podA).Ingress(From(Pods(Labels("pod", "b", "pod2", "updated")))).P()}},
			{Note: "label x/b pod2=updated", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-pod-selector", podA).Ingress(From(Pods(Labels("pod", "b", "pod2", "updated")))).P()},
				PodLabels: map[string]map[string]string{"x/b": with(BasePodLabels("b"), "pod2", "updated")}},
		}},
		One("deny-ingress-from-other-namespaces",
			Policy("x", "deny-empty-policy", Labels()).Ingress(From(Pods(Labels()))).P()),
		{Name: "deny-ingress-to-updated-pod", Steps: []Step{
			{Note: "isolate target=isolated: nobody", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "deny-ingress-via-label-selector", Labels("target", "isolated")).Ingress().P()}},
			{Note: "label x/a target=isolated", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "deny-ingress-via-label-selector", Labels("target", "isolated")).Ingress().P()},
				PodLabels: map[string]map[string]string{"x/a": with(BasePodLabels("a"), "target", "isolated")}},
		}},
		One("deny-egress-by-podselector", Policy("x", "deny-egress-pod-a", podA).Egress().P()),
		One("deny-egress-all-namespace", Policy("x", "deny-egress-ns-x", Labels()).Egress().P()),
		One("ingress-and-egress-together",
			Policy("x", "allow-client-a-via-pod-selector", podA).
				Ingress(From(Pods(Labels("pod", "b")))).
				Egress(AnyPeer().On(Port(80))).P()),
		One("egress-denied-client-side",
			Policy("x", "allow-to-ns-y-pod-a", podA).Egress(To(PodsIn(nsY, podA))).P(),
			Policy("y", "allow-from-xa-on-ya-match-selector", podA).Ingress(From(PodsIn(Labels(MetadataName, "x"), podA))).P(),
			Policy("y", "allow-from-xa-on-yb-match-selector", Labels("pod", "b")).Ingress(From(PodsIn(Labels(MetadataName, "x"), podA))).P()),
		One("egress-to-pod-in-other-namespace",
			Policy("x", "allow-to-ns-y-pod-a", podA).Egress(To(PodsIn(nsY, podA))).P()),
		One("ingress-any-port-by-protocol",
			Policy("x", "allow-ingress-by-proto", podA).Ingress(AnyPeer().On(AllOf(protoTCP))).P()),
		{Name: "ingress-allow-all-precedence", Steps: []Step{
			{Note: "allow only 80", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-ingress-port-80", Labels()).Ingress(AnyPeer().On(Port(80))).P()}},
			{Note: "add allow all", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-ingress-port-80", Labels()).Ingress(AnyPeer().On(Port(80))).P(),
				Policy("x", "allow-ingress", Labels()).Ingress(AnyPeer()).P()}},
		}},
		{Name: "egress-allow-all-precedence", Steps: []Step{
			{Note: "allow only 80", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-egress-port-80", Labels()).Egress(AnyPeer().On(Port(80))).P()}},
			{Note: "add allow all", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-egress-port-80", Labels()).Egress(AnyPeer().On(Port(80))).P(),
				Policy("x", "allow-egress", Labels()).Egress(AnyPeer()).P()}},
		}},
		{Name: "stop-enforcing-after-delete", Steps: []Step{
			{Note: "deny all in and out of x", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "deny-all", Labels()).Ingress().Egress().P()}},
			{Note: "delete it"},
		}},
		One("egress-to-cidr",
			Policy("x", "allow-client-a-via-cidr-egress-rule", podA).Egress(To(CIDR(netip.PrefixFrom(w.IP("y/b"), 32).String()))).P()),
		One("egress-cidr-except",
			Policy("x", "allow-client-a-via-cidr-egress-rule", podA).Egress(To(CIDR(large, netip.PrefixFrom(bIP, 32).String()))).P()),
		{Name: "egress-cidr-except-then-replaced", Steps: []Step{
			{Note: "allow the /4 except x/b", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-cidr-egress-rule", podA).Egress(To(CIDR(large, netip.PrefixFrom(bIP, 32).String()))).P()}},
			// Upstream updates the policy of the same name: x/b's /32 replaces the /4.
			{Note: "replace it by x/b's /32", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-client-a-via-cidr-egress-rule", podA).Egress(To(CIDR(netip.PrefixFrom(bIP, 32).String()))).P()}},
		}},
		{Name: "independent-ingress-and-egress", Steps: []Step{
			{Note: "allow all egress of x/a", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-egress-for-target", podA).Egress(AnyPeer()).P()}},
			{Note: "deny all ingress of x/a", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "allow-egress-for-target", podA).Egress(AnyPeer()).P(),
				Policy("x", "deny-ingress-via-label-selector", podA).Ingress().P()}},
		}},
		One("sctp-is-not-tcp",
			Policy("x", "deny-ingress", Labels()).Ingress().P(),
			Policy("x", "allow-only-sctp-ingress-on-port-81", podA).Ingress(AnyPeer().On(SCTP(81))).P()),
		One("sctp-only-policy-isolates",
			Policy("x", "allow-only-sctp-ingress-on-port-80", podA).Ingress(AnyPeer().On(SCTP(80))).P()),
		One("udp-only-policy-is-not-tcp",
			Policy("x", "allow-only-udp-ingress-on-port-81", podA).Ingress(AnyPeer().On(UDP(81))).P()),
		One("egress-namespaceselector-notin",
			Policy("x", "allow-ns-y-match-selector-for-immutable-ns-label", podA).Egress(To(NamespacesOf(Exprs(Req(MetadataName, NotIn, "y"))))).P()),
		One("udp-ports",
			Policy("x", "allow-ingress-on-port-81-ns-x", podA).Ingress(From(NamespacesOf(nsY)).On(UDP(81))).P()),
		One("sctp-ports",
			Policy("x", "allow-ingress-on-port-81-ns-x", podA).Ingress(From(NamespacesOf(nsY)).On(SCTP(81))).P()),
	}
}

// MoreCases go beyond upstream where its tests leave semantics unprobed: overlapping ipBlocks
// in two policies, endPort, named ports that differ per pod and per protocol, NotIn and
// DoesNotExist on labels some pods lack, policyTypes defaulted by the API server, relabels
// that take access away, in-place updates of ports.
func MoreCases(w *World) []Case {
	bIP := netip.PrefixFrom(w.IP("x/b"), 32).String()
	large := netip.PrefixFrom(w.IP("x/b"), 4).Masked().String()
	podCIDR := netip.PrefixFrom(w.IP("x/a"), 16).Masked().String()
	dev := Labels("env", "dev")
	return []Case{
		// What the except of one policy carves out, another policy may still allow: the union.
		One("cidr-except-and-allow-in-two-policies",
			Policy("x", "large-except-b", Labels("pod", "a")).Egress(To(CIDR(large, bIP))).P(),
			Policy("x", "only-b", Labels("pod", "a")).Egress(To(CIDR(bIP))).P()),
		One("endport-ingress",
			Policy("x", "ranges", Labels()).Ingress(From(NamespacesOf(Labels("ns", "y"))).On(Range(81, 90, protoUDP), Range(79, 80, protoTCP))).P()),
		One("endport-egress",
			Policy("y", "ranges", Labels()).Egress(AnyPeer().On(Range(81, 81, protoTCP), Range(1, 80, protoUDP))).P()),
		// "dns" is a's 81/TCP and b's 81/UDP; "web" is c's 80/TCP.
		One("named-ports-per-pod-and-protocol",
			Policy("x", "named", Labels()).Ingress(
				AnyPeer().On(Named("dns")),
				From(NamespacesOf(Labels("ns", "z"))).On(NamedAs("dns", protoUDP), Named("web"))).P()),
		One("egress-named-ports-per-destination",
			Policy("z", "named-out", Labels()).Egress(AnyPeer().On(Named("web"), NamedAs("dns", protoUDP), NamedAs("serve-80-udp", protoUDP))).P()),
		// c has no tier: NotIn selects it, as Kubernetes defines.
		One("notin-selects-pods-without-the-key",
			Policy("y", "from-not-frontend", Labels()).Ingress(From(PodsIn(Labels(), Exprs(Req("tier", NotIn, "frontend"))))).P()),
		One("exists-and-doesnotexist",
			Policy("z", "tiered-out", Exprs(Req("tier", Exists))).Egress(To(PodsIn(Exprs(Req("env", Exists)), Exprs(Req("tier", DoesNotExist))))).P()),
		One("policy-selecting-no-pod",
			Policy("z", "nobody", Labels("pod", "nobody")).Ingress().Egress().P()),
		// No policyTypes: the API server makes them Ingress and Egress (there are egress
		// rules), so x/a loses all ingress although the policy has no ingress rule.
		One("policytypes-defaulted-by-the-server",
			Raw("x", "implicit-types", networkingv1.NetworkPolicySpec{
				PodSelector: *Labels("pod", "a"),
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{NamespacesOf(Labels("ns", "y"))}}},
			})),
		One("ingress-ipblock-pod-and-outside-only",
			Policy("y", "cidrs", Labels()).Ingress(From(
				CIDR(netip.PrefixFrom(w.IP("x/a"), 32).String()),
				CIDR("0.0.0.0/0", podCIDR))).P()),
		{Name: "namespace-relabel-takes-access-away", Steps: []Step{
			{Note: "allow from env=dev (y)", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "from-dev", Labels()).Ingress(From(NamespacesOf(dev))).P()}},
			{Note: "y becomes env=prod, z env=dev", Policies: []*networkingv1.NetworkPolicy{
				Policy("x", "from-dev", Labels()).Ingress(From(NamespacesOf(dev))).P()},
				NamespaceLabels: map[string]map[string]string{
					"y": with(BaseNamespaceLabels("y"), "env", "prod"),
					"z": with(BaseNamespaceLabels("z"), "env", "dev"),
				}},
		}},
		{Name: "pod-relabel-moves-isolation", Steps: []Step{
			{Note: "isolate tier=backend (b) everywhere", Policies: isolateTier()},
			{Note: "x/c becomes backend, x/b loses its tier", Policies: isolateTier(),
				PodLabels: map[string]map[string]string{
					"x/c": with(BasePodLabels("c"), "tier", "backend"),
					"x/b": without(BasePodLabels("b"), "tier"),
				}},
		}},
		One("rules-with-their-own-ports",
			Policy("z", "two-rules", Labels("pod", "a")).Ingress(
				From(NamespacesOf(Labels("ns", "x"))).On(TCP(80)),
				From(NamespacesOf(Labels("ns", "y"))).On(UDP(81))).P()),
		One("deny-everything-everywhere",
			Policy("x", "deny", Labels()).Ingress().Egress().P(),
			Policy("y", "deny", Labels()).Ingress().Egress().P(),
			Policy("z", "deny", Labels()).Ingress().Egress().P()),
		One("same-namespace-only-everywhere",
			Policy("x", "own", Labels()).Ingress(From(Pods(Labels()))).P(),
			Policy("y", "own", Labels()).Ingress(From(Pods(Labels()))).P(),
			Policy("z", "own", Labels()).Ingress(From(Pods(Labels()))).P()),
		One("egress-udp-only",
			Policy("x", "udp-out", Labels()).Egress(AnyPeer().On(AllOf(protoUDP))).P()),
		{Name: "policy-ports-updated-in-place", Steps: []Step{
			{Note: "allow 80 from y", Policies: []*networkingv1.NetworkPolicy{
				Policy("z", "from-y", Labels()).Ingress(From(NamespacesOf(Labels("ns", "y"))).On(Port(80))).P()}},
			{Note: "same policy, now 81/UDP", Policies: []*networkingv1.NetworkPolicy{
				Policy("z", "from-y", Labels()).Ingress(From(NamespacesOf(Labels("ns", "y"))).On(UDP(81))).P()}},
		}},
	}
}

func isolateTier() []*networkingv1.NetworkPolicy {
	var ps []*networkingv1.NetworkPolicy
	for _, ns := range Namespaces {
		ps = append(ps, Policy(ns, "isolate-backend", Labels("tier", "backend")).Ingress().P())
	}
	return ps
}

func with(l map[string]string, k, v string) map[string]string {
	c := maps.Clone(l)
	c[k] = v
	return c
}

func without(l map[string]string, k string) map[string]string {
	c := maps.Clone(l)
	delete(c, k)
	return c
}
