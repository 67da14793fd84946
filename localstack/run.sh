#!/usr/bin/env bash
# `make localstack-test`: the integration tier (build tag `integration`, ./localstack/)
# against one AWS emulator, started here and stopped afterwards whatever happens.
#
#   - With a Docker engine and LOCALSTACK_AUTH_TOKEN: LocalStack (docker compose), whose
#     one edge endpoint serves every API, DynamoDB included.
#   - Otherwise: moto's server (scripts/moto-server.sh: python3's moto, else one it
#     installs into .cache/moto) for EventBridge, Scheduler, Secrets Manager, SQS and
#     ECR, with DynamoDB Local (scripts/dynamodb-local.sh) for the table: moto's DynamoDB
#     does not make concurrent conditional writes atomic (localstack/README.md).
#
# Where no engine can be had the tier fails, saying how to get one: it never skips. Its
# last line names the engine it ran on.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

state=$(mktemp -d "${TMPDIR:-/tmp}/mirrorfleet-it.XXXXXX")
engine=""
stops=()
cleanup() {
	local rc=$?
	for ((i = ${#stops[@]} - 1; i >= 0; i--)); do eval "${stops[i]}" >/dev/null 2>&1 || true; done
	rm -rf "$state"
	if [[ -n "$engine" ]]; then
		if [[ $rc -eq 0 ]]; then
			echo "localstack-test: passed on $engine"
		else
			echo "localstack-test: FAILED (exit $rc) on $engine"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail_no_engine() {
	cat >&2 <<EOF
localstack-test: FAILED — no AWS emulator could be started here ($1). Either:
  - run a Docker engine and export LOCALSTACK_AUTH_TOKEN (LocalStack), or
  - install moto's server: pip install 'moto[server]' (python3 -m moto.server must work),
    or let this script install it into .cache/moto, which needs python3-venv and the
    Python package index.
EOF
	exit 1
}

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && [[ -n "${LOCALSTACK_AUTH_TOKEN:-}" ]]; then
	project="mirrorfleet-it-$$"
	compose=(docker compose -p "$project" -f localstack/docker-compose.yml)
	stops+=("${compose[*]} down -v")
	"${compose[@]}" up -d --wait || exit 1
	hostport=$("${compose[@]}" port localstack 4566) || exit 1
	export AWS_ENDPOINT_URL="http://127.0.0.1:${hostport##*:}"
	version=$(curl -sf "$AWS_ENDPOINT_URL/_localstack/health" | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p')
	engine="LocalStack ${version:-?} (Docker) at $AWS_ENDPOINT_URL"
else
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		echo "localstack-test: a Docker engine is here but LOCALSTACK_AUTH_TOKEN is not set: using moto's server"
	fi
	export MOTO_SERVER_STATE="$state/moto"
	stops+=("bash scripts/moto-server.sh stop")
	bash scripts/moto-server.sh start || fail_no_engine "moto's server would not start"
	export AWS_ENDPOINT_URL
	AWS_ENDPOINT_URL=$(cat "$MOTO_SERVER_STATE/endpoint")
	engine="moto_server $(cat "$MOTO_SERVER_STATE/version") at $AWS_ENDPOINT_URL"

	export DYNAMODB_LOCAL_STATE="$state/dynamodb"
	stops+=("bash scripts/dynamodb-local.sh stop")
	bash scripts/dynamodb-local.sh start || exit 1
	if [[ ! -s "$DYNAMODB_LOCAL_STATE/endpoint" ]]; then
		echo "localstack-test: FAILED — DynamoDB Local did not start (it needs java and npm; see above)" >&2
		exit 1
	fi
	export AWS_ENDPOINT_URL_DYNAMODB
	AWS_ENDPOINT_URL_DYNAMODB=$(cat "$DYNAMODB_LOCAL_STATE/endpoint")
	engine="$engine (DynamoDB: DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB)"
fi

# Credentials and region every process of the tier shares (DynamoDB Local keeps one
# database per access key and region).
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION
export MIRRORFLEET_IT_ENGINE="$engine"
echo "localstack-test: running on $engine"
$GO test -tags integration -count=1 -timeout 15m -v ./localstack/ "$@" | tee "$state/test.log"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 0 ]] && grep -q -- '--- SKIP' "$state/test.log"; then
	echo "localstack-test: a test of the tier skipped; the tier does not pass with a skip" >&2
	exit 1
fi
exit "$rc"
