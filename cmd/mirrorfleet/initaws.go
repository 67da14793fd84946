package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
)

// runInitAWS creates the fleet's DynamoDB table and Scheduler schedule group where they
// do not exist yet: for LocalStack and DynamoDB Local (AWS_ENDPOINT_URL), where no CDK
// stack makes them. The table layout has one definition, in the dynamo package.
func runInitAWS(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init-aws", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", envOr(cloud.EnvTable, "mirrorfleet"), "DynamoDB table to create")
	group := fs.String("schedule-group", envOr(cloud.EnvScheduleGroup, "mirrorfleet"), "Scheduler schedule group to create (\"\" skips it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := cloud.NewDynamoStore(ctx, "", *table)
	if err != nil {
		return err
	}
	var inUse *dtypes.ResourceInUseException
	switch err := st.CreateTable(ctx); {
	case errors.As(err, &inUse):
		fmt.Fprintf(stdout, "table %s exists\n", *table)
	case err != nil:
		return fmt.Errorf("create table %s: %w", *table, err)
	default:
		fmt.Fprintf(stdout, "table %s created\n", *table)
	}
	v, err := st.CheckSchema(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "table %s: schema version %d\n", *table, v)
	if *group == "" {
		return nil
	}
	cfg, err := cloud.LoadAWSConfig(ctx)
	if err != nil {
		return err
	}
	_, err = cloud.NewSchedulerClient(cfg).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(*group)})
	var exists *types.ConflictException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("create schedule group %s: %w", *group, err)
	}
	fmt.Fprintf(stdout, "schedule group %s ready\n", *group)
	return nil
}
