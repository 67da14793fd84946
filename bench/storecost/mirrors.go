package main

import (
	"fmt"
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
)

// Storage classes of EFS, in the order of the arrays below.
const (
	standard = iota
	infrequent
	archive
)

var classNames = [3]string{"Standard", "IA", "Archive"}

// mirrorLoad is what a month asks of the mirrors on EFS.
type mirrorLoad struct {
	Repos       float64
	PollsPerDay float64 // per repo, as the workers run them
	ScrubDays   float64 // a full run (scrub) per mirror every so many days
	// MaintainDays is how often a mirror is considered for maintenance: one that changed
	// since its last run is maintained then (0: daily).
	MaintainDays float64
	// ScrubChangedOnly scrubs a mirror only in a period it changed in (a design option:
	// the worker scrubs every mirror today).
	ScrubChangedOnly bool
	// ClonesPerDay are clones served (serving stacks only); CacheHit the share the git
	// server's whole-clone cache answers (ADR 20) without reading EFS; HotRepos how many
	// repos most clones go to, HotShare the share of the missed clones that do.
	ClonesPerDay, CacheHit, HotRepos, HotShare float64
	// Takeovers are repos a month taken by a worker that does not know what their last
	// maintenance saw (moved by a death and the replacement's join): each is looked at
	// once by maintenance. NewRepos are first clones a month.
	Takeovers, NewRepos float64
	FS                  stackfacts.FileSystem
}

// efsMonth is a month of the mirrors on EFS: storage by class, every byte read by
// source and class, bytes written, bytes tiered down.
type efsMonth struct {
	GB                    [3]float64 // average stored
	Reads                 []efsRead
	WriteGB               float64
	ToIAGB, ToArchiveGB   float64
	StandardReasons       string // what keeps data in Standard
	ChangesPerMonth       float64
	ChangedMaintenance    float64 // maintenance runs of changed mirrors a month
	ScrubsPerMonth        float64
	ClonesFromEFSPerMonth float64
	// What EFS meters beyond the bytes (efsbill.go): metadata operations, and what the
	// 32 KiB minimum of a data operation adds; each operation kind's monthly count.
	MetaReadGB, MetaWriteGB, ReadMinGB, WriteMinGB float64
	Ops                                            []results.StoreCostOpCount
}

// efsRead is what one source reads in a month, by class.
type efsRead struct {
	Source string
	GB     [3]float64
}

func (r efsRead) total() float64 { return r.GB[0] + r.GB[1] + r.GB[2] }

// classes is where a file spends its life, by class, under the file system's
// lifecycle: reads at a Poisson rate (per day; changes and clones), a scrub every
// scrubDays, a life of lifeDays (until a repack rewrites it).
//
// A file moves to IA after IAAfterDays without a read and to Archive after
// ArchiveAfterDays. Without BackToStandardOnRead a read does not move it back: the moves
// are one-way, so a file stays in Standard until its first gap of IAAfterDays between
// reads, and in IA until its first gap of ArchiveAfterDays. A scrub reads every file
// every scrubDays, so a window at least that long is never reached (the scrub's slot
// comes a maintenance pass after its period, so a window equal to it is reached).
// For Poisson reads at rate r the first gap of w days comes after (e^{rw} − 1)/r days
// on average. With BackToStandardOnRead every read starts the file over in Standard:
// the share of the time between reads spent in each class.
func classes(rate, scrubDays, lifeDays float64, fs stackfacts.FileSystem) [3]float64 {
	if fs.IAAfterDays == 0 {
		return [3]float64{1, 0, 0}
	}
	a, b := float64(fs.IAAfterDays), float64(fs.ArchiveAfterDays)
	if fs.BackToStandardOnRead {
		// Time between reads X = min(Exp(rate), scrubDays); E[min(X, t)].
		upTo := func(t float64) float64 {
			t = math.Min(t, scrubDays)
			if rate == 0 {
				return t
			}
			return -math.Expm1(-rate*t) / rate
		}
		ex := upTo(math.Inf(1))
		s := upTo(a) / ex
		if b == 0 {
			return [3]float64{s, 1 - s, 0}
		}
		ia := (upTo(b) - upTo(a)) / ex
		return [3]float64{s, ia, 1 - s - ia}
	}
	firstGap := func(w float64) float64 {
		if scrubDays < w {
			return math.Inf(1)
		}
		if rate == 0 {
			return w
		}
		return math.Expm1(rate*w) / rate
	}
	s := math.Min(firstGap(a), lifeDays) / lifeDays
	arch := 0.0
	if b > 0 {
		arch = math.Max(0, lifeDays-firstGap(b)) / lifeDays
	}
	return [3]float64{s, 1 - s - arch, arch}
}

