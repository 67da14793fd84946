package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/jsii-runtime-go"
)

// network: a new VPC over two AZs, or an existing one by id. By default the tasks sit
// in public subnets with a public IP each and security groups that admit nothing (no
// NAT gateway: at a small fleet's size it would cost more than everything else), and
// DynamoDB is reached through a gateway endpoint, which is free. privateNetwork puts
// them in private subnets behind one NAT gateway instead.
func (s *Stack) network() awsec2.IVpc {
	if s.props.VpcID != "" {
		return awsec2.Vpc_FromLookup(s.Stack, jsii.String("Vpc"), &awsec2.VpcLookupOptions{VpcId: jsii.String(s.props.VpcID)})
	}
	subnets := []*awsec2.SubnetConfiguration{
		{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(22)},
	}
	nats := 0
	if s.props.PrivateNetwork {
		nats = 1
		subnets = append(subnets, &awsec2.SubnetConfiguration{Name: jsii.String("tasks"),
			SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(20)})
	}
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:              jsii.Number(2),
		NatGateways:         jsii.Number(float64(nats)),
		SubnetConfiguration: &subnets,
	})
	vpc.AddGatewayEndpoint(jsii.String("DynamoDBEndpoint"), &awsec2.GatewayVpcEndpointOptions{
		Service: awsec2.GatewayVpcEndpointAwsService_DYNAMODB(),
	})
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(s.logGroup("VpcFlowLogs"), nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	return vpc
}

// taskSubnets are where the tasks (and the file system's mount targets) go.
func (s *Stack) taskSubnets() *awsec2.SubnetSelection {
	if s.props.PrivateNetwork {
		return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
	}
	return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC}
}
