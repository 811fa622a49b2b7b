#!/bin/sh
# Checks a release (make release-check) that packaging/release.sh wrote:
#
#   sh packaging/check.sh DIR
#
# - lintian on each .deb: no tag left but those packaging/lintian-overrides
#   explains (shipped in the package, where lintian reads them);
# - rpm -qip and -qlp on each .rpm, rpmlint with packaging/rpmlint.toml
#   (each filter explained there), and an install into a scratch root with
#   rpm --root (files, modes, config files; --noscripts, as the scratch
#   root has no shell for the scriptlets), verified and erased;
# - the arm64 and armhf builds under qemu-user: `berth version`, `berth
#   validate` of the examples, and the unit tests of the manifest decoder
#   and validation, the CRI translation, the state files and the node's
#   resources, cross-compiled with go test -c and run by
#   qemu-aarch64-static and qemu-arm-static.
#
# The tools come from Debian's packages, installed by `make release-check`
# (lintian, rpm, rpmlint, qemu-user-static, binfmt-support).
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "$1" && pwd)
GO=${GO:-go}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() {
	echo "check: $*" >&2
	fail=1
}

found=0
for deb in "$dir"/berth_*.deb; do
	[ -e "$deb" ] || continue
	found=1
	echo "check: lintian $(basename "$deb")" >&2
	# lintian prints nothing for a clean package (but a note that it runs
	# as root); every other line is a finding.
	out=$(lintian --pedantic --display-info --fail-on error,warning,info,pedantic "$deb" 2>&1) || bad "lintian failed on $(basename "$deb")"
	out=$(printf '%s\n' "$out" | grep -v '^running with root privileges' || true)
	[ -z "$out" ] || bad "lintian on $(basename "$deb"):
$out"
done
[ $found = 1 ] || bad "no .deb in $dir"

found=0
for rpm in "$dir"/berth-*.rpm; do
	[ -e "$rpm" ] || continue
	found=1
	name=$(basename "$rpm")
	echo "check: rpm $name" >&2
	for q in -qip -qlp; do
		if ! rpm $q "$rpm" >"$work/q.out" 2>"$work/q.err" || [ -s "$work/q.err" ]; then
			bad "rpm $q $name: $(cat "$work/q.err")"
		fi
	done
	out=$(rpmlint -c "$top/packaging/rpmlint.toml" "$rpm" 2>&1) || bad "rpmlint failed on $name"
	printf '%s\n' "$out" | grep -q ' 0 errors, 0 warnings, 0 badness' ||
		bad "rpmlint on $name: $(printf '%s\n' "$out" | grep ': [EW]: ')"

	root=$work/root
	rm -rf "$root"
	mkdir -p "$root"
	rpm --root "$root" --initdb
	# Debian's rpm warns that it is not the system's package manager.
	rpm --root "$root" -i --nodeps --noscripts --ignorearch "$rpm" 2>"$work/rpm.err" ||
		bad "rpm --root -i $name: $(cat "$work/rpm.err")"
	rpm --root "$root" -V berth || bad "rpm --root -V berth ($name): the installed files differ from the package"
	[ "$(stat -c %a "$root/etc/berth/berth.yaml")" = 600 ] || bad "$name: /etc/berth/berth.yaml is not 0600"
	[ -x "$root/usr/bin/berth" ] || bad "$name: no /usr/bin/berth"
	[ "$(rpm --root "$root" -qc berth | LC_ALL=C sort | tr '\n' ' ')" = "/etc/berth/berth.yaml /etc/default/berth " ] ||
		bad "$name: config files: $(rpm --root "$root" -qc berth | tr '\n' ' ')"
	rpm --root "$root" -e --noscripts berth 2>"$work/rpm.err" || bad "rpm --root -e $name: $(cat "$work/rpm.err")"
	[ ! -e "$root/usr/bin/berth" ] || bad "$name: erase left /usr/bin/berth"
done
[ $found = 1 ] || bad "no .rpm in $dir"

# The maintainer scripts parse (they run only inside a booted machine:
# e2e/systemdbed installs the .deb through apt).
for s in "$top"/packaging/scripts/*; do
	sh -n "$s" || bad "$s does not parse"
done

for a in arm64 arm; do
	case $a in
	arm64) qemu=qemu-aarch64-static ;;
	arm) qemu=qemu-arm-static ;;
	esac
	bin=$(ls "$dir"/berth_*_linux_$a 2>/dev/null || true)
	[ -n "$bin" ] || {
		bad "no linux/$a binary in $dir"
		continue
	}
	echo "check: linux/$a under $qemu" >&2
	v=$("$qemu" "$bin" version --client 2>&1) || bad "berth version on $a: $v"
	case $v in "Client Version: "*) ;; *) bad "berth version on $a printed: $v" ;; esac
	out=$(cd "$top/examples" && "$qemu" "$bin" validate ./*.yaml http/*.yaml 2>&1) || bad "berth validate of the examples on $a:
$out"
	for p in ./internal/podspec/ ./internal/criconfig/ ./internal/statefile/ ./internal/source/laststate/ ./internal/podresources/; do
		t=$work/$a-$(echo "$p" | tr / _).test
		(cd "$top" && CGO_ENABLED=0 GOOS=linux GOARCH=$a GOARM=7 "$GO" test -c -o "$t" "$p") || {
			bad "go test -c $p for $a"
			continue
		}
		# A test binary runs in its package's directory, for its testdata.
		out=$(cd "$top/$p" && "$qemu" "$t" -test.count=1 2>&1) || bad "$p on $a under $qemu:
$out"
		echo "check: $a $p: $(printf '%s\n' "$out" | tail -1)" >&2
	done
done

if [ $fail != 0 ]; then
	echo "check: FAILED" >&2
	exit 1
fi
echo "check: $dir passed" >&2
