package dynamo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestSchemaVersion: a new table gets the schema version at the first CheckSchema; an
// older one is migrated; a newer one is refused with a SchemaError and left as it was.
// On minidyn (in process) and DynamoDB Local.
func TestSchemaVersion(t *testing.T) {
	for _, mk := range []func(*testing.T) tier{minidynTier, localTier} {
		tr := mk(t)
		t.Run(tr.name, func(t *testing.T) {
			s := newStore(t, tr.client, Config{})
			stored := func() string {
				t.Helper()
				m, err := s.getItem(t.Context(), "test", schemaKey())
				if err != nil || m == nil {
					t.Fatalf("schema item: %v, %v", m, err)
				}
				return getNum(m, attrSchema)
			}
			put := func(v int64) {
				t.Helper()
				it := schemaKey()
				it[attrSchema] = avN(v)
				if _, err := tr.direct.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it}); err != nil {
					t.Fatal(err)
				}
			}

			v, err := s.CheckSchema(t.Context())
			if err != nil || v != schemaVersion || stored() != "1" {
				t.Fatalf("first CheckSchema = %d, %v; stored %q; want %d", v, err, stored(), schemaVersion)
			}
			if v, err := s.CheckSchema(t.Context()); err != nil || v != schemaVersion {
				t.Fatalf("second CheckSchema = %d, %v", v, err)
			}

			// An older table is migrated: version 0 stands for one before this code's.
			ran := 0
			migrations[0] = func(_ context.Context, _ *Store) error { ran++; return nil }
			t.Cleanup(func() { delete(migrations, 0) })
			put(0)
			if v, err := s.CheckSchema(t.Context()); err != nil || v != schemaVersion || ran != 1 || stored() != "1" {
				t.Fatalf("an older table: CheckSchema = %d, %v; migrations run %d; stored %q", v, err, ran, stored())
			}

			put(9)
			v, err = s.CheckSchema(t.Context())
			var se *store.SchemaError
			if !errors.Is(err, store.ErrNewerSchema) || !errors.As(err, &se) || se.Found != 9 || se.Supported != schemaVersion {
				t.Fatalf("a newer table: CheckSchema = %d, %v; want a SchemaError", v, err)
			}
			if !strings.Contains(err.Error(), s.table) || !strings.Contains(err.Error(), "newer release") {
				t.Errorf("the refusal does not say what happened: %v", err)
			}
			if stored() != "9" {
				t.Errorf("the refused table's version became %s", stored())
			}
		})
	}
}
