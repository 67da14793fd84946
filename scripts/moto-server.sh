#!/usr/bin/env bash
# Start or stop moto's server (Python moto, `moto_server`): one endpoint that answers the
# AWS APIs the fleet calls (EventBridge, Scheduler, Secrets Manager, ECR, SQS, ...), for
# the integration tier (localstack/run.sh).
#
#   scripts/moto-server.sh start   start it on a free loopback port; write its endpoint
#                                  to $STATE/endpoint and its version to $STATE/version
#   scripts/moto-server.sh stop    stop the instance started from $STATE
#
# moto is taken from python3 when python3 can import its server (moto[server] installed,
# as on the project's machines); else from a virtual environment in .cache/moto
# (git-ignored), made here with `python3 -m venv` and `pip install 'moto[server]'` when
# it is not there yet. Where none of that works, start fails and says what is missing.
#
# STATE defaults to .cache/moto/run; set MOTO_SERVER_STATE to run several side by side.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="$root/.cache/moto"
venv="$cache/venv"
# The version the tier was written and checked against; a venv installs this one.
pin="5.2.1"
state="${MOTO_SERVER_STATE:-$cache/run}"

log() { echo "moto-server: $*" >&2; }
# shellcheck source=scripts/service-lib.sh
. "$root/scripts/service-lib.sh"

# Whether interpreter $1 has moto and its server's web framework (found, not imported:
# importing moto's server takes seconds).
has_server() {
	"$1" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("moto", "flask", "flask_cors")))' >/dev/null 2>&1
}

# python prints the interpreter that has moto's server, installing it into the venv if
# no interpreter has it.
python() {
	if command -v python3 >/dev/null && has_server python3; then
		command -v python3
		return
	fi
	if [[ -x "$venv/bin/python" ]] && has_server "$venv/bin/python"; then
		echo "$venv/bin/python"
		return
	fi
	if ! command -v python3 >/dev/null; then
		log "python3 not found: cannot run or install moto's server"
		return 1
	fi
	log "python3 cannot import moto's server: installing moto[server]==$pin into $venv"
	rm -rf "$venv"
	mkdir -p "$cache"
	if ! python3 -m venv "$venv" >"$cache/install.log" 2>&1; then
		cat "$cache/install.log" >&2
		log "python3 -m venv failed (on Debian: apt-get install python3-venv)"
		rm -rf "$venv"
		return 1
	fi
	# Bounded: where the package index cannot be reached, pip fails within a minute or so.
	if ! timeout 600 "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 \
		"moto[server]==$pin" >>"$cache/install.log" 2>&1; then
		tail -n 20 "$cache/install.log" >&2
		log "pip install 'moto[server]==$pin' failed (is the Python package index reachable?); log: $cache/install.log"
		rm -rf "$venv"
		return 1
	fi
	echo "$venv/bin/python"
}

answers() { curl -sf -m 2 "$1/moto-api/" >/dev/null 2>&1; }

start() {
	mkdir -p "$state"
	rm -f "$state/endpoint" "$state/version"
	if [[ -s "$state/pid" ]] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
		stop
	fi
	local py
	py=$(python) || exit 1
	local port endpoint pid
	# A port found free can be taken before the server binds it: try a few.
	for _ in 1 2 3; do
		port=$(free_port)
		endpoint="http://127.0.0.1:$port"
		"$py" -m moto.server -H 127.0.0.1 -p "$port" >"$state/log" 2>&1 &
		pid=$!
		echo "$pid" >"$state/pid"
		for _ in $(seq 120); do
			if answers "$endpoint"; then
				echo "$endpoint" >"$state/endpoint"
				"$py" -c 'import moto; print(moto.__version__)' >"$state/version"
				log "moto_server $(cat "$state/version") (pid $pid) at $endpoint"
				return
			fi
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			sleep 0.25
		done
		stop
	done
	log "moto's server did not answer; its log:"
	cat "$state/log" >&2 || true
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
