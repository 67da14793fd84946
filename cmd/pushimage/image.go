package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// Platform is the only one the fleet runs on: Fargate ARM64.
var Platform = v1.Platform{OS: "linux", Architecture: "arm64"}

// Spec is what goes on top of the base image.
type Spec struct {
	Binary []byte            // the static mirrorfleet binary for Platform
	Labels map[string]string // OCI annotations as image labels (source, revision)
}

// Env the image sets over the base's: git needs a writable HOME for nothing it does
// here, but looks for one; /tmp is the containers' scratch volume.
var imageEnv = []string{"HOME=/tmp"}

// Build puts the binary at deployenv.ImageBinary on base as one layer and makes it the
// entrypoint, run as deployenv.ImageUID, as ko does: no Dockerfile, no daemon. The base
// must be for Platform. The result is reproducible: the same base and binary give the
// same digest (file times and the creation time are the epoch).
func Build(base v1.Image, spec Spec) (v1.Image, error) {
	if len(spec.Binary) == 0 {
		return nil, errors.New("image: no binary")
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: base config: %w", err)
	}
	if cf.OS != Platform.OS || cf.Architecture != Platform.Architecture {
		return nil, fmt.Errorf("image: base is %s/%s, want %s/%s", cf.OS, cf.Architecture, Platform.OS, Platform.Architecture)
	}
	layerTar, err := binaryLayer(spec.Binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err = img.ConfigFile() // with the new layer's diff id
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	c := &cf.Config
	c.Entrypoint = []string{deployenv.ImageBinary}
	c.Cmd = nil // ECS gives the command: worker or serve
	c.User = deployenv.ImageUID + ":" + deployenv.ImageUID
	c.WorkingDir = "/"
	c.Env = setEnv(c.Env, imageEnv...)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range spec.Labels {
		c.Labels[k] = v
	}
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Author = "mirrorfleet"
	return mutate.ConfigFile(img, cf)
}

// setEnv sets each NAME=value of kv in env, replacing an earlier NAME.
func setEnv(env []string, kv ...string) []string {
	env = slices.Clone(env)
	for _, e := range kv {
		name, _, _ := strings.Cut(e, "=")
		env = slices.DeleteFunc(env, func(x string) bool { return strings.HasPrefix(x, name+"=") })
		env = append(env, e)
	}
	return env
}

// binaryLayer is a tar of the binary and its parent directories, owned by root,
// readable and executable by all, with epoch times.
func binaryLayer(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	path := strings.TrimPrefix(deployenv.ImageBinary, "/")
	parts := strings.Split(path, "/")
	epoch := time.Unix(0, 0)
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/") + "/"
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(bin)),
		ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PlatformImage picks Platform's image out of an index (a multi-arch base).
func PlatformImage(idx v1.ImageIndex) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == Platform.OS && d.Platform.Architecture == Platform.Architecture {
			return idx.Image(d.Digest)
		}
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := PlatformImage(child); err == nil {
				return img, nil
			}
		}
	}
	if len(im.Manifests) == 1 && im.Manifests[0].Platform == nil && im.Manifests[0].MediaType.IsImage() {
		return idx.Image(im.Manifests[0].Digest) // a layout holding one image: Build checks its platform
	}
	return nil, fmt.Errorf("no %s/%s image in the index", Platform.OS, Platform.Architecture)
}
