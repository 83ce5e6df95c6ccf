package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/apis/crds"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
)

// crdSchema is what the API server checks a custom resource against, built from a CRD manifest as
// the server builds it: defaults, the OpenAPI schema, list types and the CEL rules.
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	schemasOnce sync.Once
	schemas     map[string]*crdSchema // by kind
	schemasErr  error
)

// schemaFor loads the CRD of kind from the generated manifests (once: compiling the CEL rules is
// the expensive part).
func schemaFor(t testing.TB, kind string) *crdSchema {
	t.Helper()
	schemasOnce.Do(func() { schemas, schemasErr = loadSchemas() })
	if schemasErr != nil {
		t.Fatal(schemasErr)
	}
	s := schemas[kind]
	if s == nil {
		t.Fatalf("no CRD for kind %s", kind)
	}
	return s
}

func loadSchemas() (map[string]*crdSchema, error) {
	out := map[string]*crdSchema{}
	for _, file := range []string{"tabby.dev_ippools.yaml", "tabby.dev_bgppeers.yaml"} {
		raw, err := crds.FS.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var internal apiextensions.CustomResourceValidation
		if err := apiextv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(crd.Spec.Versions[0].Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("%s: convert schema: %w", file, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("%s: structural schema: %w", file, err)
		}
		v, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("%s: schema validator: %w", file, err)
		}
		out[crd.Spec.Names.Kind] = &crdSchema{structural: s, openAPI: v, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	}
	return out, nil
}

// validate is the API server's verdict on obj (a typed object, written as a client writes it):
// defaults applied, then the OpenAPI schema, list types and CEL rules.
func (s *crdSchema) validate(t testing.TB, obj runtime.Object) field.ErrorList {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("write %+v: %v", obj, err)
	}
	var u map[string]any // integers as int64, as the API server decodes them
	if err := utiljson.Unmarshal(raw, &u); err != nil {
		t.Fatalf("read back %s: %v", raw, err)
	}
	structuraldefaulting.Default(u, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, u, s.openAPI)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, u)...)
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// goOnly tells whether e is one of the rules the schema cannot express: a selector's syntax.
func goOnly(e *field.Error) bool {
	return e.Type == field.ErrorTypeInvalid && (strings.HasSuffix(e.Field, "nodeSelector") || strings.HasSuffix(e.Field, "peerSelector")) &&
		strings.Contains(e.Detail, "selector ")
}

// agree fails t unless the API server's schema and this package decide obj alike: both accept it,
// or both refuse it naming a field in common (by its last element).
// A rule the schema cannot express (goOnly) may refuse alone.
func agree(t *testing.T, obj runtime.Object, goErrs field.ErrorList, s *crdSchema) {
	t.Helper()
	schemaErrs := s.validate(t, obj)
	var strict field.ErrorList
	for _, e := range goErrs {
		if !goOnly(e) {
			strict = append(strict, e)
		}
	}
	switch {
	case len(schemaErrs) == 0 && len(strict) > 0:
		t.Fatalf("the API server accepts %s; apis/validation refuses it: %v", describe(obj), goErrs.ToAggregate())
	case len(schemaErrs) > 0 && len(goErrs) == 0:
		t.Fatalf("apis/validation accepts %s; the API server refuses it: %v", describe(obj), schemaErrs.ToAggregate())
	case len(schemaErrs) > 0 && len(strict) > 0:
		// One refusal may say more than the other (a bad cidr leaves the block size unjudged
		// by the schema, not here), but they share a field.
		text, goText := schemaErrs.ToAggregate().Error(), goErrs.ToAggregate().Error()
		for _, e := range strict {
			if strings.Contains(text, leafOf(e.Field)) {
				return
			}
		}
		for _, e := range schemaErrs {
			if strings.Contains(goText, leafOf(leafOfMessage(e))) {
				return
			}
		}
		t.Fatalf("%s: apis/validation and the API server refuse it for different fields:\n%v\n%v", describe(obj), goText, text)
	}
}

// leafOf is the last element of a field path, without an index: spec.filters[2] is filters.
func leafOf(path string) string {
	path, _, _ = strings.Cut(path[strings.LastIndex(path, ".")+1:], "[")
	return path
}

// leafOfMessage is the field a rule on the spec names in its message ("exactly one of peerIP
// and ..."), for rules whose error is on the spec itself.
func leafOfMessage(e *field.Error) string {
	if e.Field != "spec" {
		return e.Field
	}
	for _, f := range []string{"peerIP", "nodeSelector", "node"} {
		if strings.Contains(e.Detail, f) {
			return f
		}
	}
	return e.Field
}

func describe(obj runtime.Object) string {
	raw, _ := json.Marshal(obj)
	return string(raw)
}

// TestSchemaAgreesOnCases runs the shared case table through the CRD schema in-process: the quick
// form of TestAPIServerAgrees, and the seed of the fuzz targets.
func TestSchemaAgreesOnCases(t *testing.T) {
	for _, tc := range validation.Cases {
		var kind string
		var errs field.ErrorList
		switch o := tc.Obj.(type) {
		default:
			continue
		case *v1.IPPool:
			kind, errs = "IPPool", validation.IPPool(o)
		case *v1.BGPPeer:
			kind, errs = "BGPPeer", validation.BGPPeer(o)
		}
		t.Run(tc.Name, func(t *testing.T) { agree(t, tc.Obj, errs, schemaFor(t, kind)) })
	}
}
