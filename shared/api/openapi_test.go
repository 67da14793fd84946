package api

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOpenAPIMatchesRoutes pins the document to the route table: the same set of
// (method, path), every route's auth documented, every $ref resolving.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	if v := fmt.Sprint(doc["openapi"]); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("openapi version %q, want 3.1.x", v)
	}
	paths, _ := doc["paths"].(map[string]any)
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	spec := map[string]map[string]any{} // "METHOD path" -> operation
	for p, item := range paths {
		for k, op := range item.(map[string]any) {
			if slices.Contains(methods, k) {
				spec[strings.ToUpper(k)+" "+p] = op.(map[string]any)
			}
		}
	}
	served := map[string]route{}
	for _, rt := range routes {
		served[rt.Method+" "+rt.Path] = rt
	}
	served[HookRoute] = route{} // NewHooks: authenticated by the forges' signatures, not the token
	if got, want := slices.Sorted(maps.Keys(spec)), slices.Sorted(maps.Keys(served)); !slices.Equal(got, want) {
		t.Fatalf("openapi.yaml documents\n  %v\nthe handler serves\n  %v", got, want)
	}

	for key, op := range spec {
		rt := served[key]
		responses, _ := op["responses"].(map[string]any)
		if len(responses) == 0 {
			t.Errorf("%s: no responses", key)
		}
		if key == HookRoute {
			for _, code := range []string{"200", "202", "400", "401", "403", "413", "415", "500"} {
				if responses[code] == nil {
					t.Errorf("%s: %s not documented", key, code)
				}
			}
			continue
		}
		// Writes must require the bearer scheme; reads accept it optionally.
		sec := fmt.Sprint(op["security"])
		switch {
		case rt.Write && (sec != "[map[bearerAuth:[]]]" || responses["401"] == nil):
			t.Errorf("%s is a write: security %s, 401 documented %v", key, sec, responses["401"] != nil)
		case !rt.Write && strings.HasPrefix(rt.Path, "/v1/") && (!strings.Contains(sec, "bearerAuth") || responses["401"] == nil):
			t.Errorf("%s: reads may need auth (ReadsNeedAuth): security %s", key, sec)
		}
		if strings.HasPrefix(rt.Path, "/v1/") && responses["500"] == nil {
			t.Errorf("%s: 500 not documented", key)
		}
		if strings.Contains(rt.Path, "{id}") && (responses["400"] == nil || responses["404"] == nil) {
			t.Errorf("%s: a bad or unknown id needs 400 and 404 documented", key)
		}
		if rt.Method == "POST" && rt.Path == "/v1/repos" {
			for _, code := range []string{"200", "201", "400", "413", "415"} {
				if responses[code] == nil {
					t.Errorf("%s: %s not documented", key, code)
				}
			}
		}
	}

	// Every local $ref points at something.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					if resolve(doc, x.(string)) == nil {
						t.Errorf("%s: $ref %v does not resolve", at, x)
					}
					continue
				}
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(doc, "#")

	// The error shape and the bearer scheme are described.
	if resolve(doc, "#/components/schemas/Error/properties/error") == nil || resolve(doc, "#/components/schemas/ErrorDetail/properties/code") == nil {
		t.Error("error schema missing")
	}
	if fmt.Sprint(resolve(doc, "#/components/securitySchemes/bearerAuth/scheme")) != "bearer" {
		t.Error("bearer security scheme missing")
	}
}

func resolve(doc map[string]any, ref string) any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var v any = doc
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// TestOpenAPIRepoSchemaMatchesJSON pins the Repo and stalest-repo schemas to the
// fields the handler writes (clone_url included): same names, all required but those
// the handler omits when empty (omitempty).
func TestOpenAPIRepoSchemaMatchesJSON(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref string
		v   any
	}{
		{"#/components/schemas/Repo", Repo{}},
		{"#/components/schemas/Status/properties/stalest/items", StaleRepo{}},
	} {
		schema, _ := resolve(doc, c.ref).(map[string]any)
		if schema == nil {
			t.Fatalf("%s missing", c.ref)
		}
		props, _ := schema["properties"].(map[string]any)
		var required []string
		for _, r := range schema["required"].([]any) {
			required = append(required, fmt.Sprint(r))
		}
		var fields, always []string
		rt := reflect.TypeOf(c.v)
		for i := range rt.NumField() {
			tag := strings.Split(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag[0])
			if !slices.Contains(tag[1:], "omitempty") {
				always = append(always, tag[0])
			}
		}
		slices.Sort(fields)
		slices.Sort(always)
		slices.Sort(required)
		if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, fields) || !slices.Equal(required, always) {
			t.Errorf("%s: properties %v, required %v; the handler writes %v, always %v", c.ref, got, required, fields, always)
		}
	}
}
