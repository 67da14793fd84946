package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// tiers prices the ways of storing the mirrors of repos repos on the stack st (ADR 24):
// the stack as deployed, the same file system under other scrub policies, and the packs
// of cold mirrors on S3 Glacier Instant Retrieval. Each carries the bill's total with
// its storage lines in place of the deployed ones.
func (md model) tiers(repos int, mu measured, p []results.StoreCostPrice, st stackInputs, in billInputs) []results.StoreCostTier {
	b := md.bill(repos, mu, p, st, in)
	rest := b.TotalUSD
	for _, c := range b.Components {
		if isStorage(c.Key) {
			rest -= c.USD
		}
	}
	md = md.with(st)
	deaths := float64(b.Workers) * md.DeathsPerWorkerMonth
	load := md.load(float64(repos), b.PollsPerDay, float64(b.Workers), deaths, 0, st)
	tier := func(name, desc string, deployed bool, cs []results.StoreCostComponent) results.StoreCostTier {
		t := results.StoreCostTier{Repos: repos, Name: name, Description: desc, Deployed: deployed, Components: cs, GoalUSD: goalUSD(repos, false)}
		for _, c := range cs {
			t.StorageUSD += c.USD
		}
		t.TotalUSD = rest + t.StorageUSD
		return t
	}
	var out []results.StoreCostTier
	policy := func(changed bool, days float64) string {
		if changed {
			return fmt.Sprintf("a mirror scrubbed at its slot every %.0f days only if it was written since its last scrub", days)
		}
		return fmt.Sprintf("every mirror scrubbed every %.0f days", days)
	}
	out = append(out, tier("EFS as deployed", fmt.Sprintf("IA after %d days and Archive after %d without a read, staying there when read; %s",
		st.FS.IAAfterDays, st.FS.ArchiveAfterDays, policy(st.ScrubChangedOnly, st.ScrubDays)), true, efsComponents(md.mirrorsOnEFS(load, in.Reads, in.Pop, in.EFS), p)))
	// The same file system under other scrub policies: every mirror (the scrub reads it
	// whole) at the worker's own period and at the stack's before issue 39, changed
	// mirrors only at other periods, and no scheduled scrub at all (the floor
	// of any policy: a scrub only after a failure or a corrupt fetch; verifying what is
	// written at write time would add its own reads of the new objects).
	for _, o := range []struct {
		changed bool
		days    float64
		what    string
	}{
		{false, worker.DefaultConfig().ScrubEvery.Hours() / 24, " (the worker's own default)"},
		{false, 365, " (the stack before issue 39)"},
		{true, 365, ""},
		{true, 5 * 365, ""},
		{false, noScrubDays, ""},
	} {
		if o.changed == st.ScrubChangedOnly && o.days == st.ScrubDays {
			continue
		}
		l := load
		l.ScrubChangedOnly, l.ScrubDays = o.changed, o.days
		name, desc := "EFS, "+policy(o.changed, o.days)+o.what, "the same file system; "+policy(o.changed, o.days)+o.what
		if o.days == noScrubDays {
			name, desc = "EFS, no scheduled scrub", "the same file system; a scrub only after a failed run or a corrupt fetch (what any policy adds to)"
		}
		out = append(out, tier(name, desc, false, efsComponents(md.mirrorsOnEFS(l, in.Reads, in.Pop, in.EFS), p)))
	}
	out = append(out, tier("cold packs on S3 Glacier Instant Retrieval",
		fmt.Sprintf("a mirror unchanged for %.0f days keeps only its small files on EFS; its packs and index files live in S3 Glacier Instant Retrieval, restored to EFS when a change or a clone needs them; S3's checksums replace the scrub of cold packs (modelled, not built)", md.ColdAfterDays),
		false, md.coldOnS3(load, in.Reads, in.Pop, in.EFS, p)))
	return out
}

// noScrubDays stands for no scheduled scrub: a period no fleet lives to see.
const noScrubDays = 1e9

// isStorage reports whether a bill line is the mirrors' storage (what a tier replaces).
func isStorage(key string) bool {
	return slices.Contains([]string{"efs_storage", "efs_reads", "efs_metadata", "efs_writes", "efs_throughput", "s3"}, key)
}

