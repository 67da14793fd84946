//go:build integration

package localstack

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// cmd/pushimage as `make deploy` runs it, against ECR's API on the emulator: it creates
// the repository (scan on push, AES-256) when it is missing, takes an authorization
// token and pushes the image, with the token's credentials, to the repository URI ECR
// gave (see registryFront); a second push finds the repository and gives the same
// digest.
func TestPushImageToECR(t *testing.T) {
	c := newCloudAPI(t)
	client := ecr.NewFromConfig(c.cfg)
	tok, err := client.GetAuthorizationToken(t.Context(), &ecr.GetAuthorizationTokenInput{})
	if err != nil || len(tok.AuthorizationData) == 0 {
		t.Fatalf("GetAuthorizationToken: %+v, %v", tok, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(aws.ToString(tok.AuthorizationData[0].AuthorizationToken))
	user, password, _ := strings.Cut(string(raw), ":")
	front := newRegistryFront(t, user, password)

	// An arm64 base with git's place taken by two random layers, as an OCI layout.
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "arm64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	baseDir := filepath.Join(t.TempDir(), "base")
	lp, err := layout.Write(baseDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}

	repo := fmt.Sprintf("mirrorfleet-it-%d", time.Now().UnixNano()%1e9)
	push := func() string {
		t.Helper()
		refFile := filepath.Join(t.TempDir(), "image.ref")
		env := awsEnv()
		maps.Copy(env, map[string]string{"PATH": hostPath(), "HOME": t.TempDir(), "HTTPS_PROXY": front.ProxyURL,
			"SSL_CERT_FILE": front.CAFile})
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.pushimage, "-binary", bins.mirrorfleet, "-base-layout", baseDir, "-repo", repo,
			"-out", refFile, "-revision", "0123abcd")
		cmd.Env = environ(env)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pushimage: %v\n%s", err, stderr.String())
		}
		ref := strings.TrimSpace(string(out))
		if b, err := os.ReadFile(refFile); err != nil || strings.TrimSpace(string(b)) != ref {
			t.Errorf("-out has %q (%v), want %q", b, err, ref)
		}
		return ref
	}
	ref := push()

	// The repository as pushimage created it.
	d, err := client.DescribeRepositories(t.Context(), &ecr.DescribeRepositoriesInput{RepositoryNames: []string{repo}})
	if err != nil || len(d.Repositories) != 1 {
		t.Fatalf("DescribeRepositories: %+v, %v", d, err)
	}
	r := d.Repositories[0]
	uri := aws.ToString(r.RepositoryUri)
	if r.ImageScanningConfiguration == nil || !r.ImageScanningConfiguration.ScanOnPush ||
		r.EncryptionConfiguration == nil || r.EncryptionConfiguration.EncryptionType != ecrtypes.EncryptionTypeAes256 {
		t.Errorf("repository %+v: want scan on push and AES-256", r)
	}
	if !strings.HasPrefix(ref, uri+"@sha256:") {
		t.Fatalf("pushed %q, want a reference by digest in %s", ref, uri)
	}
	registryHost, _, _ := strings.Cut(uri, "/")
	if !slices.ContainsFunc(front.connected(), func(h string) bool { return strings.HasPrefix(h, registryHost) }) {
		t.Errorf("the push went to %v, not to the repository's registry %s", front.connected(), registryHost)
	}

	// What the registry holds at that digest is the fleet's image.
	_, digest, _ := strings.Cut(ref, "@")
	dref, err := name.NewDigest(front.Plain+"/"+repo+"@"+digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(dref)
	if err != nil {
		t.Fatalf("read back %s: %v", ref, err)
	}
	pcf, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := img.Digest()
	if pcf.Architecture != "arm64" || !slices.Equal(pcf.Config.Entrypoint, []string{deployenv.ImageBinary}) ||
		!strings.HasPrefix(pcf.Config.User, deployenv.ImageUID) || pcf.Config.Labels["org.opencontainers.image.revision"] != "0123abcd" ||
		pcf.Config.Labels["org.opencontainers.image.base.digest"] != baseDigest.String() {
		t.Errorf("pushed image config: %s/%s entrypoint %v user %q labels %v", pcf.OS, pcf.Architecture, pcf.Config.Entrypoint,
			pcf.Config.User, pcf.Config.Labels)
	}

	// Again: the repository is there now, and the build is reproducible.
	if again := push(); again != ref {
		t.Errorf("second push gave %s, want %s", again, ref)
	}
	t.Logf("pushed %s through ECR's API on %s", ref, engine())
}