// mirrorsOnEFS is the month of load l: every repo's pack and index files (reads r,
// scaled to the model's mirror size) in the classes its change rate (population p) and
// the scrub leave them, the small files in Standard, the new packs of changes in
// Standard until they cool; and every operation as EFS meters it (ops).
func (md model) mirrorsOnEFS(l mirrorLoad, r mirrorReads, p population, ops efsOps) efsMonth {
	r = r.scaled(md.MirrorMB)
	const gb = 1 << 30
	days := hoursPerMonth / 24
	var m efsMonth
	add := func(src string, class [3]float64, bytes float64) {
		for i := range m.Reads {
			if m.Reads[i].Source == src {
				for c := range class {
					m.Reads[i].GB[c] += class[c] * bytes / gb
				}
				return
			}
		}
		e := efsRead{Source: src}
		for c := range class {
			e.GB[c] = class[c] * bytes / gb
		}
		m.Reads = append(m.Reads, e)
	}
	all := [3]float64{1, 0, 0} // small files: always Standard
	files := r.PackBytes + r.IndexBytes

	// Clones that miss the cache: most go to the hot repos (whose files they keep in
	// Standard), the rest to repos at random.
	missed := l.ClonesPerDay * (1 - l.CacheHit)
	hot := math.Min(l.HotRepos, l.Repos)
	randomRate := 0.0 // clones a day per repo, at random
	if l.Repos > hot {
		randomRate = missed * (1 - l.HotShare) / (l.Repos - hot)
	}
	if hot > 0 {
		m.GB[standard] += hot * files / gb
		add("clones", all, missed*l.HotShare*days*(r.ClonePackFactor*r.PackBytes+r.IndexBytes))
	}
	m.ClonesFromEFSPerMonth = missed * days

	// Every other repo by its change rate: the polls that find a change, the changed
	// maintenance that follows, the scrub, and random clones read its files.
	perRepo := (l.Repos - hot) / float64(len(p.quantiles(popPoints)))
	for _, rate := range p.quantiles(popPoints) {
		changesDay := l.PollsPerDay * -math.Expm1(-rate/l.PollsPerDay) // a poll sees ≥ 1 push
		maintDay := maintainedPerDay(rate, l.MaintainDays)
		touch := changesDay + randomRate
		life := md.HorizonDays
		if rate > 0 { // a repack rewrites the pack once changes add half its size again
			life = math.Min(life, r.PackBytes/2/(changesDay*md.ChangeKB*1024))
		}
		scrubDays := l.ScrubDays // between two scrubs of this mirror
		if l.ScrubChangedOnly {
			scrubDays = l.ScrubDays / math.Max(-math.Expm1(-changesDay*l.ScrubDays), 1e-300)
		}
		c := classes(touch, scrubDays, life, l.FS)
		for i := range c {
			m.GB[i] += perRepo * c[i] * files / gb
		}
		m.ChangesPerMonth += perRepo * changesDay * days
		m.ChangedMaintenance += perRepo * maintDay * days
		add("fetches of changes", c, perRepo*changesDay*days*(r.FetchOldPackBytes+r.FetchIndexBytes))
		add("maintenance of changed mirrors", c, perRepo*maintDay*days*r.MaintainChangedIndexBytes)
		add("scrubs", c, perRepo*days/scrubDays*(r.ScrubPackFactor*r.PackBytes+r.IndexBytes))
		m.ScrubsPerMonth += perRepo * days / scrubDays
		add("clones", c, perRepo*randomRate*days*(r.ClonePackFactor*r.PackBytes+r.IndexBytes))
		// Tiering: a file moves down once a life, if it gets there.
		m.ToIAGB += perRepo * files / gb * days / life * boolf(c[standard] < 1)
		m.ToArchiveGB += perRepo * files / gb * days / life * boolf(c[archive] > 0)
	}
	// A poll that finds nothing compares the upstream's refs with the digest the worker
	// keeps: it reads nothing (efs_ops poll_nochange). Maintenance looks at an unchanged
	// mirror only when a worker takes it over, and when its scrub period begins and it
	// is not scrubbed then.
	polls := l.Repos * l.PollsPerDay * days
	add("polls", all, (polls-m.ChangesPerMonth)*float64(ops.ByKey[opPoll].DataReadBytes))
	unchanged := l.Takeovers + math.Max(0, l.Repos*days/l.ScrubDays-m.ScrubsPerMonth)
	add("maintenance of unchanged mirrors", all, unchanged*r.MaintainUnchangedBytes)
	m.meter(ops, opPoll, polls-m.ChangesPerMonth)
	m.meter(ops, opFetch, m.ChangesPerMonth)
	m.meter(ops, opMaintainChanged, m.ChangedMaintenance)
	m.meter(ops, opMaintainSame, unchanged)
	m.meter(ops, opScrub, m.ScrubsPerMonth)
	m.meter(ops, opClone, m.ClonesFromEFSPerMonth)
	m.meter(ops, opFirstClone, l.NewRepos)
	// A first clone indexes the pack it receives (reads scaled from the measured
	// mirror's to the model's) and writes the mirror.
	if ops.MirrorBytes > 0 {
		add("first clones", all, l.NewRepos*float64(ops.ByKey[opFirstClone].DataReadBytes)*md.MirrorMB*(1<<20)/ops.MirrorBytes)
	}

	// Small files, and the new packs of changes until they go IAAfterDays unread (the
	// next change's maintenance rolls them into one, itself new).
	m.GB[standard] += l.Repos * r.SmallBytes / gb
	changeBytes := md.ChangeKB * 1024
	recent := m.ChangesPerMonth * changeBytes / gb * math.Min(float64(max(l.FS.IAAfterDays, 0))/days, 1)
	if l.FS.IAAfterDays == 0 {
		recent = m.ChangesPerMonth * changeBytes / gb
	}
	m.GB[standard] += recent
	// Written: each change's pack, each changed maintenance's rolled pack and multi-pack
	// index, each scrub's multi-pack index, bitmap and commit-graph (it keeps the packs
	// and their .idx: geometric repack leaves the big pack alone).
	m.WriteGB = (m.ChangesPerMonth*changeBytes + m.ChangedMaintenance*(changeBytes+r.MIDXBytes) +
		m.ScrubsPerMonth*(r.IndexBytes-r.PackIdxBytes) + l.NewRepos*md.MirrorMB*(1<<20)) / gb
	if l.FS.IAAfterDays > 0 {
		m.ToIAGB += m.WriteGB
	}
	return m
}

