#!/usr/bin/env bash
# Run a command with DynamoDB Local up and MIRRORFLEET_DYNAMODB_ENDPOINT exported, and
# stop DynamoDB Local afterwards, whatever happens (used by `make unit`):
#
#   scripts/with-dynamodb-local.sh go test ./...
#
# If MIRRORFLEET_DYNAMODB_ENDPOINT is already set, that endpoint is used and nothing is
# started. If DynamoDB Local cannot run here (no java), the command runs without the
# variable and the DynamoDB Local tier skips.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n "${MIRRORFLEET_DYNAMODB_ENDPOINT:-}" ]]; then
	exec "$@"
fi

DYNAMODB_LOCAL_STATE=$(mktemp -d "${TMPDIR:-/tmp}/dynamodb-local.XXXXXX")
export DYNAMODB_LOCAL_STATE
cleanup() {
	bash "$here/dynamodb-local.sh" stop
	rm -rf "$DYNAMODB_LOCAL_STATE"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$here/dynamodb-local.sh" start || exit
if [[ -s "$DYNAMODB_LOCAL_STATE/endpoint" ]]; then
	MIRRORFLEET_DYNAMODB_ENDPOINT=$(cat "$DYNAMODB_LOCAL_STATE/endpoint")
	export MIRRORFLEET_DYNAMODB_ENDPOINT
fi
"$@"
