// Package manifest reads tabby objects from multi-document YAML (or JSON) files and validates
// them before anything is written, with errors that name the file, the document, the field and
// the value: `pools.yaml: document 2 (IPPool "bad"): spec.blockSize: Invalid value: 19: ...`.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/tabbyctl/nodeview"
)

// Object is one tabby object: *v1.IPPool, *v1.BGPPeer, *v1.BGPConfiguration,
// *v1.FelixConfiguration or *nodeview.Resource.
type Object interface {
	runtime.Object
	GetName() string
	GetResourceVersion() string
}

// Document is one object read from a file.
type Document struct {
	// Label replaces the file/document prefix in messages (`IPPool "x"` for a patch).
	Label string
	File  string // as the user named it; "<stdin>" for -
	Index int    // 1-based among the file's non-empty documents
	Kind  string
	Obj   Object
}

// Where names the document in messages: `pools.yaml: document 2 (IPPool "bad")`.
func (d Document) Where() string {
	if d.Label != "" {
		return d.Label
	}
	if d.Kind == "" {
		return fmt.Sprintf("%s: document %d", d.File, d.Index)
	}
	return fmt.Sprintf("%s: document %d (%s %q)", d.File, d.Index, d.Kind, d.Obj.GetName())
}

// Kinds accepted in files.
var Kinds = []string{"IPPool", "BGPPeer", "BGPFilter", "BGPConfiguration", "FelixConfiguration", nodeview.Kind}

func newObject(kind string) Object {
	switch kind {
	case "IPPool":
		return &v1.IPPool{}
	case "BGPPeer":
		return &v1.BGPPeer{}
	case "BGPFilter":
		return &v1.BGPFilter{}
	case "BGPConfiguration":
		return &v1.BGPConfiguration{}
	case "FelixConfiguration":
		return &v1.FelixConfiguration{}
	case nodeview.Kind:
		return &nodeview.Resource{}
	}
	return nil
}

// ReadFile reads every document of path ("-" reads stdin).
func ReadFile(path string, stdin io.Reader) ([]Document, error) {
	name := path
	var r io.Reader
	if path == "-" {
		name, r = "<stdin>", stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		defer f.Close()
		r = f
	}
	return Read(name, r)
}

// Read decodes every non-empty document of r. Lists (kind: List or <Kind>List with items) are
// expanded, so `tabbyctl get ... -o yaml` output can be fed back.
func Read(name string, r io.Reader) ([]Document, error) {
	yr := k8syaml.NewYAMLReader(bufio.NewReader(r))
	var docs []Document
	index := 0
	for {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if isEmpty(raw) {
			continue
		}
		index++
		got, err := decode(name, index, raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, got...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no objects", name)
	}
	return docs, nil
}

func isEmpty(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

type header struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Items      []map[string]any `json:"items"`
}

func decode(name string, index int, raw []byte) ([]Document, error) {
	where := fmt.Sprintf("%s: document %d", name, index)
	var h header
	if err := yaml.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("%s: not YAML or JSON: %w", where, err)
	}
	if h.Kind == "List" || (strings.HasSuffix(h.Kind, "List") && h.Items != nil) {
		var out []Document
		for i, item := range h.Items {
			b, err := yaml.Marshal(item)
			if err != nil {
				return nil, fmt.Errorf("%s: items[%d]: %w", where, i, err)
			}
			d, err := decodeOne(fmt.Sprintf("%s: items[%d]", where, i), name, index, b)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}
	d, err := decodeOne(where, name, index, raw)
	if err != nil {
		return nil, err
	}
	return []Document{d}, nil
}

func decodeOne(where, name string, index int, raw []byte) (Document, error) {
	var h header
	if err := yaml.Unmarshal(raw, &h); err != nil {
		return Document{}, fmt.Errorf("%s: %w", where, err)
	}
	if h.APIVersion != v1.SchemeGroupVersion.String() {
		return Document{}, fmt.Errorf("%s: apiVersion: Unsupported value: %q: supported values: %q", where, h.APIVersion, v1.SchemeGroupVersion.String())
	}
	obj := newObject(h.Kind)
	if obj == nil {
		return Document{}, fmt.Errorf("%s: kind: Unsupported value: %q: supported values: %s", where, h.Kind, quoteAll(Kinds))
	}
	if err := Unmarshal(raw, obj); err != nil {
		return Document{}, fmt.Errorf("%s (%s): %w", where, h.Kind, err)
	}
	return Document{File: name, Index: index, Kind: h.Kind, Obj: obj}, nil
}

// Unmarshal decodes YAML or JSON into obj strictly, as the API server does: field names are
// case-sensitive and unknown or duplicate fields are errors, so a misspelt field (blocksize for
// blockSize) is reported instead of silently dropped.
func Unmarshal(raw []byte, obj any) error {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return errors.New(cleanJSONError(err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = cleanJSONError(e)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// cleanJSONError drops the decoder's layers of "error unmarshaling JSON: while decoding JSON:".
func cleanJSONError(err error) string {
	s := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Validate checks one object by itself (no cluster state).
func Validate(obj Object) field.ErrorList {
	var errs field.ErrorList
	name := obj.GetName()
	if name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "every object needs a name"))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
		}
	}
	switch o := obj.(type) {
	case *v1.IPPool:
		errs = append(errs, validation.IPPool(o)...)
	case *v1.BGPPeer:
		errs = append(errs, validation.BGPPeer(o)...)
	case *v1.BGPFilter:
		errs = append(errs, validation.BGPFilter(o)...)
	case *v1.BGPConfiguration:
		errs = append(errs, validation.BGPConfiguration(o)...)
	case *v1.FelixConfiguration:
		errs = append(errs, validation.FelixConfiguration(o)...)
	case *nodeview.Resource:
		errs = append(errs, o.Validate()...)
	}
	return errs
}

// ValidateAll checks every document, and the pools' CIDRs against each other and against the
// pools already in the cluster (existing; a pool being replaced is not compared with its old
// self). It returns one error listing every problem, or nil.
func ValidateAll(docs []Document, existingPools []v1.IPPool) error {
	var msgs []string
	pools := map[string]v1.IPPool{}
	for _, p := range existingPools {
		pools[p.Name] = p
	}
	for _, d := range docs {
		if p, ok := d.Obj.(*v1.IPPool); ok {
			pools[p.Name] = *p // the file's version wins over the cluster's
		}
	}
	for _, d := range docs {
		errs := Validate(d.Obj)
		if p, ok := d.Obj.(*v1.IPPool); ok && len(errs) == 0 {
			var others []v1.IPPool
			for _, o := range pools {
				others = append(others, o)
			}
			errs = append(errs, validation.IPPoolOverlaps(p, sortPools(others))...)
		}
		for _, e := range errs {
			msgs = append(msgs, d.Where()+": "+e.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func sortPools(p []v1.IPPool) []v1.IPPool {
	sort.Slice(p, func(i, j int) bool { return p[i].Name < p[j].Name })
	return p
}
