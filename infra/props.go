package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// Props configures the stack. Zero values take the defaults of Defaults.
type Props struct {
	awscdk.StackProps

	Fleet        string // Fleet dimension of the metrics; default: the stack name
	WorkerCount  int    // Spot worker tasks (the autoscaling minimum)
	MaxWorkers   int    // autoscaling maximum
	WorkerCPU    int    // Fargate CPU units
	WorkerMemory int    // MiB
	Fetchers     int    // MIRRORFLEET_FETCHERS
	// MaintainEvery and ScrubEvery: MIRRORFLEET_MAINTAIN_EVERY and _SCRUB_EVERY (ADR 23).
	// MaintainEvery 0: the worker's default (24h). ScrubEvery defaults to two years on
	// AWS (ADR 24: a scrub reads the mirror whole, and on EFS that read is billed,
	// from Archive at $0.06/GB); the worker's own default is 90 days.
	MaintainEvery, ScrubEvery time.Duration
	// ScrubAll scrubs every mirror at its slot; by default (false) only the mirrors
	// written since their last scrub (MIRRORFLEET_SCRUB_CHANGED: EFS keeps the bytes at
	// rest redundantly, ADR 24).
	ScrubAll bool
	// WithoutFallback drops the on-demand twin of the Spot workers (see workers).
	WithoutFallback bool
	Grace           time.Duration // MIRRORFLEET_GRACE
	Warmup          time.Duration // MIRRORFLEET_WARMUP; default 10m
	NoWarmup        bool          // no first-start warm-up (a fleet being rebuilt): MIRRORFLEET_WARMUP=0
	MinLive         int           // alarm when fewer live workers; default WorkerCount
	// PollsPerDay is the poll budget the fleet is sized for (infra/budget), and the
	// workers hold it (MIRRORFLEET_POLL_BUDGET): maxWorkers, the stale-repos alarm and
	// the scaling steps follow from it. Default 2.
	PollsPerDay float64
	// StaleAfter: alarm when StalenessMax exceeds it; default twice the staleness a fleet
	// at its budget shows (budget.StaleAfter).
	StaleAfter time.Duration
	// CoordinatorConcurrency reserves that much concurrency for the coordinator; 0 or
	// negative: none (the default: the election lease keeps one leader, and a new
	// account's quota of 10 cannot spare a reservation, see infra/README.md).
	CoordinatorConcurrency int
	List                   deployenv.List // list sync of the coordinator; Repo "" = off

	VpcID string // existing VPC (needs env account/region); empty: new VPC
	// PrivateNetwork puts the tasks in private subnets behind a NAT gateway; the default
	// is public subnets, a public IP per task and security groups admitting nothing but the
	// git server's port from its load balancer.
	PrivateNetwork bool
	PublicReads    bool // GET routes without IAM auth (the API Lambda then serves reads to anyone)
	// CaseInsensitiveHosts are hosts, besides github.com and gitlab.com, whose repo paths
	// are case-insensitive (MIRRORFLEET_CASE_INSENSITIVE_HOSTS, every component).
	CaseInsensitiveHosts []string
	// CORSOrigins are the origins whose pages may read /tunasync.json (simple GETs;
	// MIRRORFLEET_CORS_ORIGIN); none: no CORS.
	CORSOrigins []string
	// SiteAbbr and SiteName name the fleet as a mirror site in /mirrorz.json
	// (MIRRORFLEET_SITE_ABBR, _NAME); no SiteAbbr: the route answers 404.
	SiteAbbr, SiteName string
	// WithoutWebhooks leaves out the public webhook route and its secret.
	WithoutWebhooks bool
	// WebhookSecretARN is an existing Secrets Manager secret (its complete ARN) holding
	// the webhooks' secret; empty: the stack creates one with a generated value.
	WebhookSecretARN string
	// Feeds are the forges' change feeds the workers probe (KIND=URL; ADR 28), every
	// FeedEvery (0: the worker's 5m); ForgeTokensARN is the complete ARN of the Secrets
	// Manager secret holding their tokens (HOST=TOKEN lines), which the operator creates.
	Feeds          []string
	FeedEvery      time.Duration
	ForgeTokensARN string
	// DiskQuota is MIRRORFLEET_DISK_QUOTA: a hard fleet-wide stop (past 85% of it every
	// worker stops fetching, ADR 31); none by default: EFS grows with the mirrors and the
	// storage budget's alarm watches what it costs.
	DiskQuota string
	// StorageBudgetGiB is the alarm on the mirrors' file system's size (AWS/EFS
	// StorageBytes): it fires past this many GiB. Default DefaultStorageBudgetGiB;
	// NoStorageAlarm (storageBudgetGiB=none) leaves the alarm out.
	StorageBudgetGiB int
	NoStorageAlarm   bool
	// HookRate and HookBurst throttle HookRoute (requests a second, and the bucket);
	// defaults from the budget (budget.HookRate, twice that).
	HookRate, HookBurst int
	// AlarmEmail is the address subscribed to the alarm topic: required, or NoAlarmEmail
	// (context alarmEmail=none), which synthesizes with a warning that nobody is told.
	AlarmEmail    string
	NoAlarmEmail  bool
	DeletionGuard bool // table deletion protection and RETAIN of stateful resources
	// ExistingTable and ExistingFileSystem name the table and the file system a
	// destroyed stack retained (DeletionGuard keeps both): a redeploy imports them
	// instead of creating empty ones.
	ExistingTable, ExistingFileSystem string

	// WithoutServing leaves out the git server behind its load balancer.
	WithoutServing bool
	// ServeSeparate runs the git server as a service of its own (own tasks, task role,
	// public IPs and scaling on CPU and requests). By default it is a second container
	// in every worker task (ADR 27): no task and no public IPv4 address of its own, the
	// workers' task role, serving capacity that follows the worker count.
	ServeSeparate bool
	// ServeMemory is the git server's MiB: its container's share of the worker task
	// (default 512; the worker keeps the rest), or with ServeSeparate its task's (1024).
	ServeMemory int
	// With ServeSeparate only: the serving tasks' CPU units, the autoscaling bounds, and
	// how many of ServeMin run on on-demand Fargate (the rest on Spot).
	ServeCPU, ServeMin, ServeMax, ServeOnDemand int

	PackCacheBytes string // MIRRORFLEET_PACK_CACHE_BYTES on the task's local disk; default 10G
	// WithoutCDN (cdn=false) serves clones from the load balancer itself; by default a
	// CloudFront distribution in front of it serves them over HTTPS (ADR 30) and the load
	// balancer admits only CloudFront's origin-facing addresses and ServeIngress.
	WithoutCDN bool
	// CertificateARN is an ACM certificate for DomainName: CloudFront's (which must be in
	// us-east-1), or WithoutCDN the load balancer's (HTTPS on 443, HTTP redirected).
	CertificateARN string
	DomainName     string // the DNS name clients use (a CNAME to the distribution, or the load balancer)
	// AllowPlainHTTP lets WithoutCDN serve clones over plain HTTP (no certificate).
	AllowPlainHTTP bool
	// ServeIngress are the networks (CIDR) the load balancer admits besides CloudFront,
	// such as a site's own clients; with the CDN only.
	ServeIngress    []string
	ServeAccessLogs bool // load balancer access logs to an S3 bucket

	// RepoRoot is the repository root (go.mod), where build/*.zip are read. Default:
	// found upward from the working directory.
	RepoRoot string
	// LambdaAssetDir overrides the directory holding coordinator.zip and api.zip
	// (default RepoRoot/build).
	LambdaAssetDir string
	// WorkerImage is the image both services run: the `mirrorfleet` binary on a base
	// with git (cmd/pushimage builds and pushes it). An ECR reference
	// (<account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:… or :tag) is pulled
	// with the execution role's ECR permissions on that repository; another registry's
	// reference must be public.
	WorkerImage string
	// AllowPlaceholders lets a missing Lambda zip or worker image be replaced by a
	// placeholder, for synth and tests only: a deploy of placeholders would run nothing.
	AllowPlaceholders bool
}

