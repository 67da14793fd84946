package main

import (
	"math"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
)

func nearTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The lifecycle, by hand.
func TestClasses(t *testing.T) {
	fs := stackfacts.FileSystem{IAAfterDays: 7, ArchiveAfterDays: 90}
	// Never read but by a yearly scrub, living 1,095 days: 7 days in Standard, 83 in IA,
	// the rest in Archive (reads do not bring it back).
	c := classes(0, 365, 1095, fs)
	if !nearTo(c[standard], 7.0/1095, 1e-12) || !nearTo(c[archive], (1095-90)/1095.0, 1e-12) {
		t.Errorf("unread: %v", c)
	}
	// A scrub every 60 days reads it before the Archive window: never Archive.
	if c := classes(0, 60, 1095, fs); c[archive] != 0 || !nearTo(c[infrequent], 1-7.0/1095, 1e-12) {
		t.Errorf("scrubbed every 60 days: %v", c)
	}
	// Read at a Poisson rate r: the first 7-day gap comes after (e^{7r} − 1)/r days.
	r := 0.5
	if c := classes(r, 365, 1e6, fs); !nearTo(c[standard], math.Expm1(7*r)/r/1e6, 1e-12) {
		t.Errorf("read twice a day: %v", c)
	}
	// A read every day or so keeps a file in Standard for a life of 1,095 days.
	if c := classes(3, 365, 1095, fs); c[standard] != 1 {
		t.Errorf("read 3 times a day: %v", c)
	}
	// Back to Standard on a read: each read starts the file over. Unread but by a
	// scrub every 90 days: 7 days Standard, 83 IA per cycle, never Archive.
	back := fs
	back.BackToStandardOnRead = true
	if c := classes(0, 90, 1095, back); !nearTo(c[standard], 7.0/90, 1e-12) || !nearTo(c[infrequent], 83.0/90, 1e-12) || c[archive] != 0 {
		t.Errorf("back on read: %v", c)
	}
	// No lifecycle: Standard.
	if c := classes(0, 90, 1095, stackfacts.FileSystem{}); c != [3]float64{1, 0, 0} {
		t.Errorf("no lifecycle: %v", c)
	}
}

// The read figures are the maintenance benchmark's, scaled to the bill's mirror where
// they grow with it.
func TestMirrorReadsFromTheMaintenanceResults(t *testing.T) {
	r, err := readsFromMaintenance("../results")
	if err != nil {
		t.Fatal(err)
	}
	if r.PollBytes == 0 || r.PollBytes > 64<<10 || r.FetchOldPackBytes == 0 || r.ScrubPackFactor < 2 || r.ClonePackFactor < 1 ||
		r.IndexBytes < r.PackIdxBytes+r.MIDXBytes || !strings.Contains(r.Source, "maintenance.json") {
		t.Errorf("reads %+v", r)
	}
	s := r.scaled(50)
	if !nearTo(s.PackBytes+s.IndexBytes+s.SmallBytes, 50<<20, 1) || s.PollBytes != r.PollBytes || s.FetchOldPackBytes != r.FetchOldPackBytes {
		t.Errorf("scaled to 50 MB: %+v", s)
	}
	if !nearTo(s.IndexBytes/s.PackBytes, r.IndexBytes/r.PackBytes, 1e-12) {
		t.Error("scaling changed the index share")
	}
}

// The population is the freshness benchmark's: 13% of repos change in a month.
func TestPopulation(t *testing.T) {
	p, err := populationFrom("../results")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.changedWithin(730.0 / 24); math.Abs(got-0.13) > 0.01 {
		t.Errorf("changed within a month: %v", got)
	}
	if got := p.changedWithin(90); got <= p.changedWithin(30) || got >= 1-p.DormantShare {
		t.Errorf("changed within 90 days: %v", got)
	}
}

