// Package cfnschema checks a synthesized CloudFormation template against the resource
// specification: every resource type known, every property a property of its type (and
// of the nested types, all the way down), of the right JSON type and allowed value, and
// every required property present. The specification is the one the CDK's L1 constructs
// are generated from — db.json.gz of the npm package @aws-cdk/aws-service-spec at the
// version aws-cdk-lib pins (fetch.go) — so the template is checked against the
// CloudFormation registry schemas as of the CDK release the stack is built with, and a
// wrong property name or type fails here rather than in a deploy's rollback.
//
// What CloudFormation resolves at deploy time (Ref, Fn::GetAtt, Fn::Join, ...) cannot be
// checked before it and is accepted wherever a value is expected.
package cfnschema

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Spec is the resource specification: resource types and their nested property types.
type Spec struct {
	resources map[string]entity // by CloudFormation type
	types     map[string]entity // by $id
}

type entity struct {
	ID         string              `json:"$id"`
	CfnType    string              `json:"cloudFormationType"`
	Properties map[string]property `json:"properties"`
}

type property struct {
	Type          typ   `json:"type"`
	PreviousTypes []typ `json:"previousTypes"`
	Required      bool  `json:"required"`
}

// typ is a property's type: string, integer, number, boolean, date-time, json, tag,
// ref (a nested type), array and map (of element), union (any of types).
type typ struct {
	Type      string `json:"type"`
	Element   *typ   `json:"element"`
	Types     []typ  `json:"types"`
	Reference *struct {
		Ref string `json:"$ref"`
	} `json:"reference"`
	AllowedValues []any `json:"allowedValues"` // strings, some numbers
}

// allowed is the allowed values as strings (nil: any).
func (t typ) allowed() []string {
	var out []string
	for _, v := range t.AllowedValues {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case float64:
			out = append(out, strconv.FormatFloat(x, 'f', -1, 64))
		}
	}
	return out
}

// Load reads db.json.gz.
func Load(r io.Reader) (*Spec, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("cfnschema: %w", err)
	}
	defer zr.Close()
	var db struct {
		Schema struct {
			Resource       struct{ Entities []entity } `json:"resource"`
			TypeDefinition struct{ Entities []entity } `json:"typeDefinition"`
		} `json:"schema"`
	}
	if err := json.NewDecoder(zr).Decode(&db); err != nil {
		return nil, fmt.Errorf("cfnschema: %w", err)
	}
	s := &Spec{resources: map[string]entity{}, types: map[string]entity{}}
	for _, e := range db.Schema.Resource.Entities {
		s.resources[e.CfnType] = e
	}
	for _, e := range db.Schema.TypeDefinition.Entities {
		s.types[e.ID] = e
	}
	if len(s.resources) == 0 || len(s.types) == 0 {
		return nil, errors.New("cfnschema: no resource types in the specification")
	}
	return s, nil
}

// Resources is how many resource types the specification knows.
func (s *Spec) Resources() int { return len(s.resources) }

// resourceKeys are what a resource may carry besides its type and properties.
var resourceKeys = []string{"Type", "Properties", "DependsOn", "Metadata", "DeletionPolicy", "UpdateReplacePolicy",
	"Condition", "CreationPolicy", "UpdatePolicy"}

// policies are the values DeletionPolicy and UpdateReplacePolicy take.
var policies = []string{"Delete", "Retain", "RetainExceptOnCreate", "Snapshot"}

// Validate checks every resource of template and returns each problem found, each
// naming the resource's logical id and the property's path.
func (s *Spec) Validate(template []byte) []error {
	var t struct {
		Resources map[string]map[string]json.RawMessage `json:"Resources"`
	}
	if err := json.Unmarshal(template, &t); err != nil {
		return []error{fmt.Errorf("template: %w", err)}
	}
	if len(t.Resources) == 0 {
		return []error{errors.New("template: no resources")}
	}
	var errs []error
	ids := make([]string, 0, len(t.Resources))
	for id := range t.Resources {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := t.Resources[id]
		for k := range r {
			if !slices.Contains(resourceKeys, k) {
				errs = append(errs, fmt.Errorf("%s: unknown resource attribute %q", id, k))
			}
		}
		for _, k := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
			if v, ok := r[k]; ok {
				var p string
				if json.Unmarshal(v, &p) != nil || !slices.Contains(policies, p) {
					errs = append(errs, fmt.Errorf("%s: %s %s is not one of %v", id, k, v, policies))
				}
			}
		}
		var kind string
		if err := json.Unmarshal(r["Type"], &kind); err != nil {
			errs = append(errs, fmt.Errorf("%s: no resource type", id))
			continue
		}
		if kind == "AWS::CDK::Metadata" || strings.HasPrefix(kind, "Custom::") {
			continue // the CDK's own record, and custom resources: properties of their own
		}
		e, ok := s.resources[kind]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown resource type %s", id, kind))
			continue
		}
		var props any = map[string]any{}
		if raw, ok := r["Properties"]; ok {
			if err := json.Unmarshal(raw, &props); err != nil {
				errs = append(errs, fmt.Errorf("%s: properties: %w", id, err))
				continue
			}
		}
		for _, err := range s.object(e, props, kind) {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errs
}

