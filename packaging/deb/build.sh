#!/bin/sh
# Builds berth's Debian package with dpkg-deb alone (no debhelper needed):
#
#   sh packaging/deb/build.sh BINARY VERSION OUTDIR
#
# BINARY is a built berth (make build), VERSION its version (git describe),
# OUTDIR where berth_<version>_<arch>.deb is written; its path is printed.
# DEB_ARCH overrides the architecture (default: dpkg --print-architecture),
# DEB_COMPRESSION dpkg-deb's compressor (default xz; tests use none).
set -eu
if [ $# -ne 3 ]; then
	echo "usage: $0 BINARY VERSION OUTDIR" >&2
	exit 2
fi
binary=$1
outdir=$3
top=$(cd "$(dirname "$0")/../.." && pwd)
arch=${DEB_ARCH:-$(dpkg --print-architecture)}

# A Debian version starts with a digit and has no '-' without a revision:
# v1.2.3 -> 1.2.3, v1.2.3-4-gabc -> 1.2.3+4+gabc, abc1234 -> 0.0.0~gitabc1234.
version=$(printf %s "$2" | sed -e 's/^v//' -e 's/-/+/g')
case $version in
[0-9]*) ;;
*) version="0.0.0~git$version" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
install -D -m 0755 "$binary" "$root/usr/bin/berth"
install -D -m 0644 "$top/packaging/systemd/berth.service" "$root/lib/systemd/system/berth.service"
# 0600: the comments suggest putting a bearer token in it.
install -D -m 0600 "$top/packaging/berth.yaml" "$root/etc/berth/berth.yaml"
install -d -m 0755 "$root/etc/kubernetes/manifests"
install -D -m 0644 "$top/README.md" "$root/usr/share/doc/berth/README.md"
# The README links into docs/: the pages go beside it, as in the repository.
install -d -m 0755 "$root/usr/share/doc/berth/docs"
install -m 0644 "$top"/docs/*.md "$root/usr/share/doc/berth/docs/"
install -d -m 0755 "$root/usr/share/doc/berth/examples/http"
for f in "$top"/examples/*.yaml "$top"/examples/README.md; do
	install -m 0644 "$f" "$root/usr/share/doc/berth/examples/"
done
install -m 0644 "$top"/examples/http/*.yaml "$root/usr/share/doc/berth/examples/http/"
size=$(du -sk "$root" | cut -f1)

install -d "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: berth
Version: $version
Architecture: $arch
Maintainer: berth maintainers <berth@users.noreply.github.com>
Installed-Size: $size
Section: admin
Priority: optional
Recommends: containerd, containernetworking-plugins
Homepage: https://github.com/berth-agent/berth
Description: standalone static-pod agent for CRI runtimes
 berth runs the Kubernetes Pod manifests dropped into /etc/kubernetes/manifests
 (or served at a URL) through containerd, without an API server: it keeps them
 as the manifests say, restarts what crashes, stops what is removed, and
 reports to systemd and Prometheus. Stopping berth leaves the pods running.
CONTROL
echo /etc/berth/berth.yaml >"$root/DEBIAN/conffiles"

cat >"$root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
# Enable berth and (re)start it. A restart never touches the pods: the unit
# has KillMode=process and the new berth adopts what runs.
set -e
if [ "$1" = configure ]; then
	# The config may hold a bearer token: an earlier package installed it
	# 0644, and dpkg keeps the mode of a file the admin edited.
	if [ -f /etc/berth/berth.yaml ]; then
		chmod go-rwx /etc/berth/berth.yaml
	fi
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper unmask berth.service >/dev/null || true
		deb-systemd-helper enable berth.service >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		systemctl restart berth.service || echo "berth: start failed; see: journalctl -u berth" >&2
	fi
fi
exit 0
SCRIPT
cat >"$root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
# Stop berth on removal; its pods keep running (stop them by removing their
# manifests first, or with crictl).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop berth.service || true
fi
exit 0
SCRIPT
cat >"$root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
# purge removes berth's configuration and state but stops no pod: the pods
# are the runtime's, and berth is gone. The running pods' directories
# (their emptyDir volumes and /etc/hosts, bind-mounted into them) stay in
# /var/lib/berth/pods, and their logs in /var/log/pods, until the admin
# stops the pods.
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper purge berth.service >/dev/null || true
	fi
	rm -rf /etc/berth /run/berth
	if [ -d /var/lib/berth ]; then
		find /var/lib/berth -mindepth 1 -maxdepth 1 ! -name pods -exec rm -rf {} +
		if [ -n "$(ls -A /var/lib/berth/pods 2>/dev/null)" ]; then
			echo "berth: pods berth started keep running: purge stops none. Their volumes stay in /var/lib/berth/pods and their logs in /var/log/pods; stop them (crictl pods --label io.berth.managed=true; crictl stopp/rmp), then remove those directories." >&2
		else
			rm -rf /var/lib/berth
		fi
	fi
fi
exit 0
SCRIPT
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$outdir"
deb="$outdir/berth_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$root" "$deb" >/dev/null
echo "$deb"