// maintainedPerDay is how many maintenance runs a day a mirror pushed to at rate (a
// day) gets when each is considered every `every` days (0: daily) and maintained if it
// changed since: the chance of a change in the interval, once per interval.
func maintainedPerDay(rate, every float64) float64 {
	if every <= 0 {
		every = 1
	}
	return -math.Expm1(-rate*every) / every
}

// opsDetail lists a month's operations by kind.
func opsDetail(ops []results.StoreCostOpCount) string {
	out := ""
	for _, o := range ops {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s %s", qty(o.Count), o.Op)
	}
	return out
}

// popPoints is how many equally likely repos stand for the population.
const popPoints = 400

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// efsComponents prices a month on EFS: storage by class, reads (Elastic throughput on
// every byte, plus the IA and Archive access charges), writes, tiering.
func efsComponents(m efsMonth, p []results.StoreCostPrice) []results.StoreCostComponent {
	price := func(k string) float64 { return priceOf(p, k) }
	storage := m.GB[standard]*price("efs_standard") + m.GB[infrequent]*price("efs_ia") + m.GB[archive]*price("efs_archive")
	var readGB [3]float64
	detail := ""
	for _, r := range m.Reads {
		for c := range r.GB {
			readGB[c] += r.GB[c]
		}
		if detail != "" {
			detail += "; "
		}
		detail += fmt.Sprintf("%s %s", r.Source, qty(r.total()))
	}
	read := readGB[0] + readGB[1] + readGB[2]
	reads := (read+m.ReadMinGB)*price("efs_elastic_read") + readGB[infrequent]*price("efs_ia_read") +
		readGB[archive]*price("efs_archive_read")
	return []results.StoreCostComponent{
		{Key: "efs_storage", Name: "EFS storage", USD: storage,
			Detail: fmt.Sprintf("%s GB: %s Standard, %s Infrequent Access, %s Archive", qty(m.GB[0]+m.GB[1]+m.GB[2]), qty(m.GB[0]), qty(m.GB[1]), qty(m.GB[2]))},
		{Key: "efs_reads", Name: "EFS data reads", USD: reads,
			Detail: fmt.Sprintf("%s GB read (%s from Standard, %s from IA, %s from Archive): %s GB; + %s GB for the 32 KiB minimum of each read",
				qty(read), qty(readGB[0]), qty(readGB[1]), qty(readGB[2]), detail, qty(m.ReadMinGB))},
		{Key: "efs_metadata", Name: "EFS metadata operations", USD: m.MetaReadGB*price("efs_elastic_read") + m.MetaWriteGB*price("efs_elastic_write"),
			Detail: fmt.Sprintf("%s GB metered at the read price (opens, stats, listings, closes), %s GB at the write price (creates, renames, deletes, locks, syncs): 4 KiB each; %s",
				qty(m.MetaReadGB), qty(m.MetaWriteGB), opsDetail(m.Ops))},
		{Key: "efs_writes", Name: "EFS data writes and tiering", USD: (m.WriteGB+m.WriteMinGB)*price("efs_elastic_write") + m.ToIAGB*price("efs_ia_tiering") + m.ToArchiveGB*price("efs_archive_tiering"),
			Detail: fmt.Sprintf("%s GB written (%s changes, %s changed maintenance runs, %s scrubs) + %s GB for the 32 KiB minimum of each write; %s GB moved to IA, %s GB to Archive",
				qty(m.WriteGB), qty(m.ChangesPerMonth), qty(m.ChangedMaintenance), qty(m.ScrubsPerMonth), qty(m.WriteMinGB), qty(m.ToIAGB), qty(m.ToArchiveGB))},
	}
}