// secretARN matches a Secrets Manager secret's complete ARN (with its 6-character suffix).
var secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$`)

// DefaultScrubEvery is the scrub period of a deployed fleet (ADR 24).
const DefaultScrubEvery = 2 * 365 * 24 * time.Hour

// DefaultStorageBudgetGiB is where the storage alarm fires by default: 1 TiB of mirrors,
// about twice the bill's 10,000-repo fleet (488 GB).
const DefaultStorageBudgetGiB = 1024

// cloudFrontCertRegion is where CloudFront takes its certificates from.
const cloudFrontCertRegion = "us-east-1"

// maxServeIngress is how many networks the load balancer may admit besides CloudFront:
// CloudFront's origin-facing prefix list counts as 55 rules against a security group's
// default quota of 60.
const maxServeIngress = 5

// acmARN matches an ACM certificate's ARN; its region is the second group.
var acmARN = regexp.MustCompile(`^arn:aws[a-z-]*:acm:([a-z0-9-]+):[0-9]{12}:certificate/[0-9a-f-]{36}$`)

// hostName matches a DNS name clients can clone from.
var hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$`)

// DefaultServeContainerMemory is the git server container's MiB in a worker task, and
// minWorkerContainerMemory what the worker container keeps at least (ADR 27).
const (
	DefaultServeContainerMemory = 512
	minWorkerContainerMemory    = 1024
)

