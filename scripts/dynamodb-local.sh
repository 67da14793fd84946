#!/usr/bin/env bash
# Start or stop DynamoDB Local for the DynamoDB tier of the tests (shared/store/dynamo).
#
#   scripts/dynamodb-local.sh start   install (once) and start it in memory on a free port;
#                                     write its endpoint to $STATE/endpoint
#   scripts/dynamodb-local.sh stop    stop the instance started from $STATE
#
# DynamoDB Local comes from the npm package amplify-dynamodb-simulator, which ships
# DynamoDBLocal.jar; it is unpacked into .cache/dynamodb-local (git-ignored). Only the
# package's own tarball is fetched (npm pack), not its JavaScript dependencies, which
# the jar does not need. Without java (or npm), start says so and exits 0 without an
# endpoint: the tests of that tier then skip.
#
# STATE defaults to .cache/dynamodb-local/run; set DYNAMODB_LOCAL_STATE to run several
# instances side by side (scripts/with-dynamodb-local.sh does).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="$root/.cache/dynamodb-local"
pkg="amplify-dynamodb-simulator@2.9.30" # ships DynamoDB Local 1.25.1
state="${DYNAMODB_LOCAL_STATE:-$cache/run}"

log() { echo "dynamodb-local: $*" >&2; }
# shellcheck source=scripts/service-lib.sh
. "$root/scripts/service-lib.sh"

install() {
	local jar
	jar=$(find "$cache/pkg" -name DynamoDBLocal.jar -print -quit 2>/dev/null || true)
	if [[ -n "$jar" ]]; then
		echo "$jar"
		return
	fi
	if ! command -v npm >/dev/null; then
		return 1
	fi
	log "installing $pkg into $cache"
	local tmp
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>"$tmp/npm.log") || {
		cat "$tmp/npm.log" >&2
		rm -rf "$tmp"
		log "npm pack $pkg failed"
		exit 1
	}
	rm -rf "$cache/pkg"
	mkdir -p "$cache/pkg"
	tar -xzf "$tmp"/*.tgz -C "$cache/pkg" --strip-components=1
	rm -rf "$tmp"
	find "$cache/pkg" -name DynamoDBLocal.jar -print -quit
}

answers() { # DynamoDB Local answers ListTables on $1
	curl -sf -m 2 -X POST "$1" \
		-H 'Content-Type: application/x-amz-json-1.0' \
		-H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
		-H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20250101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
		-d '{}' 2>/dev/null | grep -q TableNames
}

start() {
	mkdir -p "$state"
	rm -f "$state/endpoint"
	if [[ -s "$state/pid" ]] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
		stop
	fi
	if ! command -v java >/dev/null; then
		echo "java not found: the DynamoDB Local tier will be skipped"
		exit 0
	fi
	local jar
	if ! jar=$(install) || [[ -z "$jar" ]]; then
		echo "npm not found (or the package has no DynamoDBLocal.jar): the DynamoDB Local tier will be skipped"
		exit 0
	fi
	local dir port endpoint pid
	dir=$(dirname "$jar")
	port=$(free_port)
	endpoint="http://127.0.0.1:$port"
	(cd "$dir" && exec nohup java -Xmx1g -Djava.library.path="$dir/DynamoDBLocal_lib" \
		-jar DynamoDBLocal.jar -inMemory -port "$port" >"$state/log" 2>&1) &
	pid=$!
	echo "$pid" >"$state/pid"
	for _ in $(seq 120); do
		if answers "$endpoint"; then
			echo "$endpoint" >"$state/endpoint"
			log "DynamoDB Local (pid $pid) at $endpoint"
			return
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		sleep 0.5
	done
	log "DynamoDB Local did not answer on $endpoint; its log:"
	cat "$state/log" >&2 || true
	stop
	exit 1
}

stop() { stop_service; }

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
