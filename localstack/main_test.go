//go:build integration

// Package localstack is the integration tier: the fleet's real binaries — the
// coordinator and API Lambda bootstraps under the Lambda Runtime API emulator
// (functions/runtimeapi), `mirrorfleet worker` and `mirrorfleet serve` processes,
// `mirrorfleet init-aws`, the operator's CLI (`mirrorfleet repos ... --aws`, through
// an HTTP gateway to the API function that checks its SigV4 signature) and
// cmd/pushimage — against one AWS emulator at
// AWS_ENDPOINT_URL: LocalStack, or moto's server with DynamoDB Local for the table
// (AWS_ENDPOINT_URL_DYNAMODB). Run it with `make localstack-test` (localstack/run.sh),
// which starts and stops the emulator; README.md says what runs where.
package localstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
)

// region is the one region of the tier (run.sh exports it).
const region = "us-east-1"

// bins are the binaries under test, built once for the host by TestMain.
var bins struct {
	mirrorfleet, pushimage, coordinator, api string
}

func TestMain(m *testing.M) {
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		// Never a silent pass: this tier exists to run, and run.sh always sets it.
		fmt.Fprintln(os.Stderr, "AWS_ENDPOINT_URL is not set: run `make localstack-test`, which starts an AWS emulator")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "mirrorfleet-it-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := 2
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	for out, pkg := range map[*string]string{&bins.mirrorfleet: "../cmd/mirrorfleet", &bins.pushimage: "../cmd/pushimage"} {
		*out = filepath.Join(dir, filepath.Base(pkg))
		if b, err := exec.CommandContext(ctx, "go", "build", "-o", *out, pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	var err error
	if bins.coordinator, err = runtimeapi.Build(ctx, dir, "../functions/coordinator"); err != nil {
		return err
	}
	if bins.api, err = runtimeapi.Build(ctx, dir, "../functions/api"); err != nil {
		return err
	}
	fmt.Printf("built the binaries in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// awsEnv is what points a process at the emulator instead of AWS: the endpoints and the
// credentials the tier shares (on Lambda and ECS the role's credentials come from the
// runtime; these stand in for them).
func awsEnv() map[string]string {
	env := map[string]string{"AWS_REGION": region}
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	// Nothing of a developer's own AWS configuration.
	env["AWS_CONFIG_FILE"], env["AWS_SHARED_CREDENTIALS_FILE"] = os.DevNull, os.DevNull
	return env
}

// engine names what the tier runs on, as run.sh described it.
func engine() string {
	if e := os.Getenv("MIRRORFLEET_IT_ENGINE"); e != "" {
		return e
	}
	return "the emulator at " + os.Getenv("AWS_ENDPOINT_URL")
}

// environ turns env into a process environment, sorted for readable failures.
func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// hostPath is the PATH a process of the tier gets: where git is.
func hostPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return strings.Join([]string{"/usr/local/bin", "/usr/bin", "/bin"}, ":")
}
