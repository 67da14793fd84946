package eventbridgefake

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"
)

func entry(bus, detail string) types.PutEventsRequestEntry {
	return types.PutEventsRequestEntry{EventBusName: aws.String(bus), Source: aws.String("s"), DetailType: aws.String("t"), Detail: aws.String(detail)}
}

// The fake refuses what the service refuses, with the service's error types.
func TestFakeRefusals(t *testing.T) {
	f := New("b")
	defer f.Close()
	c := f.Client(func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 })
	put := func(es ...types.PutEventsRequestEntry) (*eventbridge.PutEventsOutput, string) {
		out, err := c.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: es})
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return out, ae.ErrorCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return out, ""
	}
	var eleven []types.PutEventsRequestEntry
	for range 11 {
		eleven = append(eleven, entry("b", `{}`))
	}
	if _, code := put(eleven...); code != "ValidationException" {
		t.Errorf("11 entries: %q", code)
	}
	if _, code := put(entry("nope", `{}`)); code != "ResourceNotFoundException" {
		t.Errorf("unknown bus: %q", code)
	}
	if _, code := put(entry("b", `{"x":"`+strings.Repeat("a", MaxEntrySize)+`"}`)); code != "ValidationException" {
		t.Errorf("oversized entry: %q", code)
	}
	out, code := put(entry("b", `not json`), entry("arn:aws:events:us-east-1:000000000000:event-bus/b", `{"a":1}`))
	if code != "" || out.FailedEntryCount != 1 || aws.ToString(out.Entries[0].ErrorCode) != "MalformedDetail" || out.Entries[1].EventId == nil {
		t.Errorf("a bad detail beside a good one: %q %+v", code, out)
	}
	if es := f.Entries(); len(es) != 1 || es[0].Detail != `{"a":1}` {
		t.Errorf("accepted %+v", es)
	}
}
