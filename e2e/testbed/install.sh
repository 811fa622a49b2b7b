#!/bin/sh
# Installs, with apt and only when missing, what the berth test bed runs:
# containerd, runc, the CNI plugins (with the iptables and ip tools they
# call), a static busybox for the test images, and docker-registry plus
# skopeo for the local registry, nginx (the fleet tests' manifest server
# and WebDAV target, started on a loopback port with a private config, see
# nginx.go) and openssh-client (ssh-keygen signs the manifests they serve).
# Fast and silent when all is present.
#
# The packages' own services (a system containerd, a registry on :5000) are
# kept from starting through policy-rc.d while installing; were they
# running anyway, beds use their own sockets and ports and do not mind.
#
# Other test beds install through it: `install.sh LABEL PACKAGE...`
# installs those packages instead, naming LABEL in its messages.
set -eu

pkgs="containerd runc containernetworking-plugins busybox-static docker-registry skopeo iptables iproute2 nginx openssh-client"

label=testbed
if [ $# -gt 0 ]; then
	label=$1
	shift
	pkgs="$*"
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "$label: dpkg-query not found: the test bed installs with apt (Debian/Ubuntu)" >&2
	exit 1
fi
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "$label: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "$label: installing:$missing" >&2
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
	trap 'exit 130' INT TERM
fi
export DEBIAN_FRONTEND=noninteractive
# apt's output goes to stderr: `make -s testbed-up` prints only the endpoint.
apt-get update -q >&2
# shellcheck disable=SC2086 # word splitting of the package list is intended
apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $missing >&2