// ServeBeside says whether the git server runs in the worker tasks.
func (p Props) ServeBeside() bool { return !p.WithoutServing && !p.ServeSeparate }

// WorkerContainerMemory is the worker container's MiB: the task's, less the git
// server's beside it.
func (p Props) WorkerContainerMemory() int {
	if p.ServeBeside() {
		return p.WorkerMemory - p.ServeMemory
	}
	return p.WorkerMemory
}

// Defaults fills the zero fields of p.
func (p Props) Defaults() Props {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&p.WorkerCount, 1)
	def(&p.WorkerCPU, 256)
	def(&p.WorkerMemory, 2048)
	def(&p.Fetchers, 10)
	if p.PollsPerDay <= 0 {
		p.PollsPerDay = budget.Default().PollsPerDay
	}
	def(&p.MaxWorkers, max(p.Budget().MaxWorkers(), p.WorkerCount))
	def(&p.MinLive, p.WorkerCount)
	if p.ServeSeparate {
		def(&p.ServeCPU, 256)
		def(&p.ServeMemory, 1024)
		def(&p.ServeMin, 1)
		def(&p.ServeMax, 4)
	} else {
		def(&p.ServeMemory, DefaultServeContainerMemory)
	}
	if p.Grace <= 0 {
		p.Grace = 10 * time.Minute
	}
	if p.Warmup <= 0 {
		p.Warmup = 10 * time.Minute
	}
	if p.StaleAfter <= 0 {
		p.StaleAfter = p.Budget().StaleAfter()
	}
	if p.ScrubEvery <= 0 {
		p.ScrubEvery = DefaultScrubEvery
	}
	if p.StorageBudgetGiB <= 0 && !p.NoStorageAlarm {
		p.StorageBudgetGiB = DefaultStorageBudgetGiB
	}
	def(&p.HookRate, p.Budget().HookRate())
	def(&p.HookBurst, 2*p.HookRate)
	if p.PackCacheBytes == "" {
		p.PackCacheBytes = "10G"
	}
	if p.RepoRoot == "" {
		p.RepoRoot = findRepoRoot()
	}
	if p.LambdaAssetDir == "" {
		p.LambdaAssetDir = filepath.Join(p.RepoRoot, "build")
	}
	return p
}

// Budget is the poll budget of these props: the default one at their poll rate and
// fetchers.
func (p Props) Budget() budget.Budget {
	b := budget.Default()
	if p.PollsPerDay > 0 {
		b.PollsPerDay = p.PollsPerDay
	}
	if p.Fetchers > 0 {
		b.Fetchers = p.Fetchers
	}
	return b
}