// A month of dormant mirrors, by hand: only polls, unchanged maintenance and the scrub
// read; the scrub reads 2× the pack from the class the mirror sits in.
func TestMirrorsOnEFSByHand(t *testing.T) {
	md := testModel()
	in := testInputs()
	fs := stackfacts.FileSystem{IAAfterDays: 1, ArchiveAfterDays: 90}
	// Operations as EFS meters them: a poll none; maintenance of an unchanged mirror 30
	// metadata reads, 2 writes, 5 reads of 100 bytes; a scrub 100 metadata reads.
	in.EFS = efsOps{ByKey: map[string]results.StoreCostEFSOp{
		opMaintainSame: {MetaReads: 30, MetaWrites: 2, DataReads: 5, DataReadBytes: 500, MeteredReadBytes: 30*4096 + 5*32768, MeteredWriteBytes: 2 * 4096},
		opScrub:        {MetaReads: 100, MeteredReadBytes: 100 * 4096},
	}}
	m := md.mirrorsOnEFS(mirrorLoad{Repos: 1000, PollsPerDay: 4, ScrubDays: 365, FS: fs, Takeovers: 100}, in.Reads, in.Pop, in.EFS)
	days := 730.0 / 24
	const gb = 1 << 30
	reads := map[string]efsRead{}
	for _, r := range m.Reads {
		reads[r.Source] = r
	}
	// A poll compares the upstream's refs with the digest the worker keeps: no read.
	if got := reads["polls"]; got.total() != 0 {
		t.Errorf("polls %+v", got)
	}
	// Maintenance looks at an unchanged mirror only when a worker takes it over (each
	// scrub period's look is its scrub, here).
	if got := reads["maintenance of unchanged mirrors"]; !nearTo(got.total(), 100*4096.0/gb, 1e-12) {
		t.Errorf("unchanged maintenance %+v", got)
	}
	scrubs := 1000 * days / 365
	if want := (100*30 + scrubs*100) * 4096 / gb; !nearTo(m.MetaReadGB, want, 1e-12) || !nearTo(m.MetaWriteGB, 100*2*4096.0/gb, 1e-12) {
		t.Errorf("metadata %v read, %v written; want %v, %v", m.MetaReadGB, m.MetaWriteGB, want, 100*2*4096.0/gb)
	}
	if want := 100 * (5*32768 - 500) / float64(gb); !nearTo(m.ReadMinGB, want, 1e-12) || m.WriteMinGB != 0 {
		t.Errorf("32 KiB minimum: %v read, %v written; want %v, 0", m.ReadMinGB, m.WriteMinGB, want)
	}
	// Life 1,095 days: a day in Standard, 89 in IA, 1,005 in Archive.
	scrub := 1000 * days / 365 * (2*(49<<20) + (1 << 20)) / gb
	if got := reads["scrubs"]; !nearTo(got.total(), scrub, 1e-9) || !nearTo(got.GB[archive], scrub*1005/1095, 1e-9) {
		t.Errorf("scrubs %+v, want %v GB", got, scrub)
	}
	if got := reads["fetches of changes"]; got.total() != 0 {
		t.Errorf("dormant mirrors fetched %+v", got)
	}
	total := 1000 * 50.0 / 1024
	if !nearTo(m.GB[standard]+m.GB[infrequent]+m.GB[archive], total, 1e-9) || !nearTo(m.GB[archive], total*1005/1095, 1e-9) {
		t.Errorf("storage %v, want %v GB", m.GB, total)
	}
}

// The honest bill counts what the previous one left out, beside it line by line.
func TestHonestBillBesideThePrevious(t *testing.T) {
	md, p := testModel(), testPrices(t)
	for i := range p {
		switch p[i].Key {
		case "efs_elastic_read":
			p[i].USD = 0.03
		case "kms_key":
			p[i].USD = 1
		}
	}
	st := testStack()
	st.KMSKeys = 1
	st.FS = stackfacts.FileSystem{IAAfterDays: 1, ArchiveAfterDays: 90}
	st.Workers.MinTasks, st.Workers.MaxTasks = 1, 12
	md.MinWorkers = 1
	b := md.bill(1_000_000, measured{}, p, st, testInputs())
	keys := map[string]float64{}
	for _, c := range b.Components {
		keys[c.Key] = c.USD
	}
	prev := map[string]bool{}
	for _, c := range b.Previous {
		prev[c.Key] = true
	}
	for _, k := range []string{"efs_storage", "efs_reads", "efs_writes", "kms"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("honest bill without %s: %v", k, keys)
		}
	}
	if keys["kms"] != 1 || keys["efs_reads"] <= 0 || !prev["efs_throughput"] || prev["kms"] {
		t.Errorf("honest %v, previous %v", keys, prev)
	}
	// A million repos, 80% on one host: 12 workers by the per-host limit; the previous
	// model sized by fetcher time alone (7).
	if b.Workers != 12 || b.PreviousWorkers != 7 {
		t.Errorf("workers %d, previous %d; want 12 and 7", b.Workers, b.PreviousWorkers)
	}
	// The workers keep the poll budget the stack gives them (MIRRORFLEET_POLL_BUDGET),
	// else the model's; without one they would poll as fast as the big host allows.
	if b.PollsPerDay != 2 || b.Unthrottled.PollsPerDay <= 2 {
		t.Errorf("polls a day %v (unthrottled %v), want the budget's 2", b.PollsPerDay, b.Unthrottled.PollsPerDay)
	}
	st.PollBudget = 0.5
	if b := md.bill(1_000_000, measured{}, p, st, testInputs()); b.PollsPerDay != 0.5 || b.Workers != 3 {
		t.Errorf("a budget of 0.5: %v polls a day on %d workers, want 0.5 on 3 (the per-host limit)", b.PollsPerDay, b.Workers)
	}
	if b.EFS == nil || len(b.EFS.Reads) == 0 {
		t.Error("no EFS month recorded")
	}
}

