# Helpers for the scripts that start and stop a local service for the tests
# (dynamodb-local.sh, moto-server.sh); sourced, not run. Each script keeps its state in
# $state (pid, endpoint, log) and defines log().

# free_port prints a loopback port nothing listens on now (the service must still cope
# with losing it before it binds).
free_port() {
	local port
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	log "no free port found"
	exit 1
}

# stop_service stops the process whose pid is in $state/pid: SIGTERM, then SIGKILL
# after 10 s. It forgets the endpoint too.
stop_service() {
	local pid
	if [[ ! -s "$state/pid" ]]; then
		rm -f "$state/endpoint"
		return
	fi
	pid=$(cat "$state/pid")
	if kill "$pid" 2>/dev/null; then
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$state/pid" "$state/endpoint"
}
