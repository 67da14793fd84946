# mirrorfleet — keep large collections of git mirrors fresh.
SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: all run test vet unit bench fmt clean

all: test

## run: the local fleet (coordinator, workers, API) on the embedded store
run:
	$(GO) run ./cmd/mirrorfleet run

## test: every test tier this machine can run
test: vet unit

vet:
	$(GO) vet ./...

unit:
	bash scripts/with-dynamodb-local.sh $(GO) test -race -timeout 12m ./...

## bench: the benchmarks (ring balance and movement, queue, ...)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./shared/ring/
	$(GO) test -run '^$$' -bench . ./shared/worker/ ./shared/mirror/

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf build cdk.out
