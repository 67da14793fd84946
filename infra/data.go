package main

import (
	"fmt"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsefs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// table: the single DynamoDB table of docs/store-dynamodb.md, or the one a destroyed
// stack retained (ExistingTable): imported by name, its items, indexes, protection and
// backups as they are.
func (s *Stack) table() awsdynamodb.ITable {
	if s.props.ExistingTable != "" {
		return awsdynamodb.Table_FromTableName(s.Stack, jsii.String("Table"), jsii.String(s.props.ExistingTable))
	}
	str := func(n string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(n), Type: awsdynamodb.AttributeType_STRING}
	}
	t := awsdynamodb.NewTable(s.Stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        str("pk"),
		SortKey:             str("sk"),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		TimeToLiveAttribute: jsii.String("expire_at"),
		DeletionProtection:  jsii.Bool(s.props.DeletionGuard),
		RemovalPolicy:       s.removal(),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})
	for _, gsi := range indexes {
		t.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(gsi[0]),
			PartitionKey:   str(gsi[1]),
			SortKey:        str(gsi[2]),
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		})
	}
	return t
}

// indexes are the table's GSIs: name, partition key, sort key (all KEYS_ONLY).
var indexes = [][3]string{
	{"by_owner_pos", "g_owner", "g_pos"},
	{"needs_decision", "g_need", "id"},
	{"by_id", "g_all", "id"},
	{"stalest", "g_stale", "g_stale_sk"},
}

// tableResources are the table and each of its indexes by name: no wildcard.
func (s *Stack) tableResources() *[]*string {
	rs := []*string{s.Table.TableArn()}
	for _, gsi := range indexes {
		rs = append(rs, jsii.String(*s.Table.TableArn()+"/index/"+gsi[0]))
	}
	return &rs
}

// tableActions are the DynamoDB calls the store makes (docs/store-dynamodb.md,
// Operations); TransactWriteItems is authorised per item by these plus ConditionCheckItem.
var tableActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
	"dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem", "dynamodb:DescribeTable",
}

// tableReadActions are the reads alone: the git server lists the repos for its index.
var tableReadActions = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:DescribeTable"}

func (s *Stack) grantTable(g awsiam.IGrantable, actions []string) {
	g.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: s.tableResources(),
	}))
}

// mirrorsFileSystem: EFS for /mnt/mirrors, encrypted, Elastic throughput; files move to
// Infrequent Access after a day without a read and to Archive after 90, and stay there
// when read (ADR 24: a pack is read in parts by the fetches of changes, whole by clones
// and scrubs, but rarely two days running; a read from IA costs $0.01/GB more, a file
// kept in Standard $0.284 a GB-month more; files under 128 KiB, the refs, never move). One
// access point owned by the image's nonroot user. The services start once the mount
// targets exist (mountTargets).
//
// With ExistingFileSystem the file system a destroyed stack retained is used instead:
// destroying the stack removed its mount targets, access point and security group, not
// the file system, its lifecycle or its policy, so new ones are made in this stack's
// subnets.
func (s *Stack) mirrorsFileSystem(vpc awsec2.IVpc) (awsefs.IFileSystem, awsefs.AccessPoint) {
	if s.props.ExistingFileSystem != "" {
		return s.existingFileSystem(vpc)
	}
	fs := awsefs.NewFileSystem(s.Stack, jsii.String("Mirrors"), &awsefs.FileSystemProps{
		Vpc:                       vpc,
		VpcSubnets:                s.taskSubnets(),
		Encrypted:                 jsii.Bool(true),
		LifecyclePolicy:           awsefs.LifecyclePolicy_AFTER_1_DAY,
		TransitionToArchivePolicy: awsefs.LifecyclePolicy_AFTER_90_DAYS,
		PerformanceMode:           awsefs.PerformanceMode_GENERAL_PURPOSE,
		ThroughputMode:            awsefs.ThroughputMode_ELASTIC,
		EnableAutomaticBackups:    jsii.Bool(false),
		RemovalPolicy:             s.removal(),
	})
	// A file system policy replaces EFS's default "any client may mount": access then
	// needs an IAM allow (the task roles, via the access point), over TLS only.
	fs.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"),
		Conditions: &map[string]interface{}{"Bool": map[string]interface{}{"aws:SecureTransport": "false"}},
	}))
	s.mountTargets = fs.MountTargetsAvailable()
	return fs, s.accessPoint(fs)
}

// accessPoint is the mirrors' access point on fs, owned by the image's nonroot user.
func (s *Stack) accessPoint(fs awsefs.IFileSystem) awsefs.AccessPoint {
	uid := jsii.String(deployenv.ImageUID)
	return awsefs.NewAccessPoint(s.Stack, jsii.String("MirrorsAccessPoint"), &awsefs.AccessPointProps{
		FileSystem: fs,
		Path:       jsii.String("/mirrors"),
		PosixUser:  &awsefs.PosixUser{Uid: uid, Gid: uid},
		CreateAcl:  &awsefs.Acl{OwnerUid: uid, OwnerGid: uid, Permissions: jsii.String("750")},
	})
}

// existingFileSystem imports a retained file system by id, with a new security group
// and a mount target in each of the tasks' subnets.
func (s *Stack) existingFileSystem(vpc awsec2.IVpc) (awsefs.IFileSystem, awsefs.AccessPoint) {
	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("MirrorsSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("mirrorfleet mirrors (a retained file system): NFS from the tasks"),
		AllowAllOutbound: jsii.Bool(false),
	})
	fs := awsefs.FileSystem_FromFileSystemAttributes(s.Stack, jsii.String("Mirrors"), &awsefs.FileSystemAttributes{
		FileSystemId:  jsii.String(s.props.ExistingFileSystem),
		SecurityGroup: sg,
	})
	targets := constructs.NewDependencyGroup()
	for i, subnet := range *vpc.SelectSubnets(s.taskSubnets()).Subnets {
		mt := awsefs.NewCfnMountTarget(s.Stack, jsii.String(fmt.Sprintf("MirrorsMountTarget%d", i+1)), &awsefs.CfnMountTargetProps{
			FileSystemId:   jsii.String(s.props.ExistingFileSystem),
			SubnetId:       subnet.SubnetId(),
			SecurityGroups: &[]interface{}{sg.SecurityGroupId()},
		})
		targets.Add(mt)
	}
	s.mountTargets = targets
	ap := s.accessPoint(fs)
	ap.Node().AddDependency(targets)
	return fs, ap
}

// grantMount lets a task role mount the mirrors through the access point; write adds
// ClientWrite (the workers), without it the mount is read-only at EFS itself.
func (s *Stack) grantMount(role awsiam.IRole, write bool) {
	actions := []string{"elasticfilesystem:ClientMount"}
	if write {
		actions = append(actions, "elasticfilesystem:ClientWrite")
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(slices.Clip(actions)...),
		Resources: &[]*string{s.FileSystem.FileSystemArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"elasticfilesystem:AccessPointArn": s.AccessPoint.AccessPointArn()},
		},
	}))
}
