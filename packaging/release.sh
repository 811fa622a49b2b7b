#!/bin/sh
# Builds a release of berth (make release):
#
#   sh packaging/release.sh OUTDIR
#
# writes to OUTDIR, for linux/amd64, linux/arm64 and linux/arm (GOARM=7):
#   berth_<version>_linux_<goarch>       static binaries (CGO off, -trimpath)
#   berth_<version>_<debarch>.deb        amd64, arm64, armhf
#   berth-<version>-1.<rpmarch>.rpm      x86_64, aarch64, armv7hl
#   berth_<version>_linux_<goarch>.sbom.cdx.json  CycloneDX SBOM of each binary
#   SHA256SUMS, SHA256SUMS.sig           checksums and their SSH signature
#
# The binaries and packages depend only on the commit: Go stamps the
# module and VCS data (go version -m), -trimpath drops the build paths, and
# SOURCE_DATE_EPOCH (the commit's time) dates every packaged file, so two
# builds of a commit are byte-identical.
#
# Environment:
#   VERSION            the version (default: git describe --tags --always --dirty)
#   RELEASE_ARCHES     the GOARCHes (default: amd64 arm64 arm)
#   BERTH_RELEASE_KEY  the ed25519 private key that signs SHA256SUMS
#                      (ssh-keygen -Y sign, namespace berth-release); without
#                      it SHA256SUMS is left unsigned, and the script says so
#   GO, MAKE           the go and make commands
#
# The man pages and shell completions come from berth itself (make man,
# berth completion bash|zsh|fish), run from the host's binary: a berth that
# cannot produce them fails the release.
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mkdir -p "$1"
out=$(cd "$1" && pwd)
GO=${GO:-go}
MAKE=${MAKE:-make}
arches=${RELEASE_ARCHES:-amd64 arm64 arm}
tag=${VERSION:-$(git describe --tags --always --dirty)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export SOURCE_DATE_EPOCH

die() {
	echo "release: $*" >&2
	exit 1
}

# A Debian or RPM version starts with a digit and has no '-':
# v1.2.3 -> 1.2.3, v1.2.3-4-gabc -> 1.2.3+4+gabc, 57bf386 (no tag yet)
# -> 0.0.0+git57bf386: after v0.0.0, before any later tag.
version=$(printf %s "$tag" | sed -e 's/^v//' -e 's/-/+/g')
case $version in
[0-9]*.*) ;;
*) version="0.0.0+git$version" ;;
esac

work=$(mktemp -d)
stage=""
trap 'rm -rf "$work" ${stage:+"$stage"}' EXIT

# The packaging tools, pinned in their own module (packaging/tools).
"$GO" -C packaging/tools build -o "$top/bin/tools/" \
	github.com/goreleaser/nfpm/v2/cmd/nfpm github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
nfpm=$top/bin/tools/nfpm

rm -f "$out"/berth_* "$out"/berth-* "$out"/SHA256SUMS "$out"/SHA256SUMS.sig

build() { # GOARCH OUTPUT
	CGO_ENABLED=0 GOOS=linux GOARCH=$1 GOARM=7 "$GO" build -trimpath -buildvcs=true \
		-tags grpcnotrace -ldflags "-s -w -X main.version=$tag" -o "$2" ./cmd/berth
}
for a in $arches; do
	echo "release: building linux/$a" >&2
	build "$a" "$out/berth_${version}_linux_$a"
	# Go finds the commit only in a clone: a git worktree's .git is a file,
	# which it does not look for.
	"$GO" version -m "$out/berth_${version}_linux_$a" | grep -q 'vcs.revision=' ||
		die "linux/$a: no VCS data in the binary (go version -m): build from a git clone, not a worktree or an export"
done

# Man pages and completions, from a berth that runs here.
host=$("$GO" env GOHOSTARCH)
hostbin=$out/berth_${version}_linux_$host
if [ ! -f "$hostbin" ]; then
	hostbin=$work/berth
	build "$host" "$hostbin"
fi
# The files nfpm packages besides the repository's are staged in a
# directory of this run's, below the top (nfpm.yaml's @STAGE@).
mkdir -p bin
stage=$(mktemp -d "$top/bin/release-stage.XXXXXX")
mkdir -p "$stage/doc/docs" "$stage/doc/examples/http" "$stage/man"
for sh in bash zsh fish; do
	"$hostbin" completion "$sh" >"$stage/berth.$sh" ||
		die "'berth completion $sh' failed: this berth cannot generate its shell completions, which the packages ship"
	[ -s "$stage/berth.$sh" ] || die "'berth completion $sh' printed nothing"