// Check reports settings that cannot be deployed, all of them at once.
func (p Props) Check() error {
	var errs []string
	if p.AlarmEmail == "" && !p.NoAlarmEmail {
		errs = append(errs, "alarmEmail is required: the address the alarms notify (-c alarmEmail=ops@example.org), "+
			"or -c alarmEmail=none to deploy with alarms that tell nobody")
	}
	if v := p.ExistingFileSystem; v != "" && !regexp.MustCompile(`^fs-[0-9a-f]{8,40}$`).MatchString(v) {
		errs = append(errs, fmt.Sprintf("fileSystemId %q is not an EFS file system id (fs-…)", v))
	}
	if v := p.ExistingTable; v != "" && !regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`).MatchString(v) {
		errs = append(errs, fmt.Sprintf("tableName %q is not a DynamoDB table name", v))
	}
	if p.AlarmEmail != "" && !strings.Contains(p.AlarmEmail, "@") {
		errs = append(errs, fmt.Sprintf("alarmEmail %q is not an email address", p.AlarmEmail))
	}
	if out := p.Budget().ScaleOutAbove(); p.StaleAfter <= out {
		errs = append(errs, fmt.Sprintf("staleAfter (%s) must exceed the staleness at which the workers scale out (%s, from pollsPerDay %g)",
			p.StaleAfter, out.Round(time.Minute), p.Budget().PollsPerDay))
	}
	if p.MaxWorkers < p.WorkerCount {
		errs = append(errs, fmt.Sprintf("maxWorkers (%d) is below workerCount (%d)", p.MaxWorkers, p.WorkerCount))
	}
	if p.ServeBeside() {
		var separateOnly []string
		for name, v := range map[string]int{"serveCpu": p.ServeCPU, "serveMin": p.ServeMin, "serveMax": p.ServeMax, "serveOnDemand": p.ServeOnDemand} {
			if v != 0 {
				separateOnly = append(separateOnly, name)
			}
		}
		if len(separateOnly) > 0 {
			slices.Sort(separateOnly)
			errs = append(errs, fmt.Sprintf("%s apply to a git server service of its own: add serveSeparate=true, or leave them out "+
				"(the git server runs in the worker tasks and scales with them)", strings.Join(separateOnly, ", ")))
		}
		if p.WorkerContainerMemory() < minWorkerContainerMemory {
			errs = append(errs, fmt.Sprintf("serveMemory (%d MiB) leaves the worker %d MiB of its %d MiB task, want at least %d",
				p.ServeMemory, p.WorkerContainerMemory(), p.WorkerMemory, minWorkerContainerMemory))
		}
	}
	if !p.WithoutServing {
		if p.ServeMax < p.ServeMin {
			errs = append(errs, fmt.Sprintf("serveMax (%d) is below serveMin (%d)", p.ServeMax, p.ServeMin))
		}
		if p.ServeOnDemand > p.ServeMin {
			errs = append(errs, fmt.Sprintf("serveOnDemand (%d) is above serveMin (%d)", p.ServeOnDemand, p.ServeMin))
		}
		errs = append(errs, p.checkHTTPS()...)
		if p.ServeAccessLogs && (p.Env == nil || p.Env.Region == nil) {
			errs = append(errs, "serveAccessLogs needs the stack's region (the log bucket's policy names the region's "+
				"load balancer account): the CDK CLI sets CDK_DEFAULT_REGION from your credentials")
		}
	}
	if p.DiskQuota != "" {
		if n, err := deployenv.ParseBytes(p.DiskQuota); err != nil || n <= 0 {
			errs = append(errs, fmt.Sprintf("diskQuota %q: a size such as 50T (a hard stop: past 85%% of it every worker stops fetching), "+
				"or leave it out (the default: no fleet-wide stop; storageBudgetGiB alarms on the file system's size)", p.DiskQuota))
		}
	}
	if n, err := deployenv.ParseBytes(p.PackCacheBytes); err != nil || n <= 0 {
		errs = append(errs, fmt.Sprintf("packCacheBytes %q: a size such as 10G", p.PackCacheBytes))
	}
	if p.StorageBudgetGiB < 0 {
		errs = append(errs, fmt.Sprintf("storageBudgetGiB %d: a number of GiB above 0, or none (no storage alarm)", p.StorageBudgetGiB))
	}
	// API Gateway's account-level throttle is 10,000 requests a second with a burst of
	// 5,000: a route cannot be given more.
	if p.HookRate < 1 || p.HookRate > 10000 {
		errs = append(errs, fmt.Sprintf("hookRate %d: requests a second between 1 and 10000 (API Gateway's account limit)", p.HookRate))
	}
	if p.HookBurst < p.HookRate || p.HookBurst > 5000 {
		errs = append(errs, fmt.Sprintf("hookBurst %d: at least hookRate (%d) and at most 5000 (API Gateway's account limit)", p.HookBurst, p.HookRate))
	}
	for _, f := range p.Feeds {
		// A GitHub feed's token is in the tokens' secret, which the workers read.
		if _, err := feeds.ParseSource(f, nil); err != nil && (p.ForgeTokensARN == "" || !strings.Contains(err.Error(), "needs a token")) {
			errs = append(errs, fmt.Sprintf("feeds: %v (the token goes in forgeTokensSecretArn's secret)", err))
		}
	}
	for _, o := range p.CORSOrigins {
		if err := httpguard.CheckOrigin(o); err != nil {
			errs = append(errs, fmt.Sprintf("corsOrigin: %v", err))
		}
	}
	if v := p.ForgeTokensARN; v != "" && !secretARN.MatchString(v) {
		errs = append(errs, fmt.Sprintf("forgeTokensSecretArn %q is not a secret's complete ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>)", v))
	}
	if v := p.WebhookSecretARN; v != "" && !secretARN.MatchString(v) {
		errs = append(errs, fmt.Sprintf("webhookSecretArn %q is not a secret's complete ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>)", v))
	}
	if p.WorkerImage == "" && !p.AllowPlaceholders {
		errs = append(errs, "no worker image: `make deploy` builds and pushes one (cmd/pushimage) and passes it as "+
			"-c workerImage=<reference>; or pass a prebuilt image's reference yourself")
	}
	if len(errs) > 0 {
		return fmt.Errorf("infra: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkHTTPS checks how clones are served: through CloudFront (the default) or, with
// cdn=false, from the load balancer, which needs a certificate or an explicit plain HTTP.
func (p Props) checkHTTPS() []string {
	var errs []string
	if p.DomainName != "" && !hostName.MatchString(p.DomainName) {
		errs = append(errs, fmt.Sprintf("domainName %q: a host name only, e.g. git.example.org", p.DomainName))
	}
	certRegion := ""
	if p.CertificateARN != "" {
		m := acmARN.FindStringSubmatch(p.CertificateARN)
		if m == nil {
			errs = append(errs, fmt.Sprintf("certificateArn %q is not an ACM certificate's ARN (arn:aws:acm:<region>:<account>:certificate/<id>)", p.CertificateARN))
		} else {
			certRegion = m[1]
		}
		if p.DomainName == "" {
			errs = append(errs, "certificateArn needs domainName: the name the certificate is for, which clients clone from")
		}
	}
	for _, c := range p.ServeIngress {
		if pfx, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, fmt.Sprintf("serveIngressCidrs: %q is not a network (CIDR, e.g. 192.0.2.0/24)", c))
		} else if !pfx.Addr().Is4() {
			errs = append(errs, fmt.Sprintf("serveIngressCidrs: %q: the load balancer has IPv4 addresses only", c))
		}
	}
	if !p.WithoutCDN {
		if p.DomainName != "" && p.CertificateARN == "" {
			errs = append(errs, "domainName needs certificateArn: CloudFront serves a name of your own only with its certificate "+
				"(ACM, in us-east-1); without both clones go to https://<id>.cloudfront.net")
		}
		if certRegion != "" && certRegion != cloudFrontCertRegion {
			errs = append(errs, fmt.Sprintf("certificateArn is in %s: CloudFront takes certificates from ACM in %s only "+
				"(request or import one there; with cdn=false the load balancer takes one from its own region)", certRegion, cloudFrontCertRegion))
		}
		if p.AllowPlainHTTP {
			errs = append(errs, "allowPlainHttp applies to cdn=false: through CloudFront clones are HTTPS, HTTP redirected")
		}
		if len(p.ServeIngress) > maxServeIngress {
			errs = append(errs, fmt.Sprintf("serveIngressCidrs: %d networks, at most %d: CloudFront's prefix list takes 55 of a "+
				"security group's 60 rules", len(p.ServeIngress), maxServeIngress))
		}
		return errs
	}
	if len(p.ServeIngress) > 0 {
		errs = append(errs, "serveIngressCidrs applies to the CDN: with cdn=false the load balancer admits anyone")
	}
	if p.CertificateARN == "" && !p.AllowPlainHTTP {
		errs = append(errs, "cdn=false serves clones from the load balancer: give it certificateArn (ACM, the stack's region) and "+
			"domainName for HTTPS, or -c allowPlainHttp=true to serve them over plain HTTP")
	}
	if p.CertificateARN != "" && p.AllowPlainHTTP {
		errs = append(errs, "allowPlainHttp with certificateArn: the load balancer serves HTTPS (HTTP redirected); leave one out")
	}
	if certRegion != "" && p.Env != nil && p.Env.Region != nil && !strings.HasPrefix(*p.Env.Region, "${") && certRegion != *p.Env.Region {
		errs = append(errs, fmt.Sprintf("certificateArn is in %s, the stack in %s: a load balancer takes certificates from its own region",
			certRegion, *p.Env.Region))
	}
	return errs
}

// PropsFromContext reads the props from CDK context (cdk.json or -c key=value).
func PropsFromContext(node constructs.Node) (Props, error) {
	c := ctx{node: node}
	var p Props
	p.Fleet = c.str("fleet")
	p.WorkerCount = c.int("workerCount")
	p.MaxWorkers = c.int("maxWorkers")
	p.WorkerCPU = c.int("workerCpu")
	p.WorkerMemory = c.int("workerMemory")
	p.Fetchers = c.int("fetchers")
	p.WithoutFallback = !c.bool("onDemandFallback", true)
	p.MinLive = c.int("minLiveWorkers")
	p.Grace = c.duration("grace")
	p.MaintainEvery = c.duration("maintainEvery")
	p.ScrubEvery = c.duration("scrubEvery")
	p.ScrubAll = c.bool("scrubAll", false)
	if w := c.str("warmup"); w == "none" {
		p.NoWarmup = true
	} else if p.Warmup = c.duration("warmup"); w != "" && p.Warmup == 0 {
		p.NoWarmup = true // "0", "0s"
	}
	p.StaleAfter = c.duration("staleAfter")
	if v := c.str("pollsPerDay"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 288 {
			c.fail("pollsPerDay", v, "not a number of polls a day between 0 and 288")
		}
		p.PollsPerDay = f
	}
	p.CoordinatorConcurrency = c.int("coordinatorConcurrency")
	if c.str("coordinatorConcurrency") == "none" {
		p.CoordinatorConcurrency = -1
	}
	p.List = deployenv.List{Repo: c.str("listRepo"), Branch: c.str("listBranch"), Interval: c.duration("listInterval")}
	if v := c.str("listPath"); v != "" {
		p.List.Paths = strings.Split(v, ",")
	}
	if v := c.str("listPurgeThreshold"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			c.fail("listPurgeThreshold", v, "not a percentage")
		}
		p.List.PurgeThreshold = &f
	}
	p.VpcID = c.str("vpcId")
	p.PrivateNetwork = c.bool("privateNetwork", false)
	p.PublicReads = c.bool("publicReads", false)
	if v := c.str("caseInsensitiveHosts"); v != "" {
		for _, h := range strings.Split(v, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				if strings.ContainsAny(h, "/: ") {
					c.fail("caseInsensitiveHosts", h, "a host name, no scheme, port or path")
				}
				p.CaseInsensitiveHosts = append(p.CaseInsensitiveHosts, h)
			}
		}
	}
	if v := c.str("corsOrigin"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				p.CORSOrigins = append(p.CORSOrigins, o)
			}
		}
	}
	p.SiteAbbr, p.SiteName = c.str("siteAbbr"), c.str("siteName")
	p.WithoutWebhooks = !c.bool("webhooks", true)
	p.WebhookSecretARN = c.str("webhookSecretArn")
	if v := c.str("feeds"); v != "" {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				p.Feeds = append(p.Feeds, f)
			}
		}
	}
	p.FeedEvery = c.duration("feedEvery")
	p.ForgeTokensARN = c.str("forgeTokensSecretArn")
	p.AlarmEmail = c.str("alarmEmail")
	if p.AlarmEmail == "none" {
		p.AlarmEmail, p.NoAlarmEmail = "", true
	}
	p.DiskQuota = c.str("diskQuota")
	if v := c.str("storageBudgetGiB"); v == "none" {
		p.NoStorageAlarm = true
	} else if p.StorageBudgetGiB = c.int("storageBudgetGiB"); v != "" && p.StorageBudgetGiB <= 0 {
		c.fail("storageBudgetGiB", v, "a number of GiB above 0, or none (no storage alarm)")
	}
	p.HookRate = c.int("hookRate")
	p.HookBurst = c.int("hookBurst")
	for _, k := range []string{"hookRate", "hookBurst"} {
		if v := c.str(k); v != "" && c.int(k) <= 0 {
			c.fail(k, v, "a number of requests above 0")
		}
	}
	p.DeletionGuard = c.bool("deletionProtection", true)
	p.ExistingTable = c.str("tableName")
	p.ExistingFileSystem = c.str("fileSystemId")
	p.WithoutServing = !c.bool("serving", true)
	p.ServeSeparate = c.bool("serveSeparate", false)
	p.ServeCPU = c.int("serveCpu")
	p.ServeMemory = c.int("serveMemory")
	p.ServeMin = c.int("serveMin")
	p.ServeMax = c.int("serveMax")
	p.ServeOnDemand = c.int("serveOnDemand")
	p.PackCacheBytes = c.str("packCacheBytes")
	p.WithoutCDN = !c.bool("cdn", true)
	p.AllowPlainHTTP = c.bool("allowPlainHttp", false)
	p.CertificateARN = c.str("certificateArn")
	p.DomainName = c.str("domainName")
	if old := c.str("serveDomain"); old != "" { // its name before the CDN
		if p.DomainName != "" && p.DomainName != old {
			c.fail("serveDomain", old, "is the older name of domainName, which says "+p.DomainName+": give one")
		}
		p.DomainName = old
	}
	if v := c.str("serveIngressCidrs"); v != "" {
		for _, cidr := range strings.Split(v, ",") {
			if cidr = strings.TrimSpace(cidr); cidr != "" {
				p.ServeIngress = append(p.ServeIngress, cidr)
			}
		}
	}
	p.ServeAccessLogs = c.bool("serveAccessLogs", false)
	p.WorkerImage = c.str("workerImage")
	p.AllowPlaceholders = c.bool("allowPlaceholders", false)
	if len(c.errs) > 0 {
		return p, fmt.Errorf("infra: context: %s", strings.Join(c.errs, "; "))
	}
	return p, nil
}

// ctx reads typed CDK context values and collects every malformed one.
type ctx struct {
	node constructs.Node
	errs []string
}

func (c *ctx) fail(key, v, why string) {
	c.errs = append(c.errs, fmt.Sprintf("%s=%q: %s", key, v, why))
}

func (c *ctx) str(key string) string {
	v := c.node.TryGetContext(jsii.String(key))
	if v == nil {
		return ""
	}
	return strings.TrimSpace(fmt.Sprint(v))
}

func (c *ctx) int(key string) int {
	s := c.str(key)
	if s == "" || s == "none" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int(f)) {
		c.fail(key, s, "not a whole number")
		return 0
	}
	return int(f)
}

func (c *ctx) bool(key string, def bool) bool {
	s := c.str(key)
	if s == "" {
		return def
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		c.fail(key, s, "not true or false")
		return def
	}
	return b
}

func (c *ctx) duration(key string) time.Duration {
	s := c.str(key)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		c.fail(key, s, "not a duration (e.g. 90s, 10m, 2h)")
	}
	return d
}

func findRepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("infra: no go.mod above " + dir)
		}
	}
}
