// Package auth lets tabby-typha serve a caller only what the API server would: the caller's
// bearer token is checked with a TokenReview, and its right to list and watch the resource with
// a SubjectAccessReview. Answers are cached, so a thousand agents reconnecting cost the API server
// a review per agent and resource, not one per request.
package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

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

	mu    sync.Mutex
	cache map[cacheKey]answer
}

type cacheKey struct {
	token    [sha256.Size]byte // never the token itself
	resource schema.GroupVersionResource
}

type answer struct {
	err     error
	expires time.Time
}

// maxEntries bounds the cache: past it, the cache starts again (a thousand agents and eight
// resources are 8,000 entries).
const maxEntries = 50000

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
	return &Reviewer{authn: authn, authz: authz, allowTTL: time.Minute, denyTTL: 10 * time.Second, now: time.Now, cache: map[cacheKey]answer{}}, nil
}

// Authorize answers whether token may list and watch resource: nil, 401 or 403 (as API
// statuses), or the review's own failure (not cached).
func (r *Reviewer) Authorize(ctx context.Context, token string, resource schema.GroupVersionResource) error {
	key := cacheKey{token: sha256.Sum256([]byte(token)), resource: resource}
	now := r.now()
	r.mu.Lock()
	a, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(a.expires) {
		return a.err
	}
	final, err := r.review(ctx, token, resource)
	if !final {
		return err
	}
	ttl := r.allowTTL
	if err != nil {
		ttl = r.denyTTL
	}
	r.mu.Lock()
	if len(r.cache) >= maxEntries {
		r.cache = map[cacheKey]answer{}
	}
	r.cache[key] = answer{err: err, expires: now.Add(ttl)}
	r.mu.Unlock()
	return err
}

// review asks the API server; final is false when it could not answer.
func (r *Reviewer) review(ctx context.Context, token string, resource schema.GroupVersionResource) (final bool, err error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	out := &authnv1.TokenReview{}
	if err := r.authn.Post().Resource("tokenreviews").Body(tr).Do(ctx).Into(out); err != nil {
		return false, apierrors.NewServiceUnavailable(fmt.Sprintf("token review: %v", err))
	}
	if !out.Status.Authenticated {
		return true, apierrors.NewUnauthorized("token not accepted by the API server: " + out.Status.Error)
	}
	u := out.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	for _, verb := range []string{"list", "watch"} {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: resource.Group, Version: resource.Version, Resource: resource.Resource},
		}}
		res := &authzv1.SubjectAccessReview{}
		if err := r.authz.Post().Resource("subjectaccessreviews").Body(sar).Do(ctx).Into(res); err != nil {
			return false, apierrors.NewServiceUnavailable(fmt.Sprintf("access review: %v", err))
		}
		if !res.Status.Allowed {
			return true, apierrors.NewForbidden(resource.GroupResource(), "", fmt.Errorf("user %q cannot %s %s cluster-wide", u.Username, verb, resource.Resource))
		}
	}
	return true, nil
}
