package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// schemaVersion is the version of the table's item layout this code reads and writes.
// Version 1 is the layout of docs/store-dynamodb.md.
const schemaVersion = 1

// migrations[v] upgrades a table at version v to v+1. Each must be safe to run again
// (a process may stop half-way; the next one reruns it).
var migrations = map[int64]func(ctx context.Context, s *Store) error{}

const (
	pkSchema   = "SCHEMA"
	attrSchema = "v"
)

func schemaKey() item { return key(pkSchema, skSingle) }

// CheckSchema reads the table's schema version: a table without one (new, or made
// before versions were kept, whose layout is version 1) gets this code's; an older one
// is migrated; a newer one is refused with a *store.SchemaError, before anything else
// is read or written. Every process that opens the table calls it once at start: one
// strongly consistent read.
func (s *Store) CheckSchema(ctx context.Context) (int64, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.getItem(ctx, "CheckSchema", schemaKey())
		if err != nil {
			return 0, err
		}
		if m == nil {
			err := s.putSchema(ctx, -1, schemaVersion)
			if isConditionFailed(err) && attempt < maxAttempts {
				continue // another process wrote it first: read what it wrote
			}
			return schemaVersion, err
		}
		v, err := strconv.ParseInt(getNum(m, attrSchema), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("dynamo: table %s: schema version %q: %w", s.table, getNum(m, attrSchema), err)
		}
		switch {
		case v > schemaVersion:
			return v, &store.SchemaError{Store: "DynamoDB table " + s.table, Found: v, Supported: schemaVersion}
		case v == schemaVersion:
			return v, nil
		}
		if mig := migrations[v]; mig != nil {
			if err := mig(ctx, s); err != nil {
				return v, fmt.Errorf("dynamo: table %s: migrate schema %d to %d: %w", s.table, v, v+1, err)
			}
		}
		if err := s.putSchema(ctx, v, v+1); err != nil && !isConditionFailed(err) {
			return v, err
		}
	}
}

// putSchema moves the schema version from "from" (-1: absent) to "to", conditionally.
func (s *Store) putSchema(ctx context.Context, from, to int64) error {
	var x expr
	it := schemaKey()
	it[attrSchema] = avN(to)
	var cond string
	if from >= 0 {
		cond = x.eq(attrSchema, avN(from))
	} else {
		cond = x.notExists()
	}
	out, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: it,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
		ReturnConsumedCapacity:    s.rcc(),
	})
	if err != nil {
		return fmt.Errorf("dynamo: table %s: write schema version %d: %w", s.table, to, err)
	}
	s.consumedPtr("CheckSchema/PutItem", out.ConsumedCapacity)
	return nil
}
