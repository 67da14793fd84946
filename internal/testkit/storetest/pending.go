package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// AddPending adds a repo for rawURL, an upstream on a test server (private hosts
// allowed), as the API would: normalized, under its id, pending. It returns the mirror's
// target.
func AddPending(t *testing.T, s interface {
	CreateRepo(context.Context, store.Repo) (store.Repo, bool, error)
}, rawURL string) fetch.Target {
	t.Helper()
	url, err := urlpolicy.Policy{AllowPrivateHosts: true}.Normalize(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	tg := fetch.Target{ID: store.RepoID(url), URL: url}
	if _, _, err := s.CreateRepo(t.Context(), store.Repo{ID: tg.ID, URL: url, Source: store.SourceAPI, State: store.RepoPending,
		CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return tg
}
