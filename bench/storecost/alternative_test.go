package main

import (
	"math"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The one-VM alternative by hand: the mirrors' bytes over the disk guard's threshold,
// one volume per 16 TiB at least the type's minimum, the instance by size, a root
// volume and an address.
func TestVMByHand(t *testing.T) {
	md := testModel()
	md.DiskThreshold = 0.85
	p := testPrices(t)
	set := func(key string, usd float64) { setPrice(p, key, usd) }
	set("ec2_c7g_large", 0.1)
	set("ec2_m7g_2xlarge", 0.4)
	set("ebs_st1", 0.05)
	set("ebs_gp3", 0.1)
	set("ipv4_hour", 0.005)
	st1 := vmVolumes[1]
	v := md.vm(10_000, st1, p)
	gib := math.Ceil(10_000 * 50 / 1024.0 / 0.85) // 575
	want := 730*0.1 + gib*0.05 + 20*0.1 + 730*0.005
	if v.Instance != "c7g.large" || v.Volumes != 1 || v.ProvisionedGiB != gib || math.Abs(v.TotalUSD-want) > 1e-9 {
		t.Errorf("10,000 repos on st1: %+v, want %v GiB, $%v", v, gib, want)
	}
	// A million repos: 57,445 GiB over four volumes of at most 16 TiB, the larger instance.
	v = md.vm(1_000_000, st1, p)
	gib = math.Ceil(1_000_000 * 50 / 1024.0 / 0.85)
	if v.Instance != "m7g.2xlarge" || v.Volumes != 4 || v.ProvisionedGiB < gib || v.ProvisionedGiB > gib+4 {
		t.Errorf("1,000,000 repos on st1: %+v, want 4 volumes holding %v GiB", v, gib)
	}
	// A small fleet still buys the type's smallest volume.
	if v := md.vm(100, st1, p); v.ProvisionedGiB != 125 {
		t.Errorf("100 repos on st1: %v GiB, want st1's minimum 125", v.ProvisionedGiB)
	}
}

// The stack is cheaper from the smallest size past which it stays cheaper.
func TestFleetCheaperFrom(t *testing.T) {
	pt := func(n int, fleet, vm float64) results.StoreCostCrossoverPoint {
		return results.StoreCostCrossoverPoint{Repos: n, FleetUSD: fleet, VMUSD: vm}
	}
	for _, c := range []struct {
		pts  []results.StoreCostCrossoverPoint
		want int
	}{
		{[]results.StoreCostCrossoverPoint{pt(1, 10, 20), pt(10, 15, 30)}, 1},
		{[]results.StoreCostCrossoverPoint{pt(1, 30, 20), pt(10, 25, 30), pt(100, 40, 50)}, 10},
		{[]results.StoreCostCrossoverPoint{pt(1, 10, 20), pt(10, 35, 30), pt(100, 40, 50)}, 100},
		{[]results.StoreCostCrossoverPoint{pt(1, 10, 20), pt(10, 15, 30), pt(100, 60, 50)}, 0},
	} {
		if got := fleetCheaperFrom(c.pts); got != c.want {
			t.Errorf("%+v: %d, want %d", c.pts, got, c.want)
		}
	}
}

// What a budget gives: a run's own figures at its budget, the two around it on a log
// scale between, nothing outside.
func TestFreshnessAt(t *testing.T) {
	f := freshnessRuns{Source: "test", Runs: []freshnessRun{
		{Policy: "bayes", Budget: 0.5, LagMeanH: 8, LagP50H: 4, LagP99H: 40, Freshness: 0.99},
		{Policy: "bayes", Budget: 2, LagMeanH: 2, LagP50H: 1, LagP99H: 10, Freshness: 0.999},
	}}
	if got := f.at(0.5); got == nil || got.LagMeanH != 8 || got.Freshness != 0.99 {
		t.Errorf("at a run's budget: %+v", got)
	}
	// 1 is halfway between 0.5 and 2 on a log scale: lags the geometric mean.
	if got := f.at(1); got == nil || math.Abs(got.LagMeanH-4) > 1e-9 || math.Abs(got.LagP99H-20) > 1e-9 || math.Abs(got.Freshness-0.9945) > 1e-9 {
		t.Errorf("between: %+v", got)
	}
	if f.at(0.25) != nil || f.at(4) != nil {
		t.Error("outside the runs: a figure")
	}
	real, err := freshnessFrom("../results")
	if err != nil || len(real.Runs) < 2 || real.at(real.Runs[0].Budget) == nil {
		t.Errorf("freshness.json: %+v, %v", real, err)
	}
}

// What EFS meters of an operation beyond its bytes.
func TestOverhead(t *testing.T) {
	o := overheadOf(results.StoreCostEFSOp{MetaReads: 10, MetaWrites: 2, DataReads: 3, DataReadBytes: 100, DataWrites: 1, DataWriteBytes: 40 << 10,
		MeteredReadBytes: 10*4096 + 3*32768, MeteredWriteBytes: 2*4096 + 40<<10})
	if o.MetaRead != 10*4096 || o.MetaWrite != 2*4096 || o.ReadMin != 3*32768-100 || o.WriteMin != 0 {
		t.Errorf("overhead %+v", o)
	}
}
