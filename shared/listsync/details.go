package listsync

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Bounds on what Details keeps, so the list-sync record stays small (a DynamoDB item is
// at most 400 KB) whatever the list holds.
const (
	MaxBadLinesKept = 50 // bad lines stored and shown; BadTotal counts them all
	MaxPendingKept  = 50 // URLs waiting to be re-added; past it the next sync compares in full
	heldSample      = 10 // URLs a held purge shows as examples
)

// Details is the list sync's own state, kept as JSON in store.ListSync.Extra (the store
// does not read it). ListSync.Commit is the last applied commit.
type Details struct {
	// What the commit was applied with: a change of repository, branch or paths makes
	// the next sync compare the whole list (the diff would be against another list).
	Repo   string   `json:"repo"`
	Branch string   `json:"branch,omitempty"`
	Paths  []string `json:"paths"`

	Entries int    `json:"entries"` // distinct valid URLs in the list at Commit
	Mode    string `json:"mode"`    // how the last change was computed: diff or full
	Added   int    `json:"added"`   // repos created by the last recorded sync
	Removed int    `json:"removed"` // deletes requested by the last recorded sync

	BadLines  []BadLine      `json:"bad_lines,omitempty"` // the first MaxBadLinesKept
	BadTotal  int            `json:"bad_total,omitempty"`
	BadByCode map[string]int `json:"bad_by_code,omitempty"` // BadTotal by code: a urlpolicy reason, too_long, duplicate

	// Held is a purge waiting for an operator; nil when none is.
	Held *HeldPurge `json:"held,omitempty"`
	// Confirmed is the commit whose held purge an operator confirmed (written through
	// the API); the next sync applies it and clears it.
	Confirmed string `json:"confirmed,omitempty"`

	// Pending are list URLs whose add was refused because the repo was being deleted
	// at that moment, or because another repo holds the URL's mirror path (a bad line
	// says which); they are retried at every sync until they land.
	Pending []string `json:"pending,omitempty"`
	// Rescan makes the next sync compare the whole list (more than MaxPendingKept
	// adds were refused).
	Rescan bool `json:"rescan,omitempty"`
}

// HeldPurge is a change whose removals purge protection holds back.
type HeldPurge struct {
	Commit    string    `json:"commit"`    // the list commit the removals come from
	Remove    int       `json:"remove"`    // list repos the change would remove
	Of        int       `json:"of"`        // list repos before the change
	Threshold float64   `json:"threshold"` // percent in force when it was held
	Since     time.Time `json:"since"`
	Sample    []string  `json:"sample,omitempty"`
}

// Percent is the share of the list's repos the purge would remove.
func (h HeldPurge) Percent() float64 {
	if h.Of == 0 {
		return 0
	}
	return 100 * float64(h.Remove) / float64(h.Of)
}

// HeldCount is the number of removals held back: the metric to alarm on (0 when none).
func (d Details) HeldCount() int {
	if d.Held == nil {
		return 0
	}
	return d.Held.Remove
}

// DecodeDetails reads the details of a stored list-sync record; a record never written
// has none. Metrics read HeldCount, BadTotal and Entries from here.
func DecodeDetails(ls store.ListSync) (Details, error) {
	var d Details
	if len(ls.Extra) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(ls.Extra, &d); err != nil {
		return Details{}, fmt.Errorf("list sync details: %w", err)
	}
	return d, nil
}

func (d Details) encode() ([]byte, error) { return json.Marshal(d) }
