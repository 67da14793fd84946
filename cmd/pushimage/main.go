// Command pushimage builds the image the fleet's ECS services run and pushes it to
// Amazon ECR, without Docker: the static mirrorfleet binary (linux/arm64, CGO off;
// `make build` makes build/mirrorfleet) is appended as one layer on a base image that
// has git — serving (upload-pack) and mirror maintenance (repack, fsck) run the git
// binary — with the entrypoint, user and environment set, as ko does. It prints the
// pushed image's reference by digest, which `make deploy` passes to the stack as
// -c workerImage=<reference>.
//
//	go run ./cmd/pushimage -binary build/mirrorfleet [-repo mirrorfleet] [-out build/image.ref]
//	go run ./cmd/pushimage -binary build/mirrorfleet -base-layout DIR -layout OUT   # offline
//
// The ECR repository is created if missing (scan on push, AES-256); it is not part of
// the CloudFormation stack, so it outlives `cdk destroy`. AWS credentials and region
// come from the usual places (environment, profile, SSO).
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
)

// DefaultBase is the base image, pinned by digest (an index: the arm64 image is picked
// from it). Chainguard's git image: git and CA certificates on a minimal Wolfi base,
// rebuilt daily for CVE fixes, published for arm64 and amd64, whose non-root user is
// 65532 — the user the EFS access point owns the mirrors as. To move to a newer build,
// set it to what `crane digest cgr.dev/chainguard/git:latest` prints.
const DefaultBase = "cgr.dev/chainguard/git@sha256:904bddb55fd9772f9950412408b04d40ef6529e464d77c6b4812dc9fd86a1316"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pushimage:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binary := fs.String("binary", "build/mirrorfleet", "the static mirrorfleet binary for linux/arm64")
	base := fs.String("base", DefaultBase, "base image with git, pinned by digest")
	baseLayout := fs.String("base-layout", "", "take the base from this OCI image layout instead of a registry (offline)")
	repo := fs.String("repo", "mirrorfleet", "ECR repository to push to (created if missing)")
	outLayout := fs.String("layout", "", "write the image to this OCI image layout instead of pushing (offline)")
	out := fs.String("out", "", "also write the pushed image's reference to this file")
	revision := fs.String("revision", "", "source revision for the image's labels (e.g. the git commit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return fmt.Errorf("%w (run `make build`, which builds it for linux/arm64)", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()

	var baseImg v1.Image
	if *baseLayout != "" {
		idx, err := layout.ImageIndexFromPath(*baseLayout)
		if err != nil {
			return fmt.Errorf("base layout: %w", err)
		}
		if baseImg, err = PlatformImage(idx); err != nil {
			return fmt.Errorf("base layout %s: %w", *baseLayout, err)
		}
	} else {
		ref, err := name.ParseReference(*base)
		if err != nil {
			return fmt.Errorf("-base: %w", err)
		}
		if _, ok := ref.(name.Digest); !ok {
			fmt.Fprintf(stderr, "warning: base %s is not pinned by digest\n", *base)
		}
		if baseImg, err = remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(Platform)); err != nil {
			return fmt.Errorf("pull base %s: %w", *base, err)
		}
	}
	baseDigest, err := baseImg.Digest()
	if err != nil {
		return fmt.Errorf("base: %w", err)
	}
	labels := map[string]string{"org.opencontainers.image.source": "https://github.com/mirrorfleet/mirrorfleet",
		"org.opencontainers.image.base.digest": baseDigest.String()}
	if *baseLayout == "" {
		// A base read from a layout has no registry name: -base was not used.
		labels["org.opencontainers.image.base.name"] = *base
	}
	if *revision != "" {
		labels["org.opencontainers.image.revision"] = *revision
	}
	img, err := Build(baseImg, Spec{Binary: bin, Labels: labels})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}

	if *outLayout != "" {
		p, err := layout.FromPath(*outLayout)
		if err != nil {
			if p, err = layout.Write(*outLayout, empty.Index); err != nil {
				return fmt.Errorf("layout: %w", err)
			}
		}
		if err := p.AppendImage(img); err != nil {
			return fmt.Errorf("layout: %w", err)
		}
		fmt.Fprintf(stdout, "%s@%s\n", *outLayout, digest)
		return nil
	}

	cfg, err := cloud.LoadAWSConfig(ctx)
	if err != nil {
		return err
	}
	client := ecr.NewFromConfig(cfg)
	uri, err := ensureRepository(ctx, client, *repo)
	if err != nil {
		return err
	}
	auth, err := ecrAuth(ctx, client)
	if err != nil {
		return err
	}
	ref, err := push(ctx, img, uri, auth)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ref)
	if *out != "" {
		return os.WriteFile(*out, []byte(ref+"\n"), 0o644)
	}
	return nil
}

// push writes img to the repository at uri and returns its reference by digest. It is
// tagged with the digest's start, so a console shows something; the stack pulls by
// digest.
func push(ctx context.Context, img v1.Image, uri string, auth authn.Authenticator) (string, error) {
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(fmt.Sprintf("%s:%s", uri, strings.Replace(digest.String(), ":", "-", 1)[:19]))
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuth(auth)); err != nil {
		return "", fmt.Errorf("push %s: %w", tag, err)
	}
	return fmt.Sprintf("%s@%s", uri, digest), nil
}

// ensureRepository returns the repository's URI, creating it (scan on push, AES-256
// encryption) when it does not exist.
func ensureRepository(ctx context.Context, c *ecr.Client, repo string) (string, error) {
	out, err := c.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{repo}})
	if err == nil && len(out.Repositories) == 1 {
		return aws.ToString(out.Repositories[0].RepositoryUri), nil
	}
	var missing *ecrtypes.RepositoryNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return "", fmt.Errorf("describe ECR repository %s: %w", repo, err)
	}
	created, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{
		RepositoryName:             aws.String(repo),
		ImageScanningConfiguration: &ecrtypes.ImageScanningConfiguration{ScanOnPush: true},
		EncryptionConfiguration:    &ecrtypes.EncryptionConfiguration{EncryptionType: ecrtypes.EncryptionTypeAes256},
	})
	if err != nil {
		return "", fmt.Errorf("create ECR repository %s: %w", repo, err)
	}
	return aws.ToString(created.Repository.RepositoryUri), nil
}

// ecrAuth turns an ECR authorization token (base64 of AWS:<password>) into registry
// credentials.
func ecrAuth(ctx context.Context, c *ecr.Client) (authn.Authenticator, error) {
	out, err := c.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return nil, fmt.Errorf("ECR authorization token: %w", err)
	}
	if len(out.AuthorizationData) == 0 {
		return nil, errors.New("ECR returned no authorization data")
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(out.AuthorizationData[0].AuthorizationToken))
	if err != nil {
		return nil, fmt.Errorf("ECR authorization token: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, errors.New("ECR authorization token is not user:password")
	}
	return &authn.Basic{Username: user, Password: pass}, nil
}
