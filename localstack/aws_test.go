//go:build integration

package localstack

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
)

// cloudAPI is the test's own view of the emulator: the resources the stack would
// create and what the test reads back. The binaries under test build their own clients.
type cloudAPI struct {
	cfg     aws.Config
	events  *eventbridge.Client
	sched   *scheduler.Client
	secrets *secretsmanager.Client
	sqs     *sqs.Client
}

func newCloudAPI(t *testing.T) *cloudAPI {
	t.Helper()
	for k, v := range awsEnv() {
		t.Setenv(k, v)
	}
	cfg, err := cloud.LoadAWSConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &cloudAPI{cfg: cfg, events: eventbridge.NewFromConfig(cfg), sched: scheduler.NewFromConfig(cfg),
		secrets: secretsmanager.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg)}
}

// putSecret creates a secret and returns its ARN.
func (c *cloudAPI) putSecret(t *testing.T, name, value string) string {
	t.Helper()
	out, err := c.secrets.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	if err != nil {
		t.Fatalf("create secret %s: %v", name, err)
	}
	return aws.ToString(out.ARN)
}

// rotate puts a new current value on the secret, as a rotation does.
func (c *cloudAPI) rotate(t *testing.T, arn, value string) {
	t.Helper()
	if _, err := c.secrets.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn),
		SecretString: aws.String(value)}); err != nil {
		t.Fatalf("rotate %s: %v", arn, err)
	}
}

// eventsToQueue creates the stack's event bus and, as docs/events.md shows an operator
// doing, a rule on it for pattern whose target is a new SQS queue (with the policy that
// lets EventBridge send to it). It returns the queue's URL.
func (c *cloudAPI) eventsToQueue(t *testing.T, bus, rule string, pattern any) string {
	t.Helper()
	ctx := t.Context()
	if _, err := c.events.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		t.Fatalf("create event bus %s: %v", bus, err)
	}
	queueURL, queueARN := c.newQueue(t, rule)
	p, _ := json.Marshal(pattern)
	r, err := c.events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus),
		EventPattern: aws.String(string(p))})
	if err != nil {
		t.Fatalf("put rule: %v", err)
	}
	policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
		"Resource": queueARN, "Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": aws.ToString(r.RuleArn)}},
	}}})
	if _, err := c.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): string(policy)}}); err != nil {
		t.Fatalf("queue policy: %v", err)
	}
	if _, err := c.events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(queueARN)}}}); err != nil {
		t.Fatalf("put targets: %v", err)
	}
	return queueURL
}

// queue creates an SQS queue and returns its ARN.
func (c *cloudAPI) queue(t *testing.T, name string) string {
	t.Helper()
	_, arn := c.newQueue(t, name)
	return arn
}

func (c *cloudAPI) newQueue(t *testing.T, name string) (queueURL, arn string) {
	t.Helper()
	q, err := c.sqs.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	attrs, err := c.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("attributes of queue %s: %v", name, err)
	}
	return aws.ToString(q.QueueUrl), attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// busEvent is an EventBridge event as a rule delivers it to SQS.
type busEvent struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// receive reads the queue until match accepts an event or within has passed, and
// returns the accepted event and every event read.
func (c *cloudAPI) receive(t *testing.T, queue string, within time.Duration, match func(busEvent) bool) (busEvent, []busEvent) {
	t.Helper()
	var seen []busEvent
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 2})
		cancel()
		if err != nil {
			t.Fatalf("receive from %s: %v", queue, err)
		}
		for _, m := range out.Messages {
			var ev busEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("a message that is no EventBridge event: %s", aws.ToString(m.Body))
			}
			seen = append(seen, ev)
			if _, err := c.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queue),
				ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete message: %v", err)
			}
			if match(ev) {
				return ev, seen
			}
		}
	}
	return busEvent{}, seen
}

// schedules lists the group's schedules by name, every page of them.
func (c *cloudAPI) schedules(t *testing.T, group string) []string {
	t.Helper()
	var names []string
	p := scheduler.NewListSchedulesPaginator(c.sched, &scheduler.ListSchedulesInput{GroupName: aws.String(group), MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list schedules of %s: %v", group, err)
		}
		for _, s := range out.Schedules {
			names = append(names, aws.ToString(s.Name))
		}
	}
	return names
}

// schedule reads one schedule; false when there is none of that name.
func (c *cloudAPI) schedule(t *testing.T, group, name string) (*scheduler.GetScheduleOutput, bool) {
	t.Helper()
	out, err := c.sched.GetSchedule(t.Context(), &scheduler.GetScheduleInput{GroupName: aws.String(group), Name: aws.String(name)})
	if err != nil {
		return nil, false
	}
	return out, true
}
