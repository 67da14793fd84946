#!/usr/bin/env bash
# `make localstack-test`: LocalStack up, table and schedule group created, the integration
# suite (build tag `integration`) run against it, LocalStack down. Without a Docker engine
# it says so and exits 0: the tier is skipped, not passed.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "localstack-test: SKIPPED — no Docker engine here (docker info failed); LocalStack needs one"
  exit 0
fi
if [ -z "${LOCALSTACK_AUTH_TOKEN:-}" ]; then
  echo "localstack-test: SKIPPED — LOCALSTACK_AUTH_TOKEN is not set (LocalStack images need it)"
  exit 0
fi
compose=(docker compose -f localstack/docker-compose.yml)
trap '"${compose[@]}" down -v >/dev/null 2>&1' EXIT
"${compose[@]}" up -d --wait || exit 1
export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export MIRRORFLEET_TABLE=mirrorfleet_it MIRRORFLEET_SCHEDULE_GROUP=mirrorfleet
bash localstack/init.sh || exit 1
go test -tags integration -count=1 -v ./localstack/
