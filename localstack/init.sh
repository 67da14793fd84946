#!/usr/bin/env bash
# Creates the fleet's DynamoDB table and Scheduler schedule group in LocalStack. The table
# layout is defined once, in shared/store/dynamo; `mirrorfleet init-aws` applies it.
set -euo pipefail
cd "$(dirname "$0")/.."
export AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}
export AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
go run ./cmd/mirrorfleet init-aws --table "${MIRRORFLEET_TABLE:-mirrorfleet}" --schedule-group "${MIRRORFLEET_SCHEDULE_GROUP:-mirrorfleet}"
