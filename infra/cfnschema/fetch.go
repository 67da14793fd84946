package cfnschema

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// specPackage is the npm package holding the specification aws-cdk-lib is generated
// from; aws-cdk-lib's package.json pins its version (devDependencies).
const specPackage = "@aws-cdk/aws-service-spec"

// cdkModule is the Go module of the CDK bindings, which embeds aws-cdk-lib's npm
// tarball.
const cdkModule = "github.com/aws/aws-cdk-go/awscdk/v2"

// SpecVersion is the version of the specification the CDK bindings of the module at
// root were generated with: read from aws-cdk-lib's package.json inside the bindings'
// embedded tarball (the module is downloaded if it is not yet).
func SpecVersion(ctx context.Context, root string) (string, error) {
	out, err := goCmd(ctx, root, "mod", "download", "-json", cdkModule)
	if err != nil {
		return "", err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("cfnschema: go mod download %s: no directory in %s", cdkModule, out)
	}
	tgzs, _ := filepath.Glob(filepath.Join(mod.Dir, "jsii", "aws-cdk-lib-*.tgz"))
	if len(tgzs) != 1 {
		return "", fmt.Errorf("cfnschema: %d aws-cdk-lib tarballs in %s/jsii", len(tgzs), mod.Dir)
	}
	pkg, err := fileInTarball(tgzs[0], "package/package.json")
	if err != nil {
		return "", err
	}
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(pkg, &p); err != nil {
		return "", fmt.Errorf("cfnschema: aws-cdk-lib's package.json: %w", err)
	}
	v := p.DevDependencies[specPackage]
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		return "", fmt.Errorf("cfnschema: aws-cdk-lib pins %s at %q, not an exact version", specPackage, v)
	}
	return v, nil
}

// SpecPath is where the specification of version is kept under cache.
func SpecPath(cache, version string) string {
	return filepath.Join(cache, "aws-service-spec-"+version, "db.json.gz")
}

// Fetch makes sure the specification of version is under cache, fetching it with npm
// (`npm pack`, which checks the registry's integrity hash) when it is not, and returns
// its path.
func Fetch(ctx context.Context, cache, version string) (string, error) {
	path := SpecPath(cache, version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("cfnschema: %s@%s is not in %s and npm is not installed to fetch it", specPackage, version, cache)
	}
	tmp, err := os.MkdirTemp(cache, ".fetch-")
	if err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(cache, ".fetch-"); err != nil {
			return "", err
		}
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "npm", "pack", "--silent", "--pack-destination", tmp, specPackage+"@"+version)
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cfnschema: npm pack %s@%s: %w\n%s", specPackage, version, err, out)
	}
	tgzs, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(tgzs) != 1 {
		return "", fmt.Errorf("cfnschema: npm pack left %d tarballs", len(tgzs))
	}
	db, err := fileInTarball(tgzs[0], "package/db.json.gz")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	part := filepath.Join(tmp, "db.json.gz")
	if err := os.WriteFile(part, db, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(part, path)
}

// LoadFile loads the specification at path.
func LoadFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}

func fileInTarball(tgz, name string) ([]byte, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("cfnschema: %s: %w", tgz, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("cfnschema: no %s in %s", name, tgz)
		}
		if err != nil {
			return nil, fmt.Errorf("cfnschema: %s: %w", tgz, err)
		}
		if h.Name == name {
			return io.ReadAll(tr)
		}
	}
}

func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cfnschema: go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
