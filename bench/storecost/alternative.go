package main

import (
	"fmt"
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The alternative a user would pick instead of the stack: one VM running `mirrorfleet
// run` (coordinator, workers and API in one process on the embedded store), the mirrors
// on EBS volumes attached to it. It has no per-operation storage bill (a read of a
// local disk costs nothing), but pays for its whole instance and every provisioned GB
// all month, keeps one copy in one zone (EBS replicates within its zone; no snapshot
// is priced), and stops when the instance does.

// vmInstance is an EC2 instance type the alternative runs on.
type vmInstance struct {
	Name     string
	PriceKey string // its hourly on-demand price in prices.json
	VCPU     int
	MemGiB   int
}

// vmVolume is an EBS volume type the mirrors live on.
type vmVolume struct {
	Name             string
	PriceKey         string // per GB-month
	MinGiB, MaxGiB   float64
	ThroughputMBs    string // what it sustains, for the reader
	RandomReadsNotes string
}

var (
	vmSmall = vmInstance{Name: "c7g.large", PriceKey: "ec2_c7g_large", VCPU: 2, MemGiB: 4}
	vmLarge = vmInstance{Name: "m7g.2xlarge", PriceKey: "ec2_m7g_2xlarge", VCPU: 8, MemGiB: 32}

	vmVolumes = []vmVolume{
		{Name: "gp3", PriceKey: "ebs_gp3", MinGiB: 1, MaxGiB: 16384, ThroughputMBs: "125 MB/s and 3,000 IOPS included"},
		{Name: "st1", PriceKey: "ebs_st1", MinGiB: 125, MaxGiB: 16384, ThroughputMBs: "40 MB/s per TiB, bursting to 250"},
		{Name: "sc1", PriceKey: "ebs_sc1", MinGiB: 125, MaxGiB: 16384, ThroughputMBs: "12 MB/s per TiB, bursting to 80; 250 IOPS at most"},
	}
)

// vmRootGiB is the VM's root volume (gp3): the system and the embedded store.
const vmRootGiB = 20

// vmInstanceFor is the instance the alternative runs on at repos repos: the c7g.large
// up to 100,000 repos and the m7g.2xlarge beyond, the sizes the issue names for 10,000
// and 1,000,000 (a stated choice: CPU is not what binds either, see the notes).
func vmInstanceFor(repos int) vmInstance {
	if repos <= 100_000 {
		return vmSmall
	}
	return vmLarge
}

// vm prices one VM with its mirrors on volumes of type vol for repos repos: the
// mirrors' bytes with the disk guard's headroom (it stops cloning at DiskThreshold
// full), over as many volumes as the type's largest size needs.
func (md model) vm(repos int, vol vmVolume, p []results.StoreCostPrice) results.StoreCostVM {
	inst := vmInstanceFor(repos)
	price := func(k string) float64 { return priceOf(p, k) }
	gib := math.Ceil(float64(repos) * md.MirrorMB / 1024 / md.DiskThreshold)
	n := math.Max(1, math.Ceil(gib/vol.MaxGiB))
	each := math.Max(vol.MinGiB, math.Ceil(gib/n))
	v := results.StoreCostVM{Repos: repos, Instance: inst.Name, VolumeType: vol.Name, Volumes: int(n), ProvisionedGiB: n * each}
	add := func(key, name string, usd float64, detail string) {
		v.Components = append(v.Components, results.StoreCostComponent{Key: key, Name: name, USD: usd, Detail: detail})
		v.TotalUSD += usd
	}
	add("instance", "EC2 instance", hoursPerMonth*price(inst.PriceKey),
		fmt.Sprintf("%s (%d vCPU, %d GiB, Graviton, on-demand) × %.0f h", inst.Name, inst.VCPU, inst.MemGiB, hoursPerMonth))
	add("volumes", "EBS volumes (mirrors)", n*each*price(vol.PriceKey),
		fmt.Sprintf("%.0f × %s GiB %s (%s): %s repos × %.0f MB, %.0f%% full at most (the disk guard)", n, qty(each), vol.Name, vol.ThroughputMBs,
			qty(float64(repos)), md.MirrorMB, 100*md.DiskThreshold))
	add("root", "EBS root volume", vmRootGiB*price("ebs_gp3"), fmt.Sprintf("%d GiB gp3: the system and the embedded store", vmRootGiB))
	add("ipv4", "Public IPv4 address", hoursPerMonth*price("ipv4_hour"), fmt.Sprintf("1 × %.0f h", hoursPerMonth))
	return v
}

// crossoverSizes are the fleet sizes the stack is set against the VM at.
var crossoverSizes = []int{1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000}

// alternative prices the VM beside the stack's bill (without serving) at the billed
// sizes, every volume type, and the cheapest VM against the stack over crossoverSizes.
func (md model) alternative(mu measured, p []results.StoreCostPrice, st stackInputs, in billInputs) ([]results.StoreCostVM, *results.StoreCostCrossover, error) {
	var out []results.StoreCostVM
	for _, n := range []int{10_000, 1_000_000} {
		fleet := md.bill(n, mu, p, st, in).TotalUSD
		for _, vol := range vmVolumes {
			v := md.vm(n, vol, p)
			v.FleetUSD = fleet
			out = append(out, v)
		}
	}
	c := &results.StoreCostCrossover{}
	for _, n := range crossoverSizes {
		best := results.StoreCostVM{}
		for _, vol := range vmVolumes {
			if v := md.vm(n, vol, p); best.Instance == "" || v.TotalUSD < best.TotalUSD {
				best = v
			}
		}
		c.Points = append(c.Points, results.StoreCostCrossoverPoint{Repos: n, FleetUSD: md.bill(n, mu, p, st, in).TotalUSD,
			VMUSD: best.TotalUSD, VM: best.Instance + " + " + best.VolumeType})
	}
	c.FleetCheaperFrom = fleetCheaperFrom(c.Points)
	return out, c, nil
}

// fleetCheaperFrom is the smallest size from which the stack costs less than the VM at
// every larger size of points (0: at none, or not at the largest).
func fleetCheaperFrom(points []results.StoreCostCrossoverPoint) int {
	from := 0
	for i := len(points) - 1; i >= 0; i-- {
		if points[i].FleetUSD >= points[i].VMUSD {
			break
		}
		from = points[i].Repos
	}
	return from
}
