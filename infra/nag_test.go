package main

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
)

func TestNagAwsSolutions(t *testing.T) { nagClean(t, stack) }

// nagClean fails on any unsuppressed cdk-nag AwsSolutions error on s (synthesized with
// the pack applied) and logs its warnings.
func nagClean(t *testing.T, s *Stack) {
	t.Helper()
	ann := assertions.Annotations_FromStack(s.Stack)
	for _, level := range []string{"error", "warning"} {
		var msgs *[]*cxapi.SynthesisMessage
		if level == "error" {
			msgs = ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		} else {
			msgs = ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		}
		for _, m := range *msgs {
			t.Logf("%s %s: %v", level, *m.Id, m.Entry.Data)
		}
		if level == "error" && len(*msgs) > 0 {
			t.Errorf("%d unsuppressed cdk-nag AwsSolutions errors", len(*msgs))
		}
	}
}
