#!/bin/sh
# Installs, with apt and only when missing, what the systemd test bed
# (e2e/systemdbed) needs on the host: debootstrap to build its Debian
# rootfs, systemd-container for systemd-nspawn.
# Fast and silent when all is present.
set -eu

pkgs="debootstrap systemd-container"

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "systemdbed: dpkg-query not found: the systemd test bed installs with apt (Debian/Ubuntu)" >&2
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
	echo "systemdbed: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "systemdbed: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# shellcheck disable=SC2086 # word splitting of the package list is intended
apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $missing >&2
