// Command infra is the CDK app that deploys mirrorfleet to AWS (DESIGN.md §2). Run it
// through the CDK CLI from this directory (cdk.json): npx cdk synth|deploy|destroy.
package main

import (
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	props := PropsFromContext(app.Node())
	name := "MirrorFleet"
	if n := ctxString(app.Node(), "stackName"); n != "" {
		name = n
	}
	props.StackProps = awscdk.StackProps{Env: env()}
	NewStack(app, name, props)
	app.Synth(nil)
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
