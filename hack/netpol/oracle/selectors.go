package main

import (
	"encoding/json"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// cyclonus v0.5.6 evaluates label selectors with its own code, which differs from Kubernetes in
// one place: `key NotIn (v…)` does not match an object without the key (Kubernetes: it does —
// apimachinery's labels.Requirement.Matches, and the API reference: "NotIn … or the key does
// not exist"). So the oracle evaluates every selector with apimachinery, the same code the API
// server and every controller use, and hands cyclonus a stand-in: each non-empty selector
// becomes `matchLabels: {<synthetic key>: "true"}`, and exactly the pods (or namespaces) the
// original selects carry that label in the oracle's copy. Empty and absent selectors keep
// their structural meaning (all pods, all namespaces, the policy's own namespace), which is
// cyclonus's to apply.

// syntheticPrefix starts the keys of the stand-in labels; the '/' keeps them out of any real
// label's way (a real key with this prefix would need the domain "netpol-oracle.invalid").
const syntheticPrefix = "netpol-oracle.invalid/"

type world struct {
	policies  []*networkingv1.NetworkPolicy
	podLabels map[string]map[string]string // by namespace/name, with the synthetic labels
	nsLabels  map[string]map[string]string // by name, with the synthetic labels
}

type selectorKind int

const (
	podKind selectorKind = iota
	nsKind
)

func rewriteSelectors(policies []*networkingv1.NetworkPolicy, namespaces map[string]map[string]string, pods []Pod) (*world, error) {
	w := &world{podLabels: map[string]map[string]string{}, nsLabels: map[string]map[string]string{}}
	for _, p := range pods {
		w.podLabels[p.Namespace+"/"+p.Name] = copyLabels(p.Labels)
	}
	for name, l := range namespaces {
		w.nsLabels[name] = copyLabels(l)
	}
	seen := map[string]string{} // kind + serialised selector -> synthetic key
	n := 0
	replace := func(sel *metav1.LabelSelector, kind selectorKind, where string) (*metav1.LabelSelector, error) {
		if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
			return sel, nil
		}
		raw, err := json.Marshal(sel)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("%d:%s", kind, raw)
		key, ok := seen[id]
		if !ok {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				return nil, fmt.Errorf("%s: selector %s: %w", where, raw, err)
			}
			n++
			key = fmt.Sprintf("%ssel-%d", syntheticPrefix, n)
			seen[id] = key
			target := w.podLabels
			if kind == nsKind {
				target = w.nsLabels
			}
			for _, l := range target {
				if s.Matches(labels.Set(stripSynthetic(l))) {
					l[key] = "true"
				}
			}
		}
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: "true"}}, nil
	}
	peers := func(ps []networkingv1.NetworkPolicyPeer, where string) error {
		for i := range ps {
			var err error
			at := fmt.Sprintf("%s[%d]", where, i)
			if ps[i].PodSelector, err = replace(ps[i].PodSelector, podKind, at+".podSelector"); err != nil {
				return err
			}
			if ps[i].NamespaceSelector, err = replace(ps[i].NamespaceSelector, nsKind, at+".namespaceSelector"); err != nil {
				return err
			}
		}
		return nil
	}
	for _, orig := range policies {
		p := orig.DeepCopy()
		name := p.Namespace + "/" + p.Name
		sel, err := replace(&p.Spec.PodSelector, podKind, name+": spec.podSelector")
		if err != nil {
			return nil, err
		}
		p.Spec.PodSelector = *sel
		for i := range p.Spec.Ingress {
			if err := peers(p.Spec.Ingress[i].From, fmt.Sprintf("%s: spec.ingress[%d].from", name, i)); err != nil {
				return nil, err
			}
		}
		for i := range p.Spec.Egress {
			if err := peers(p.Spec.Egress[i].To, fmt.Sprintf("%s: spec.egress[%d].to", name, i)); err != nil {
				return nil, err
			}
		}
		w.policies = append(w.policies, p)
	}
	return w, nil
}

func copyLabels(l map[string]string) map[string]string {
	c := make(map[string]string, len(l))
	for k, v := range l {
		c[k] = v
	}
	return c
}

// stripSynthetic hides the stand-in labels added so far from the next selector.
func stripSynthetic(l map[string]string) map[string]string {
	c := make(map[string]string, len(l))
	for k, v := range l {
		if len(k) < len(syntheticPrefix) || k[:len(syntheticPrefix)] != syntheticPrefix {
			c[k] = v
		}
	}
	return c
}
