package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/infra/cfnschema"
)

// The resource specification aws-cdk-lib was generated from, fetched once per test
// binary into build/cfnspec (`make infra` fetches it first; npm caches it).
var (
	specOnce          sync.Once
	spec              *cfnschema.Spec
	fetchErr, loadErr error
)

func resourceSpec(t *testing.T) *cfnschema.Spec {
	t.Helper()
	specOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		root := findRepoRoot()
		version, err := cfnschema.SpecVersion(ctx, root)
		if err != nil {
			loadErr = err
			return
		}
		path, err := cfnschema.Fetch(ctx, filepath.Join(root, "build", "cfnspec"), version)
		if err != nil {
			fetchErr = err
			return
		}
		spec, loadErr = cfnschema.LoadFile(path)
	})
	if fetchErr != nil {
		t.Skipf("no CloudFormation resource specification to check against (needs npm and the npm registry; `make infra` fetches it): %v", fetchErr)
	}
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if spec.Resources() < 1000 {
		t.Fatalf("the specification knows %d resource types: not the whole of CloudFormation", spec.Resources())
	}
	return spec
}

// conforms fails t for every way tp departs from the resource specification.
func conforms(t *testing.T, name string, tp tpl) {
	t.Helper()
	s := resourceSpec(t)
	b, err := json.Marshal(tp)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Validate(b) {
		t.Errorf("%s: %v", name, err)
	}
}

// Every property of every resource of the default template is one its type has, of
// the type and value the specification gives, and none required is missing.
func TestTemplateMatchesTheResourceSpecification(t *testing.T) {
	conforms(t, "default stack", tmpl)
}

// The check bites: a misspelt property, a value of the wrong type, a nested property
// that does not exist and a resource type that does not are each reported.
func TestResourceSpecificationCatchesABrokenProperty(t *testing.T) {
	s := resourceSpec(t)
	var broken tpl
	b, _ := json.Marshal(tmpl)
	if err := json.Unmarshal(b, &broken); err != nil {
		t.Fatal(err)
	}
	coord := logicalID(stack.Coordinator)
	res := broken["Resources"].(map[string]any)
	p := props(res[coord].(map[string]any))
	p["MemorySise"] = p["MemorySize"]
	delete(p, "MemorySize")
	p["Timeout"] = "soon"
	p["Environment"].(map[string]any)["Vars"] = map[string]any{}
	table := res[logicalID(stack.Table)].(map[string]any)
	props(table)["BillingMode"] = []any{"PAY_PER_REQUEST"}
	res["Typo"] = map[string]any{"Type": "AWS::Lambda::Funktion", "Properties": map[string]any{}}
	out, _ := json.Marshal(broken)
	var got []string
	for _, err := range s.Validate(out) {
		got = append(got, err.Error())
	}
	for _, want := range []string{
		coord + ": AWS::Lambda::Function: unknown property MemorySise",
		coord + `: AWS::Lambda::Function.Timeout: a string "soon", want an integer`,
		coord + ": AWS::Lambda::Function.Environment: unknown property Vars",
		logicalID(stack.Table) + ": AWS::DynamoDB::Table.BillingMode: a list",
		"Typo: unknown resource type AWS::Lambda::Funktion",
	} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("no error %q among %q", want, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d errors, want the 5 broken things: %q", len(got), got)
	}
}