done
rm -rf bin/man
"$MAKE" --no-print-directory man >&2 || die "'make man' failed: the packages ship berth's man pages"
ls bin/man/*.1 >/dev/null 2>&1 || die "'make man' wrote no bin/man/*.1"
for m in bin/man/*.1; do
	gzip -9n <"$m" >"$stage/man/$(basename "$m").gz"
done

# Documentation, compressed as dh_compress does (over 4 KiB); the
# examples stay as they are, to be copied.
gzip -9n <README.md >"$stage/doc/README.md.gz"
for f in docs/*.md; do
	if [ "$(wc -c <"$f")" -gt 4096 ]; then
		gzip -9n <"$f" >"$stage/doc/docs/$(basename "$f").gz"
	else
		cp "$f" "$stage/doc/docs/"
	fi
done
cp examples/*.yaml examples/README.md "$stage/doc/examples/"
cp examples/http/*.yaml "$stage/doc/examples/http/"
{
	printf 'berth (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Release %s, built from commit\n    %s.\n\n' "$tag" "$(git rev-parse HEAD)"
	printf ' -- berth maintainers <berth@users.noreply.github.com>  %s\n' \
		"$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/doc/changelog.gz"
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
(
	cd "$stage"
	find doc man -type f | LC_ALL=C sort | while read -r f; do
		case $f in
		doc/*) dst=/usr/share/doc/berth/${f#doc/} ;;
		man/*) dst=/usr/share/man/man1/${f#man/} ;;
		esac
		printf '  - {src: @STAGE@/%s, dst: %s, type: doc, packager: rpm, file_info: {mode: 0644}}\n' "$f" "$dst"
	done
) >"$work/rpmdocs.yaml"

for a in $arches; do
	case $a in
	amd64) deb=amd64 rpm=x86_64 ;;
	arm64) deb=arm64 rpm=aarch64 ;;
	arm) deb=armhf rpm=armv7hl ;;
	*) die "no package architecture for GOARCH $a" ;;
	esac
	for p in deb rpm; do
		if [ $p = deb ]; then
			target=$out/berth_${version}_$deb.deb
		else
			target=$out/berth-$version-1.$rpm.rpm
		fi
		cp "$out/berth_${version}_linux_$a" "$stage/berth"
		touch -d "@$SOURCE_DATE_EPOCH" "$stage/berth"
		sed -e "s/@VERSION@/$version/" -e "s/@DEB_ARCH@/$deb/g" -e "s/@RPM_ARCH@/$rpm/g" \
			-e "/@RPM_DOCS@/r $work/rpmdocs.yaml" packaging/nfpm.yaml |
			sed -e "s|@STAGE@|bin/$(basename "$stage")|g" >"$work/nfpm.yaml"
		"$nfpm" package --config "$work/nfpm.yaml" --packager $p --target "$target" >"$work/nfpm.log" 2>&1 ||
			{ cat "$work/nfpm.log" >&2; die "nfpm failed to build $(basename "$target")"; }
		echo "release: $(basename "$target")" >&2
	done
done

# The SBOMs: the modules and versions each binary was built from, read
# from the binary itself (its Go build information), so offline.
for a in $arches; do
	bin=$out/berth_${version}_linux_$a
	"$top/bin/tools/cyclonedx-gomod" bin -json -noserial -notimestamp -version "$tag" \
		-output "$bin.sbom.cdx.json" "$bin" 2>"$work/sbom.log" ||
		{ cat "$work/sbom.log" >&2; die "cyclonedx-gomod failed on $bin"; }
done

cd "$out"
# shellcheck disable=SC2012 # the names are ours, without spaces
ls berth_* berth-* | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
if [ -n "${BERTH_RELEASE_KEY:-}" ]; then
	ssh-keygen -q -Y sign -f "$BERTH_RELEASE_KEY" -n berth-release SHA256SUMS
	# Check the signature with the key's own public half; warn when that is
	# not the key published in the repository, whose users would reject it.
	pub=$(ssh-keygen -y -f "$BERTH_RELEASE_KEY" | cut -d' ' -f1,2)
	printf 'berth-release namespaces="berth-release" %s\n' "$pub" >"$work/signers"
	ssh-keygen -Y verify -f "$work/signers" -I berth-release -n berth-release -s SHA256SUMS.sig <SHA256SUMS >/dev/null ||
		die "the signature of SHA256SUMS does not verify"
	if ! grep -qF "$pub" "$top/packaging/release-allowed-signers"; then
		echo "release: WARNING: SHA256SUMS is signed by a key that is not in packaging/release-allowed-signers" >&2
	fi
else
	cat >&2 <<'MSG'
release: ************************************************************
release: SHA256SUMS IS NOT SIGNED: BERTH_RELEASE_KEY is not set.
release: Set it to the release signing key's path to sign a release.
release: ************************************************************
MSG
fi
echo "release: $version in $out" >&2