// object checks v against the properties of e; path names where v is.
func (s *Spec) object(e entity, v any, path string) []error {
	if intrinsic(v) {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("%s: %s, want an object", path, kindOf(v))}
	}
	var errs []error
	for _, name := range sortedKeys(m) {
		p, ok := e.Properties[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown property %s (known: %s)", path, name, strings.Join(sortedKeys(e.Properties), ", ")))
			continue
		}
		at := path + "." + name
		perr := s.value(p.Type, m[name], at)
		for _, old := range p.PreviousTypes { // a property whose type changed takes its old form too
			if perr == nil {
				break
			}
			if s.value(old, m[name], at) == nil {
				perr = nil
			}
		}
		errs = append(errs, perr...)
	}
	for _, name := range sortedKeys(e.Properties) {
		if _, ok := m[name]; !ok && e.Properties[name].Required {
			errs = append(errs, fmt.Errorf("%s: required property %s missing", path, name))
		}
	}
	return errs
}

// value checks v against t.
func (s *Spec) value(t typ, v any, path string) []error {
	if intrinsic(v) {
		return nil
	}
	bad := func(want string) []error {
		return []error{kindError{fmt.Errorf("%s: %s, want %s", path, describe(v), want)}}
	}
	switch t.Type {
	case "json":
		return nil
	case "string", "date-time":
		// CloudFormation turns numbers and booleans into strings.
		var str string
		switch x := v.(type) {
		case string:
			str = x
		case float64:
			str = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			str = strconv.FormatBool(x)
		default:
			return bad("a string")
		}
		if allowed := t.allowed(); len(allowed) > 0 && !slices.Contains(allowed, str) {
			return bad("one of " + strings.Join(allowed, ", "))
		}
		return nil
	case "integer", "number":
		f, ok := number(v)
		if !ok || (t.Type == "integer" && f != math.Trunc(f)) {
			return bad("a" + map[string]string{"integer": "n integer", "number": " number"}[t.Type])
		}
		return nil
	case "boolean":
		switch x := v.(type) {
		case bool:
			return nil
		case string:
			if x == "true" || x == "false" {
				return nil
			}
		}
		return bad("a boolean")
	case "tag":
		m, ok := v.(map[string]any)
		if !ok {
			return bad("a tag {Key, Value}")
		}
		var errs []error
		for _, k := range sortedKeys(m) {
			if k != "Key" && k != "Value" {
				errs = append(errs, fmt.Errorf("%s: unknown tag field %s", path, k))
			}
		}
		if _, ok := m["Key"]; !ok {
			errs = append(errs, fmt.Errorf("%s: tag without a Key", path))
		}
		return errs
	case "ref":
		if t.Reference == nil {
			return []error{fmt.Errorf("%s: the specification's type has no reference", path)}
		}
		e, ok := s.types[t.Reference.Ref]
		if !ok {
			return []error{fmt.Errorf("%s: the specification has no type %s", path, t.Reference.Ref)}
		}
		return s.object(e, v, path)
	case "array":
		a, ok := v.([]any)
		if !ok || t.Element == nil {
			return bad("a list")
		}
		var errs []error
		for i, x := range a {
			errs = append(errs, s.value(*t.Element, x, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case "map":
		m, ok := v.(map[string]any)
		if !ok || t.Element == nil {
			return bad("a map")
		}
		var errs []error
		for _, k := range sortedKeys(m) {
			errs = append(errs, s.value(*t.Element, m[k], path+"."+k)...)
		}
		return errs
	case "union":
		// Valid as any of its types; else the errors of the first type whose kind it has
		// (an object checked as the union's object type), or of the first.
		var best []error
		for _, u := range t.Types {
			errs := s.value(u, v, path)
			if len(errs) == 0 {
				return nil
			}
			var ke kindError
			if best == nil || (len(best) == 1 && errors.As(best[0], &ke) && !(len(errs) == 1 && errors.As(errs[0], &ke))) {
				best = errs
			}
		}
		return best
	}
	return []error{fmt.Errorf("%s: the specification's type %q is not one this check knows", path, t.Type)}
}

// kindError is a value of the wrong JSON kind or value for its type.
type kindError struct{ error }

// intrinsic reports whether v is a function CloudFormation evaluates at deploy time: an
// object of one key, Ref or Fn::* (and Condition inside Fn::If's branches).
func intrinsic(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

// number reads a JSON number, or a string holding one (CloudFormation accepts both).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func describe(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		b = append(b[:57], "..."...)
	}
	return kindOf(v) + " " + string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
