package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// eventMetrics are the names of the outgoing events' metrics (shared/metrics): the
// workers emit them as EMF; on AWS their one sink is EventBridge.
var eventMetrics = []string{"EventsPublished", "EventsDelivered", "EventsRetried", "EventsDropped"}

// hookMetrics are the names of the incoming change signals' metrics (shared/metrics):
// what the fetches of hooked repos found, by host in the EMF properties, and the forge
// feeds that stopped counting as coverage.
var hookMetrics = []string{"HookPushesAnnounced", "HookPushesLost", "HookPushesOutside", "FeedsUncovered"}

// eventBus is the bus the workers put each mirror.updated event on (source mirrorfleet,
// detail-type mirror.updated; docs/events.md has a rule that matches them). It costs
// nothing until rules match, and then per event.
func (s *Stack) eventBus() awsevents.EventBus {
	bus := awsevents.NewEventBus(s.Stack, jsii.String("EventBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(s.props.Fleet + "-mirrorfleet"),
		Description:  jsii.String("mirrorfleet: mirror.updated events, one per fetch that moved refs"),
	})
	awscdk.NewCfnOutput(s.Stack, jsii.String("EventBusName"), &awscdk.CfnOutputProps{
		Value:       bus.EventBusName(),
		Description: jsii.String("the bus of the mirror.updated events (docs/events.md)"),
	})
	return bus
}

// grantPutEvents lets role put events on the fleet's bus, and on no other.
func (s *Stack) grantPutEvents(role awsiam.IRole) {
	s.EventBus.GrantPutEventsTo(role, nil)
}

// eventWidget graphs the events the workers published and what became of them at
// EventBridge (the workers' only sink on AWS): entries the bus accepted, tries again,
// drops.
func (s *Stack) eventWidget(graph func(string, ...awscloudwatch.IMetric) awscloudwatch.IWidget) awscloudwatch.IWidget {
	var ms []awscloudwatch.IMetric
	for _, name := range eventMetrics {
		ms = append(ms, s.metric(name, "Sum", time.Minute, nil))
	}
	return graph("mirror.updated events: published / delivered / retried / dropped", ms...)
}

// hookWidget graphs what the fetches of hooked repos found: pushes a hook announced,
// pushes a poll found first (lost or late hooks), pushes of repos counted as hooked
// through their owner that were not (outside its hooks); and the feeds that stopped
// covering after failed probes.
func (s *Stack) hookWidget(graph func(string, ...awscloudwatch.IMetric) awscloudwatch.IWidget) awscloudwatch.IWidget {
	var ms []awscloudwatch.IMetric
	for _, name := range hookMetrics {
		ms = append(ms, s.metric(name, "Sum", time.Minute, nil))
	}
	return graph("Push webhooks: announced / lost / outside; feeds uncovered", ms...)
}