// A fleet at the bill's poll rate shows less staleness than the scaling step and the
// alarm the stack derives from the same budget.
func TestBilledFleetIsNotInAlarm(t *testing.T) {
	md, p := testModel(), testPrices(t)
	st := testStack()
	st.Workers.MinTasks, st.Workers.MaxTasks = 1, 12
	b0 := budget.Default()
	st.StaleAfterSeconds = b0.StaleAfter().Seconds()
	md.MinWorkers = 1
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b := md.bill(n, measured{}, p, st, testInputs())
		if s := b.Staleness; s.TailHours >= s.ScaleOutHours || s.TailHours >= s.AlarmHours || s.AlarmHours != b0.StaleAfter().Hours() {
			t.Errorf("%d repos: %+v", n, s)
		}
	}
}

// The tiers: the deployed one first, a longer scrub cheaper, the S3 tier with its own
// line; each total is the bill with its storage lines.
func TestTiers(t *testing.T) {
	md, p := testModel(), testPrices(t)
	for i := range p {
		switch p[i].Key {
		case "efs_elastic_read":
			p[i].USD = 0.03
		case "efs_ia":
			p[i].USD = 0.016
		case "efs_archive":
			p[i].USD = 0.008
		case "s3_gir_storage":
			p[i].USD = 0.004
		}
	}
	st := testStack()
	st.FS = stackfacts.FileSystem{IAAfterDays: 1, ArchiveAfterDays: 90}
	md.ColdAfterDays = 30
	ts := md.tiers(10_000, measured{}, p, st, testInputs()) // the stack scrubs every mirror every 90 days
	names := func() []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	if len(ts) != 6 || !ts[0].Deployed || ts[1].Deployed || !strings.Contains(ts[1].Name, "every mirror scrubbed every 365 days") {
		t.Fatalf("tiers %q", names())
	}
	b := md.bill(10_000, measured{}, p, st, testInputs())
	if !nearTo(ts[0].TotalUSD, b.TotalUSD, 1e-9) {
		t.Errorf("deployed tier total %v, bill %v", ts[0].TotalUSD, b.TotalUSD)
	}
	// Every mirror every 90 days (deployed) costs more than every 365; changed mirrors
	// only less again, the longer the period the less; no scheduled scrub least of all.
	byName := map[string]float64{}
	for _, x := range ts {
		byName[x.Name] = x.StorageUSD
	}
	every365 := byName["EFS, every mirror scrubbed every 365 days (the stack before issue 39)"]
	changed365 := byName["EFS, a mirror scrubbed at its slot every 365 days only if it was written since its last scrub"]
	changed1825 := byName["EFS, a mirror scrubbed at its slot every 1825 days only if it was written since its last scrub"]
	none := byName["EFS, no scheduled scrub"]
	if !(ts[0].StorageUSD > every365 && every365 > changed365 && changed365 >= changed1825 && changed1825 >= none && none > 0) {
		t.Errorf("storage lines: deployed %v, every 365 %v, changed 365 %v, changed 1825 %v, none %v (%q)",
			ts[0].StorageUSD, every365, changed365, changed1825, none, names())
	}
	last := ts[len(ts)-1]
	if last.Components[len(last.Components)-1].Key != "s3" || last.Components[len(last.Components)-1].USD <= 0 {
		t.Errorf("S3 tier %+v", last)
	}
}
