#!/bin/sh
# Installs, with apt and only when missing, what the systemd test bed
# (e2e/systemdbed) needs on the host: debootstrap to build its Debian
# rootfs, systemd-container for systemd-nspawn. The apt logic is the test
# bed's. Fast and silent when all is present.
set -eu
exec sh "$(dirname "$0")/../testbed/install.sh" systemdbed debootstrap systemd-container
