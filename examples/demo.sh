#!/bin/sh
# `make demo`: runs berth in the foreground on this directory's manifests,
# against a private containerd test bed (e2e/testbed) in $TESTBED_DIR, with
# every directory of berth's under it. Ctrl-C (or TERM) stops berth and
# takes the bed down, pods included.
#
# Environment: TESTBED_DIR (default .testbed), BERTH (default bin/berth),
# BERTH_LISTEN (default 127.0.0.1:10255), GO (default go); extra arguments
# are passed to `berth run`.
set -eu
cd "$(dirname "$0")/.."
bed=${TESTBED_DIR:-.testbed}
berth=${BERTH:-bin/berth}
listen=${BERTH_LISTEN:-127.0.0.1:10255}
go=${GO:-go}

if [ ! -x "$berth" ]; then
	echo "demo: $berth not found: run make build (or make demo)" >&2
	exit 1
fi
# The testbed CLI is built once: `go run` would leave it to a child that
# a Ctrl-C at the wrong moment could interrupt halfway through a teardown.
mkdir -p "$bed"
$go build -o "$bed/testbed" ./e2e/testbed/cmd/testbed
endpoint=$("$bed/testbed" up -dir "$bed")
state=$(cd "$bed" && pwd)/berth
mkdir -p "$state"
# berth runs only manifests nobody but root can write, in directories
# nobody but root can write, up to / (--manifest-permissions=strict). A
# checkout usually lives under a user's home, so the examples are copied
# into a fresh root-owned 0755 directory under /tmp (root-owned and sticky,
# which is fine above a manifest directory).
manifests=$(mktemp -d /tmp/berth-demo-manifests.XXXXXX)
chmod 0755 "$manifests"
cp examples/*.yaml "$manifests/"
chmod 0644 "$manifests"/*.yaml

pid=
teardown() {
	trap - EXIT INT TERM
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	echo "demo: taking the test bed down" >&2
	rm -rf "$manifests"
	"$bed/testbed" down -dir "$bed"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cat >&2 <<MSG
demo: berth runs the manifests of examples/ (copied to $manifests) on the test bed ($endpoint).
demo: in another shell:
    export BERTH_SOCKET=$state/berth.sock
    bin/berth pods                    # what runs, and why not
    bin/berth logs crashloop -f       # a container's log
    bin/berth describe init-demo      # states, conditions, events
    curl http://127.0.0.1:18080/      # the host-network web server
    curl http://$listen/metrics
demo: Ctrl-C stops berth and takes the bed down.
MSG
"$berth" run \
	--pod-manifest-path "$manifests" \
	--container-runtime-endpoint "$endpoint" \
	--root-dir "$state/root" \
	--pod-logs-dir "$state/logs" \
	--socket "$state/berth.sock" \
	--listen "$listen" \
	"$@" &
pid=$!
# wait returns early when a trapped signal arrives; the trap then exits
# through teardown.
status=0
wait "$pid" || status=$?
pid=
exit "$status"