// coldOnS3 prices the mirrors with cold packs on S3 Glacier Instant Retrieval: a repo
// untouched (no change, no clone reaching EFS) for ColdAfterDays has its packs and
// index files on S3 only; its small files stay on EFS. A touch restores them (S3
// retrieval, an EFS write), and they live on EFS under its lifecycle until the repo is
// cold again; the S3 copy stays (packs do not change, new ones are added), so going
// cold again uploads only what the changes added. The scrub runs on warm mirrors only:
// a cold pack was checked by its last maintenance before it went, and S3 keeps
// checksums of what it stores.
func (md model) coldOnS3(l mirrorLoad, r mirrorReads, pop population, ops efsOps, p []results.StoreCostPrice) []results.StoreCostComponent {
	r = r.scaled(md.MirrorMB)
	const gb = 1 << 30
	days := hoursPerMonth / 24
	files := r.PackBytes + r.IndexBytes
	var m efsMonth
	reads := map[string][3]float64{}
	addRead := func(src string, class [3]float64, bytes float64) {
		v := reads[src]
		for c := range class {
			v[c] += class[c] * bytes / gb
		}
		reads[src] = v
	}
	var restores, s3GB, uploadGB float64
	perRepo := l.Repos / float64(popPoints)
	changeBytes := md.ChangeKB * 1024
	for _, rate := range pop.quantiles(popPoints) {
		changesDay := l.PollsPerDay * -math.Expm1(-rate/l.PollsPerDay)
		maintDay := maintainedPerDay(rate, l.MaintainDays)
		touch := changesDay
		cold := math.Exp(-touch * md.ColdAfterDays)
		s3GB += perRepo * files / gb
		// A warm spell lasts until ColdAfterDays pass untouched; within it the restored
		// files are new (Standard) until IAAfterDays pass unread.
		warmClass := [3]float64{1, 0, 0}
		if touch > 0 && l.FS.IAAfterDays > 0 {
			spell := math.Expm1(touch*md.ColdAfterDays) / touch
			inStd := math.Min(math.Expm1(touch*float64(l.FS.IAAfterDays))/touch, spell)
			warmClass = [3]float64{inStd / spell, 1 - inStd/spell, 0}
		}
		for c := range warmClass {
			m.GB[c] += perRepo * (1 - cold) * warmClass[c] * files / gb
		}
		back := perRepo * touch * cold * days // cold repos touched this month: restored
		restores += back
		uploadGB += back * (md.ChangeKB * 1024 * math.Max(1, changesDay*md.ColdAfterDays)) / gb
		m.ChangesPerMonth += perRepo * changesDay * days
		m.ChangedMaintenance += perRepo * maintDay * days
		addRead("fetches of changes", warmClass, perRepo*changesDay*days*(r.FetchOldPackBytes+r.FetchIndexBytes))
		addRead("maintenance of changed mirrors", warmClass, perRepo*maintDay*days*r.MaintainChangedIndexBytes)
		addRead("scrubs", warmClass, perRepo*(1-cold)*days/l.ScrubDays*(r.ScrubPackFactor*r.PackBytes+r.IndexBytes))
		m.ScrubsPerMonth += perRepo * (1 - cold) * days / l.ScrubDays
	}
	// As on EFS alone (mirrorsOnEFS): polls read nothing, maintenance looks at an
	// unchanged mirror when a worker takes it over or its scrub period begins unscrubbed.
	unchanged := l.Takeovers + math.Max(0, l.Repos*days/l.ScrubDays-m.ScrubsPerMonth)
	addRead("polls", [3]float64{1, 0, 0}, 0)
	addRead("maintenance of unchanged mirrors", [3]float64{1, 0, 0}, unchanged*r.MaintainUnchangedBytes)
	m.meter(ops, opPoll, l.Repos*l.PollsPerDay*days-m.ChangesPerMonth)
	m.meter(ops, opFetch, m.ChangesPerMonth)
	m.meter(ops, opMaintainChanged, m.ChangedMaintenance)
	m.meter(ops, opMaintainSame, unchanged)
	m.meter(ops, opScrub, m.ScrubsPerMonth)
	m.meter(ops, opFirstClone, l.NewRepos)
	for _, src := range []string{"polls", "maintenance of unchanged mirrors", "fetches of changes", "maintenance of changed mirrors", "scrubs"} {
		m.Reads = append(m.Reads, efsRead{Source: src, GB: reads[src]})
	}
	m.GB[standard] += l.Repos*r.SmallBytes/gb + m.ChangesPerMonth*changeBytes/gb*math.Min(float64(l.FS.IAAfterDays)/days, 1)
	restoredGB := restores * files / gb
	m.WriteGB = (m.ChangesPerMonth*changeBytes+m.ChangedMaintenance*(changeBytes+r.MIDXBytes)+m.ScrubsPerMonth*(r.IndexBytes-r.PackIdxBytes))/gb + restoredGB
	m.ToIAGB = m.WriteGB
	price := func(k string) float64 { return priceOf(p, k) }
	cs := efsComponents(m, p)
	cs[0].Name, cs[0].Detail = "EFS storage (small files, warm mirrors)", cs[0].Detail+fmt.Sprintf(" (%.1f%% of the repos warm)", 100*(1-pop.mean(func(rate float64) float64 {
		return math.Exp(-l.PollsPerDay * -math.Expm1(-rate/l.PollsPerDay) * md.ColdAfterDays)
	})))
	// Two objects per pack (the pack, its index files in one) per restore and upload.
	s3 := s3GB*price("s3_gir_storage") + restoredGB*price("s3_gir_retrieval") + restores*2*price("s3_gir_get") +
		restores*2*price("s3_gir_put") + uploadGB*price("efs_elastic_read")
	cs = append(cs, results.StoreCostComponent{Key: "s3", Name: "S3 Glacier Instant Retrieval (packs)", USD: s3,
		Detail: fmt.Sprintf("%s GB stored (every repo's packs and index files); %s restores a month (%s GB retrieved); %s GB of new packs uploaded as repos go cold",
			qty(s3GB), qty(restores), qty(restoredGB), qty(uploadGB))})
	return cs
}
