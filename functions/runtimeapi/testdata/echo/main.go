// Command echo is a Lambda function for the runtimeapi tests: it answers its payload
// with the invocation's context, fails when asked to, and exits at start-up when
// ECHO_FAIL_INIT is set, as a misconfigured function does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func main() {
	if v := os.Getenv("ECHO_FAIL_INIT"); v != "" {
		fmt.Fprintln(os.Stderr, "bad configuration:", v)
		os.Exit(1)
	}
	lambda.StartWithOptions(func(ctx context.Context, in json.RawMessage) (map[string]any, error) {
		var req struct{ Fail string }
		_ = json.Unmarshal(in, &req)
		if req.Fail != "" {
			return nil, errors.New(req.Fail)
		}
		lc, _ := lambdacontext.FromContext(ctx)
		dl, _ := ctx.Deadline()
		return map[string]any{"in": in, "arn": lc.InvokedFunctionArn, "request": lc.AwsRequestID,
			"stream": lambdacontext.LogStreamName, "greeting": os.Getenv("ECHO_GREETING"),
			"home": os.Getenv("HOME"), "deadline_set": !dl.IsZero()}, nil
	}, lambda.WithEnableSIGTERM(func() { fmt.Println("sigterm") }))
}
