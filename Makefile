# mirrorfleet — keep large collections of git mirrors fresh.
SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Node 20 is past its end of life for jsii; this silences that banner for major version 20.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: all run install test vet unit fuzz infra cfnspec synth smoke deploy destroy bench microbench build localstack-test fmt clean

all: test

## run: the local fleet (coordinator, workers, API) on the embedded store; flags in
## ARGS (make run ARGS="--workers 5 --allow-private-hosts"). The binary is built, then
## run in make's place (exec): a SIGTERM or Ctrl-C reaches the fleet itself, which stops
## cleanly and frees its port and store (go run would leave it running).
BIN ?= build/host/mirrorfleet
# The version `mirrorfleet version` prints; the commit comes from Go's VCS stamping.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_FLAG := -X github.com/mirrorfleet/mirrorfleet/shared/buildinfo.version=$(VERSION) -X github.com/mirrorfleet/mirrorfleet/shared/buildinfo.commit=$(COMMIT)
run:
	$(GO) build -ldflags='$(VERSION_FLAG)' -o $(BIN) ./cmd/mirrorfleet
	exec $(BIN) run $(ARGS)

## install: the mirrorfleet binary into $GOBIN (go env GOBIN), else ~/.local/bin; says
## where it went and whether that directory is on PATH
install:
	$(GO) build -ldflags='$(VERSION_FLAG)' -o $(BIN) ./cmd/mirrorfleet
	@dest="$${GOBIN:-$$($(GO) env GOBIN)}"; dest="$${dest:-$$HOME/.local/bin}"; \
	mkdir -p "$$dest" && install -m 0755 $(BIN) "$$dest/mirrorfleet" && echo "installed $$dest/mirrorfleet" && \
	case ":$$PATH:" in *":$$dest:"*) echo "run it as: mirrorfleet";; \
	  *) echo "$$dest is not on your PATH; add it: export PATH=\"$$dest:\$$PATH\"";; esac

## test: every test tier this machine can run
test: vet unit fuzz infra synth localstack-test

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./localstack/

# The CDK app is tested without -race: the race build of the CDK bindings alone takes
# minutes, and jsii's own code is not what the race detector is for here.
# The status page's browser tests need Chromium and the file-call tests strace:
# scripts/need.sh installs them where it can, and with MIRRORFLEET_CHROMIUM and
# MIRRORFLEET_STRACE set those tests fail rather than skip without them.
unit:
	MIRRORFLEET_CHROMIUM=$${MIRRORFLEET_CHROMIUM:-$$(bash scripts/need.sh chromium chromium chromium-browser google-chrome)} \
	MIRRORFLEET_STRACE=$${MIRRORFLEET_STRACE:-$$(bash scripts/need.sh strace strace)} \
		bash scripts/with-dynamodb-local.sh $(GO) test -race -timeout 12m $$($(GO) list ./... | grep -v /infra)

# A short run of the fuzz targets, each against its real counterpart (the clone
# detector against git upload-pack; ~10 s here). A count, not a duration: Go 1.26's
# fuzzing can fail a run at a -fuzztime deadline with no failing input (go.dev/issue/75804).
fuzz:
	$(GO) test ./shared/serve -run '^$$' -fuzz '^FuzzCloneDetector$$' -fuzztime 20000x

# The infra tests check the synthesized templates against CloudFormation's resource
# specification, fetched first (npm, cached in build/cfnspec) at the version the CDK
# bindings in go.mod pin.
infra: cfnspec
	$(GO) test -timeout 8m ./infra/...

## cfnspec: the CloudFormation resource specification the CDK bindings were generated from, into build/cfnspec
cfnspec:
	$(GO) run ./infra/cfnschema/fetchspec

