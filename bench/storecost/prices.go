package main

import "github.com/mirrorfleet/mirrorfleet/bench/internal/results"

// pricesTaken is the day the list prices below were looked up.
const pricesTaken = "2026-11-22"

// spotRatio is Fargate Spot's price as a share of on-demand (see the Spot prices).
const spotRatio = 0.01334053 / 0.04048

// prices are us-east-1 on-demand list prices. Confirmed means a source seen on that day
// states the figure; the rest are the best known list price and say so.
var prices = []results.StoreCostPrice{
	{Key: "ddb_wru", Service: "DynamoDB", Item: "on-demand write request unit", USD: 0.625e-6, Unit: "WRU",
		Source: "https://aws.amazon.com/dynamodb/pricing/on-demand/", Confirmed: true,
		Note: "$0.625 per million since the November 2024 on-demand price cut; also quoted by https://airbyte.com/data-engineering-resources/dynamodb-pricing"},
	{Key: "ddb_rru", Service: "DynamoDB", Item: "on-demand read request unit", USD: 0.125e-6, Unit: "RRU",
		Source: "https://aws.amazon.com/dynamodb/pricing/on-demand/", Confirmed: true,
		Note: "$0.125 per million; same sources as the write price"},
	{Key: "ddb_storage", Service: "DynamoDB", Item: "table storage (Standard class)", USD: 0.25, Unit: "GB-month",
		Source: "https://aws.amazon.com/dynamodb/pricing/on-demand/", Note: "best known list price; no source re-checked it"},
	{Key: "ddb_pitr", Service: "DynamoDB", Item: "continuous backups (PITR, enabled by the stack)", USD: 0.20, Unit: "GB-month",
		Source: "https://aws.amazon.com/dynamodb/pricing/on-demand/", Note: "best known list price; no source re-checked it"},
	{Key: "lambda_request", Service: "Lambda", Item: "request", USD: 0.20e-6, Unit: "request",
		Source: "https://aws.amazon.com/lambda/pricing/", Confirmed: true},
	{Key: "lambda_gbs_arm", Service: "Lambda", Item: "duration, arm64 (first 7.5 billion GB-s)", USD: 0.0000133334, Unit: "GB-s",
		Source: "https://aws.amazon.com/lambda/pricing/", Confirmed: true, Note: "also https://cloudchipr.com/blog/aws-lambda-pricing"},
	{Key: "scheduler_invocation", Service: "EventBridge Scheduler", Item: "invocation (after 14 million free a month)", USD: 1.00e-6, Unit: "invocation",
		Source: "https://aws.amazon.com/eventbridge/pricing/", Confirmed: true,
		Note: "also https://cloudburn.io/blog/amazon-eventbridge-pricing; API calls (CreateSchedule, UpdateSchedule) are not billed per a third-party summary, unconfirmed"},
	{Key: "fargate_vcpu_arm", Service: "Fargate", Item: "Linux/ARM vCPU", USD: 0.03238, Unit: "vCPU-hour",
		Source: "https://aws.amazon.com/fargate/pricing/", Confirmed: true, Note: "also https://www.vantage.sh/blog/fargate-pricing"},
	{Key: "fargate_gb_arm", Service: "Fargate", Item: "Linux/ARM memory", USD: 0.00356, Unit: "GB-hour",
		Source: "https://aws.amazon.com/fargate/pricing/", Confirmed: true, Note: "also https://www.vantage.sh/blog/fargate-pricing"},
	{Key: "fargate_spot_vcpu_arm", Service: "Fargate", Item: "Spot, Linux/ARM vCPU", USD: 0.03238 * spotRatio, Unit: "vCPU-hour",
		Source: "https://aws.amazon.com/fargate/pricing/",
		Note:   "derived: 33% of on-demand, the ratio of the published x86 Spot price $0.01334053 to on-demand $0.04048 (https://tomgregory.com/aws/aws-fargate-spot-vs-fargate-price-comparison/); AWS states Spot is up to 70% off and varies, ARM Spot is not on a page seen"},
	{Key: "fargate_spot_gb_arm", Service: "Fargate", Item: "Spot, Linux/ARM memory", USD: 0.00356 * spotRatio, Unit: "GB-hour",
		Source: "https://aws.amazon.com/fargate/pricing/", Note: "derived like the Spot vCPU price"},
	{Key: "efs_standard", Service: "EFS", Item: "Standard storage (Regional)", USD: 0.30, Unit: "GB-month",
		Source: "https://aws.amazon.com/efs/pricing/", Confirmed: true},
	{Key: "efs_ia", Service: "EFS", Item: "Infrequent Access storage", USD: 0.016, Unit: "GB-month",
		Source: "https://aws.amazon.com/efs/pricing/",
		Note:   "unconfirmed: https://www.vantage.sh/blog/amazon-efs-pricing implies $0.016 (Archive $0.008 is 49% less), https://www.factualminds.com/blog/amazon-efs-pricing-throughput-modes-storage-classes/ quotes $0.025"},
	{Key: "efs_archive", Service: "EFS", Item: "Archive storage", USD: 0.008, Unit: "GB-month",
		Source: "https://aws.amazon.com/efs/pricing/", Note: "unconfirmed: https://www.vantage.sh/blog/amazon-efs-pricing (49% less than IA); Archive needs Elastic throughput, which the stack sets"},
	{Key: "efs_ia_read", Service: "EFS", Item: "Infrequent Access data read", USD: 0.01, Unit: "GB",
		Source: "https://aws.amazon.com/efs/pricing/", Note: "only a third-party page quotes it"},
	{Key: "efs_elastic_read", Service: "EFS", Item: "Elastic Throughput, data read", USD: 0.03, Unit: "GB",
		Source: "https://aws.amazon.com/efs/pricing/", Confirmed: true, Note: "also https://www.factualminds.com/blog/amazon-efs-pricing-throughput-modes-storage-classes/"},
	{Key: "efs_elastic_write", Service: "EFS", Item: "Elastic Throughput, data written", USD: 0.06, Unit: "GB",
		Source: "https://aws.amazon.com/efs/pricing/", Confirmed: true, Note: "also https://www.factualminds.com/blog/amazon-efs-pricing-throughput-modes-storage-classes/"},
	{Key: "nat_hour", Service: "VPC", Item: "NAT gateway", USD: 0.045, Unit: "hour",
		Source: "https://aws.amazon.com/vpc/pricing/", Confirmed: true, Note: "also https://cloudburn.io/blog/aws-nat-gateway-pricing"},
	{Key: "nat_gb", Service: "VPC", Item: "NAT gateway data processed", USD: 0.045, Unit: "GB",
		Source: "https://aws.amazon.com/vpc/pricing/", Confirmed: true, Note: "also https://cloudburn.io/blog/aws-nat-gateway-pricing"},
	{Key: "ipv4_hour", Service: "VPC", Item: "public IPv4 address (a task's, a load balancer node's, a NAT gateway's)", USD: 0.005, Unit: "hour",
		Source: "https://aws.amazon.com/vpc/pricing/", Confirmed: true, Note: "also https://cloudburn.io/blog/aws-nat-gateway-pricing"},
	{Key: "alb_hour", Service: "Elastic Load Balancing", Item: "Application Load Balancer", USD: 0.0225, Unit: "hour",
		Source: "https://aws.amazon.com/elasticloadbalancing/pricing/", Note: "best known list price; also https://cloudburn.io/blog/aws-fargate-pricing"},
	{Key: "alb_lcu", Service: "Elastic Load Balancing", Item: "Application Load Balancer capacity unit (LCU)", USD: 0.008, Unit: "LCU-hour",
		Source: "https://aws.amazon.com/elasticloadbalancing/pricing/", Note: "best known list price"},
	{Key: "egress_gb", Service: "EC2", Item: "data transfer out to the internet (first 10 TB, after 100 GB free)", USD: 0.09, Unit: "GB",
		Source: "https://aws.amazon.com/ec2/pricing/on-demand/", Note: "best known list price; quoted per GB served, not in the totals"},
	{Key: "cw_metric", Service: "CloudWatch", Item: "custom metric (first 10,000)", USD: 0.30, Unit: "metric-month",
		Source: "https://aws.amazon.com/cloudwatch/pricing/", Confirmed: true, Note: "also https://signoz.io/guides/cloudwatch-pricing"},
	{Key: "cw_dashboard", Service: "CloudWatch", Item: "dashboard", USD: 3.00, Unit: "dashboard-month",
		Source: "https://aws.amazon.com/cloudwatch/pricing/", Confirmed: true},
	{Key: "cw_alarm", Service: "CloudWatch", Item: "standard-resolution alarm metric", USD: 0.10, Unit: "alarm metric-month",
		Source: "https://aws.amazon.com/cloudwatch/pricing/", Confirmed: true, Note: "also https://c3x.dev/resources/aws/aws_cloudwatch_metric_alarm"},
	{Key: "cw_logs_gb", Service: "CloudWatch", Item: "logs ingested (EMF metrics, Lambda logs, VPC flow logs)", USD: 0.50, Unit: "GB",
		Source: "https://aws.amazon.com/cloudwatch/pricing/", Confirmed: true},
}

func init() {
	for i := range prices {
		prices[i].Taken = pricesTaken
	}
}

// priceOf returns a price by key; the table is fixed, so a missing key is a bug.
func priceOf(ps []results.StoreCostPrice, key string) float64 {
	for _, p := range ps {
		if p.Key == key {
			return p.USD
		}
	}
	panic("storecost: no price " + key)
}
