// Package auth lets tabby-typha (and tabby-node's observation endpoint) serve a caller only what
// the API server would: the caller's bearer token is checked with a TokenReview, and its right
// to the resource (list and watch for tabby-typha) with a SubjectAccessReview. Answers are cached for a minute (a refusal for ten seconds), so a
// thousand agents reconnecting cost the API server a token review each and an access review
// per resource, not reviews per request.
package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Reviewer asks the API server.
type Reviewer struct {
	authn, authz rest.Interface
	allowTTL     time.Duration
	denyTTL      time.Duration
	now          func() time.Time

	mu sync.Mutex
	// users: who a token is (by its hash; the token itself is not kept). Every agent has a
	// token of its own, so a thousand agents reconnecting cost a thousand token reviews.
	users map[[sha256.Size]byte]cached[authnv1.UserInfo]
	// rights: whether an identity may list and watch a resource. Every agent is the same
	// service account: a thousand agents cost one access review per resource.
	rights map[rightKey]cached[struct{}]
	// asking: one review in flight per token or right; an agent's eight first requests arrive
	// together.
	asking singleflight.Group
}

type rightKey struct {
	user     string // user, uid and groups
	resource schema.GroupVersionResource
	verbs    string
}

type cached[T any] struct {
	v       T
	err     error
	expires time.Time
}

// maxEntries bounds each cache: past it, the cache starts again.
const maxEntries = 20000

// New reviews through the API server at cfg; the identity of cfg needs create on tokenreviews
// and subjectaccessreviews (the system:auth-delegator ClusterRole).
func New(cfg *rest.Config) (*Reviewer, error) {
	scheme := runtime.NewScheme()
	if err := authnv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := authzv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mk := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &gv, "/apis"
		c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		// client-go's default of 5 a second held agents' first requests a second and more
		// when a few connected at once.
		if c.QPS == 0 {
			c.QPS, c.Burst = 100, 200
		}
		return rest.RESTClientFor(c)
	}
	authn, err := mk(authnv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("tokenreview client: %w", err)
	}
	authz, err := mk(authzv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("subjectaccessreview client: %w", err)
	}
	return &Reviewer{authn: authn, authz: authz, allowTTL: time.Minute, denyTTL: 10 * time.Second, now: time.Now,
		users: map[[sha256.Size]byte]cached[authnv1.UserInfo]{}, rights: map[rightKey]cached[struct{}]{}}, nil
}

// Authorize answers whether token may list and watch resource: nil, 401 or 403 (as API
// statuses), or the review's own failure (503, not cached).
func (r *Reviewer) Authorize(ctx context.Context, token string, resource schema.GroupVersionResource) error {
	return r.AuthorizeVerbs(ctx, token, resource, "list", "watch")
}

// AuthorizeVerbs answers whether token may do every one of verbs on resource cluster-wide, as
// Authorize does.
func (r *Reviewer) AuthorizeVerbs(ctx context.Context, token string, resource schema.GroupVersionResource, verbs ...string) error {
	user, err := lookup(r, r.users, sha256.Sum256([]byte(token)), func() (authnv1.UserInfo, bool, error) { return r.authenticate(ctx, token) })
	if err != nil {
		return err
	}
	key := rightKey{user: user.Username + "\x00" + user.UID + "\x00" + strings.Join(user.Groups, "\x00"), resource: resource, verbs: strings.Join(verbs, ",")}
	_, err = lookup(r, r.rights, key, func() (struct{}, bool, error) { return r.authorize(ctx, user, resource, verbs) })
	return err
}

// lookup answers from m, or asks (once for all callers at that moment) and keeps the answer
// when it is final: a yes for allowTTL, a no for denyTTL.
func lookup[K comparable, V any](r *Reviewer, m map[K]cached[V], key K, ask func() (V, bool, error)) (V, error) {
	get := func() (cached[V], bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		c, ok := m[key]
		return c, ok && r.now().Before(c.expires)
	}
	if c, ok := get(); ok {
		return c.v, c.err
	}
	res, _, _ := r.asking.Do(fmt.Sprint(key), func() (any, error) {
		if c, ok := get(); ok { // answered while this caller waited for the lock
			return c, nil
		}
		v, final, err := ask()
		c := cached[V]{v: v, err: err}
		if !final {
			return c, nil
		}
		ttl := r.allowTTL
		if err != nil {
			ttl = r.denyTTL
		}
		c.expires = r.now().Add(ttl)
		r.mu.Lock()
		if len(m) >= maxEntries {
			clear(m)
		}
		m[key] = c
		r.mu.Unlock()
		return c, nil
	})
	c := res.(cached[V])
	return c.v, c.err
}

// authenticate asks who token is; final is false when the API server could not answer.
func (r *Reviewer) authenticate(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	out := &authnv1.TokenReview{}
	if err := r.authn.Post().Resource("tokenreviews").Body(tr).Do(ctx).Into(out); err != nil {
		return authnv1.UserInfo{}, false, apierrors.NewServiceUnavailable(fmt.Sprintf("token review: %v", err))
	}
	if !out.Status.Authenticated {
		return authnv1.UserInfo{}, true, apierrors.NewUnauthorized("token not accepted by the API server: " + out.Status.Error)
	}
	return out.Status.User, true, nil
}

// authorize asks whether u may do verbs on resource cluster-wide; final is false when the
// API server could not answer. The answer is kept for the user and its groups: RBAC reads no
// more, while the extra of a pod-bound token (pod name, node) differs from agent to agent.
func (r *Reviewer) authorize(ctx context.Context, u authnv1.UserInfo, resource schema.GroupVersionResource, verbs []string) (struct{}, bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	for _, verb := range verbs {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: resource.Group, Version: resource.Version, Resource: resource.Resource},
		}}
		res := &authzv1.SubjectAccessReview{}
		if err := r.authz.Post().Resource("subjectaccessreviews").Body(sar).Do(ctx).Into(res); err != nil {
			return struct{}{}, false, apierrors.NewServiceUnavailable(fmt.Sprintf("access review: %v", err))
		}
		if !res.Status.Allowed {
			return struct{}{}, true, apierrors.NewForbidden(resource.GroupResource(), "", fmt.Errorf("user %q cannot %s %s cluster-wide", u.Username, verb, resource.Resource))
		}
	}
	return struct{}{}, true, nil
}
