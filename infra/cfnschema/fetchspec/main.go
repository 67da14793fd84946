// Command fetchspec fetches the CloudFormation resource specification the CDK bindings
// in go.mod were generated from (npm @aws-cdk/aws-service-spec at the version
// aws-cdk-lib pins) into build/cfnspec, where the infra tests check the synthesized
// templates against it, and prints its path. `make infra` runs it first.
//
//	go run ./infra/cfnschema/fetchspec
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mirrorfleet/mirrorfleet/infra/cfnschema"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fetchspec:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	for ; ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(root) == root {
			return fmt.Errorf("no go.mod above the working directory")
		}
	}
	version, err := cfnschema.SpecVersion(ctx, root)
	if err != nil {
		return err
	}
	path, err := cfnschema.Fetch(ctx, filepath.Join(root, "build", "cfnspec"), version)
	if err != nil {
		return err
	}
	spec, err := cfnschema.LoadFile(path)
	if err != nil {
		return err
	}
	fmt.Printf("%s (%d resource types)\n", path, spec.Resources())
	return nil
}
