package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// base is a stand-in for the git base image: two random layers, linux/arm64, an
// environment and an entrypoint of its own (git's), as the real one has.
func base(t *testing.T, arch string) v1.Image {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.Env = []string{"PATH=/usr/bin:/bin", "HOME=/home/git", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Entrypoint = []string{"/usr/bin/git"}
	cf.Config.User = "0"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// files lists the regular files of the image's merged file system with their content.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func TestBuild(t *testing.T) {
	b := base(t, "arm64")
	bin := []byte("\x7fELF static mirrorfleet binary")
	img, err := Build(b, Spec{Binary: bin, Labels: map[string]string{"org.opencontainers.image.revision": "abc123"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{deployenv.ImageBinary}) || c.Cmd != nil || c.User != "65532:65532" ||
		cf.OS != "linux" || cf.Architecture != "arm64" || c.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("config %+v", cf)
	}
	// The base's environment stays (PATH finds git, the CA bundle), HOME is replaced.
	if !slices.Contains(c.Env, "PATH=/usr/bin:/bin") || !slices.Contains(c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") ||
		!slices.Contains(c.Env, "HOME=/tmp") || slices.Contains(c.Env, "HOME=/home/git") {
		t.Errorf("env %v", c.Env)
	}
	// The base's layers and one more: the binary, executable, owned by root.
	baseLayers, _ := b.Layers()
	layers, _ := img.Layers()
	if len(layers) != len(baseLayers)+1 {
		t.Fatalf("%d layers, want the base's %d + 1", len(layers), len(baseLayers))
	}
	for i, l := range baseLayers {
		if d1, _ := l.Digest(); d1 != mustDigest(t, layers[i]) {
			t.Errorf("base layer %d changed", i)
		}
	}
	h := files(t, img)[strings.TrimPrefix(deployenv.ImageBinary, "/")]
	if h == nil || h.Mode&0o111 != 0o111 || h.Uid != 0 || h.Size != int64(len(bin)) {
		t.Fatalf("binary entry %+v", h)
	}
	// Reproducible: the same inputs, the same digest.
	again, err := Build(b, Spec{Binary: bin, Labels: map[string]string{"org.opencontainers.image.revision": "abc123"}})
	if err != nil || mustDigest(t, again) != mustDigest(t, img) {
		t.Errorf("rebuilt digest differs (%v)", err)
	}

	if _, err := Build(base(t, "amd64"), Spec{Binary: bin}); err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("amd64 base: %v", err)
	}
	if _, err := Build(b, Spec{}); err == nil {
		t.Error("no binary: no error")
	}
}

type digester interface{ Digest() (v1.Hash, error) }

func mustDigest(t *testing.T, d digester) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The command offline: base from an OCI layout holding a multi-arch index, image into
// another layout; what lands there is the arm64 base plus the binary.
func TestRunIntoLayout(t *testing.T) {
	dir := t.TempDir()
	arm, amd := base(t, "arm64"), base(t, "amd64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	baseDir := filepath.Join(dir, "base")
	if _, err := layout.Write(baseDir, empty.Index); err != nil {
		t.Fatal(err)
	}
	p, _ := layout.FromPath(baseDir)
	if err := p.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mirrorfleet")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-binary", bin, "-base-layout", baseDir, "-layout", out, "-revision", "r1"},
		&stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	got, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := got.IndexManifest()
	if len(im.Manifests) != 1 || !strings.Contains(stdout.String(), im.Manifests[0].Digest.String()) {
		t.Fatalf("layout holds %v; printed %q", im.Manifests, stdout.String())
	}
	img, err := got.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if cf.Architecture != "arm64" || cf.Config.Labels["org.opencontainers.image.revision"] != "r1" {
		t.Errorf("built from the wrong base or without labels: %+v", cf)
	}
	// The labels name the base it was built on: by digest; not by the default -base's
	// name, which it was not pulled from.
	if l := cf.Config.Labels; l["org.opencontainers.image.base.digest"] != mustDigest(t, arm).String() || l["org.opencontainers.image.base.name"] != "" {
		t.Errorf("base labels %v, want the arm64 base's digest %s and no name", l, mustDigest(t, arm))
	}
	armLayers, _ := arm.Layers()
	layers, _ := img.Layers()
	if len(layers) != len(armLayers)+1 || mustDigest(t, layers[0]) != mustDigest(t, armLayers[0]) {
		t.Error("the image is not the arm64 base plus one layer")
	}

	if err := run(context.Background(), []string{"-binary", filepath.Join(dir, "none")}, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "make build") {
		t.Errorf("missing binary: %v", err)
	}
}

// push speaks the registry protocol: against an in-process registry the image lands
// by digest, with every layer, and reads back the same.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	img, err := Build(base(t, "arm64"), Spec{Binary: []byte("binary")})
	if err != nil {
		t.Fatal(err)
	}
	uri := strings.TrimPrefix(srv.URL, "http://") + "/mirrorfleet"
	ref, err := push(context.Background(), img, uri, authn.Anonymous)
	if err != nil {
		t.Fatal(err)
	}
	if want := uri + "@" + mustDigest(t, img).String(); ref != want {
		t.Fatalf("ref %s, want %s", ref, want)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	if mustDigest(t, got) != mustDigest(t, img) {
		t.Error("pulled digest differs")
	}
	if h := files(t, got)[strings.TrimPrefix(deployenv.ImageBinary, "/")]; h == nil {
		t.Error("the pulled image lacks the binary")
	}
}
