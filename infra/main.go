// Command infra is the CDK app that deploys mirrorfleet to AWS (infra/README.md). Run it
// through the CDK CLI from this directory (cdk.json): npx cdk synth|deploy|destroy.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if err := synth(app); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	app.Synth(nil)
}

func synth(app awscdk.App) error {
	props, err := PropsFromContext(app.Node())
	if err != nil {
		return err
	}
	name := "MirrorFleet"
	if n := (&ctx{node: app.Node()}).str("stackName"); n != "" {
		name = n
	}
	props.StackProps = awscdk.StackProps{Env: env()}
	_, err = NewStack(app, name, props)
	return err
}

// env pins account/region when the CLI knows them (needed for an existing VPC lookup);
// otherwise the stack is environment-agnostic and synthesizes without an AWS account.
func env() *awscdk.Environment {
	acct, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if acct == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(acct), Region: jsii.String(region)}
}