## synth: the CloudFormation template into cdk.out/ (no AWS account, network or Docker).
## Without build/ and an image it uses placeholders, explicitly: such a template is for
## reading and testing, not for deploying.
synth:
	cd infra && CDK_OUTDIR=../cdk.out CDK_CONTEXT_JSON='{"allowPlaceholders":"true","alarmEmail":"none"}' $(GO) run .
	@ls cdk.out/*.template.json

## deploy / destroy: through the CDK CLI from npm (AWS credentials; no Docker). deploy
## builds the Lambdas and the binary, builds and pushes the image to ECR (cmd/pushimage)
## and deploys with it; set WORKER_IMAGE=<reference> to deploy a prebuilt image instead.
## ALARM_EMAIL=<address> (or none) is required unless cdk.json names one.
deploy: build
	@if [ -z "$(WORKER_IMAGE)" ]; then \
	  $(GO) run ./cmd/pushimage -binary build/mirrorfleet -out build/image.ref -revision "$$(git rev-parse HEAD 2>/dev/null)"; \
	else echo "$(WORKER_IMAGE)" > build/image.ref; fi
	cd infra && npx --yes aws-cdk@2 deploy --require-approval broadening -c workerImage="$$(cat ../build/image.ref)" \
	  $(if $(ALARM_EMAIL),-c alarmEmail=$(ALARM_EMAIL))

destroy:
	cd infra && npx --yes aws-cdk@2 destroy

## smoke: check a running fleet end to end: add SMOKE_REPO through the API at SMOKE_URL,
## wait until it is ok, clone it through its clone URL, read the serving front's metrics.
## A local fleet: SMOKE_URL=http://127.0.0.1:8080 SMOKE_TOKEN=<token> (or its data
## directory's token file). After `cdk deploy`: SMOKE_URL=<the stack's ApiUrl output>
## SMOKE_AWS=1 (the API takes IAM auth: requests are signed with your AWS credentials).
## `make test` runs the same command against a local fleet (cmd/mirrorfleet TestSmoke).
SMOKE_REPO ?= https://github.com/octocat/Hello-World
smoke:
	@test -n "$(SMOKE_URL)" || { echo "make smoke needs SMOKE_URL=<the fleet's API URL>: http://127.0.0.1:8080 for make run, the stack's ApiUrl output after cdk deploy (with SMOKE_AWS=1)" >&2; exit 2; }
	$(GO) run ./cmd/mirrorfleet smoke --api "$(SMOKE_URL)" --repo "$(SMOKE_REPO)" $(if $(SMOKE_TOKEN),--token "$(SMOKE_TOKEN)") $(if $(SMOKE_AWS),--aws)

## bench: every benchmark, then bench/REPORT.md and its charts from the results (hours on 2 idle cores: freshness's grid over four budgets and five seeds at 10,000 repos, and ticklatency's 1M-repo cells, are most of it)
# Run one after another: the figures include wall times, which a parallel run would distort.
# freshness writes the grid (freshness_seeds.json) and its first seed alone
# (freshness.json, with the worker-side costs) from one run.
# storecost reads maintenance.json and freshness.json (its EFS read figures, change
# rates and each budget's freshness), so both run before it; it counts EFS operations
# under strace.
BENCH_RESULTS := bench/results
bench:
	rm -rf $(BENCH_RESULTS) bench/plots bench/REPORT.md
	$(GO) run ./bench/freshness -out $(BENCH_RESULTS) -name freshness_seeds -first freshness -repos 10000 -seeds 1-5 -budgets 0.25,0.5,1,2
	$(GO) run ./bench/placement -out $(BENCH_RESULTS)
	$(GO) run ./bench/fetchcost -out $(BENCH_RESULTS)
	$(GO) run ./bench/maintenance -out $(BENCH_RESULTS)
	bash scripts/with-dynamodb-local.sh $(GO) run ./bench/storecost -out $(BENCH_RESULTS)
	bash scripts/with-dynamodb-local.sh $(GO) run ./bench/ticklatency -out $(BENCH_RESULTS)
	bash scripts/with-dynamodb-local.sh $(GO) run ./bench/hostile -out $(BENCH_RESULTS)
	$(GO) run ./bench/serve -out $(BENCH_RESULTS)
	$(GO) run ./bench/events -out $(BENCH_RESULTS)
	$(GO) run ./bench/report -results $(BENCH_RESULTS) -out bench

## microbench: the Go micro-benchmarks (ring lookups, queue, mirror, policy) with go test -bench
microbench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./shared/ring/
	$(GO) test -run '^$$' -bench . ./shared/worker/ ./shared/mirror/ ./shared/priority/

## build: Lambda zips (bootstrap) and the mirrorfleet binary (the image's) for linux/arm64, into build/
LAMBDA_FLAGS := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
build:
	@mkdir -p build/coordinator build/api
	$(LAMBDA_FLAGS) $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o build/coordinator/bootstrap ./functions/coordinator
	$(LAMBDA_FLAGS) $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o build/api/bootstrap ./functions/api
	cd build/coordinator && rm -f ../coordinator.zip && zip -q -X ../coordinator.zip bootstrap
	cd build/api && rm -f ../api.zip && zip -q -X ../api.zip bootstrap
	$(LAMBDA_FLAGS) $(GO) build -trimpath -ldflags='-s -w $(VERSION_FLAG)' -o build/mirrorfleet ./cmd/mirrorfleet
	@ls -l build/*.zip build/mirrorfleet

## localstack-test: the integration tier: the real binaries against one AWS emulator (3-5 min) —
## LocalStack with a Docker engine and LOCALSTACK_AUTH_TOKEN, else moto's server (python3's,
## else installed into .cache/moto) with DynamoDB Local; fails, never skips, without one
localstack-test:
	GO=$(GO) bash localstack/run.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf build cdk.out
