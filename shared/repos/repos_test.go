package repos

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func TestAdd(t *testing.T) {
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, p, now := t.Context(), urlpolicy.Default(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	res := Add(ctx, st, p, " https://Example.com/a/b.git ", store.SourceAPI, now)
	if res.Err != nil || !res.Created || res.Repo.URL != "https://example.com/a/b" || res.Repo.ID != ID("https://example.com/a/b") ||
		res.Repo.State != store.RepoPending || !res.Repo.CreatedAt.Equal(now) {
		t.Fatalf("first add: %+v", res)
	}
	if again := Add(ctx, st, p, "https://example.com/a/b", store.SourceList, now); again.Err != nil || again.Created || again.Repo.Source != store.SourceAPI {
		t.Fatalf("second add is not idempotent: %+v", again)
	}
	for raw, reason := range map[string]urlpolicy.Reason{"git://example.com/a": urlpolicy.ReasonScheme, "file:///etc/passwd": urlpolicy.ReasonLocalPath, "https://127.0.0.1/a": urlpolicy.ReasonPrivateHost} {
		var re *Error
		if r := Add(ctx, st, p, raw, store.SourceAPI, now); !errors.As(r.Err, &re) || re.Kind != InvalidURL || re.Reason != reason {
			t.Errorf("Add(%s) = %v; want InvalidURL/%s", raw, r.Err, reason)
		}
	}
	if err := st.RequestDelete(ctx, res.Repo.ID); err != nil {
		t.Fatal(err)
	}
	var re *Error
	if r := Add(ctx, st, p, "https://example.com/a/b", store.SourceAPI, now); !errors.As(r.Err, &re) || re.Kind != BeingDeleted {
		t.Errorf("adding a repo being deleted: %v", r.Err)
	}
}
