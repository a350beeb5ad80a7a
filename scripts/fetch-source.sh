#!/usr/bin/env bash
# Fetch Debian's linux-source-7.3 (pinned, sha256-checked) into a cache
# outside the clone, without touching the machine's apt configuration.
# Prints the path of the verified linux-source tarball on stdout.
set -euo pipefail

VER=${KSRC_DEB_VERSION:-7.3.4-1~bpo13+1}
DEB_SHA=${KSRC_DEB_SHA256:-703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3}
TAR_SHA=${KSRC_TAR_SHA256:-76df1affb19f24926949369be1d74b60071c963c598ce8780bddd4bbf0fc3bc4}
SUITE=${KSRC_SUITE:-"deb http://deb.debian.org/debian trixie-backports main"}
CACHE=${PKVM_CACHE:-$HOME/.cache/pkvm-split}

die() { echo "fetch-source: $*" >&2; exit 1; }

mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/archives/partial" "$CACHE/dl"
deb="$CACHE/dl/linux-source-7.3_${VER//:/%3a}_all.deb"
tarball="$CACHE/dl/linux-source-7.3-$VER.tar.xz"

if [ -f "$tarball" ] && echo "$TAR_SHA  $tarball" | sha256sum -c --status; then
	echo "$tarball"
	exit 0
fi
rm -f "$tarball"

if ! { [ -f "$deb" ] && echo "$DEB_SHA  $deb" | sha256sum -c --status; }; then
	rm -f "$deb"
	command -v apt-get >/dev/null || die "apt-get not found"
	echo "$SUITE" > "$CACHE/apt/sources.list"
	apt_opts=(-o "Dir::Etc::sourcelist=$CACHE/apt/sources.list"
		  -o "Dir::Etc::sourceparts=/dev/null"
		  -o "Dir::State::Lists=$CACHE/apt/lists"
		  -o "Dir::Cache=$CACHE/apt"
		  -o "Debug::NoLocking=1"
		  -o "APT::Sandbox::User=root")
	echo "fetch-source: apt-get update ($SUITE)" >&2
	apt-get "${apt_opts[@]}" update -qq >&2 ||
		die "apt-get update of '$SUITE' failed (no network?)"
	avail=$(apt-cache "${apt_opts[@]}" madison linux-source-7.3 | awk '{print $3}' | tr '\n' ' ')
	case " $avail " in
	*" $VER "*) ;;
	*) die "linux-source-7.3 $VER is no longer on the mirror (available: ${avail:-none}). Set KSRC_DEB_VERSION, KSRC_DEB_SHA256 and KSRC_TAR_SHA256 to pin another version, or place the verified .deb at $deb" ;;
	esac
	(cd "$CACHE/dl" && apt-get "${apt_opts[@]}" download -qq "linux-source-7.3=$VER" >&2) ||
		die "download of linux-source-7.3=$VER failed"
	[ -f "$deb" ] || die "downloaded .deb not found at $deb"
	echo "$DEB_SHA  $deb" | sha256sum -c --status ||
		{ mv "$deb" "$deb.bad"; die "sha256 mismatch for $deb (kept as .bad); expected $DEB_SHA"; }
fi

tmp=$(mktemp -d "$CACHE/dl/x.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg -x "$deb" "$tmp" || die "dpkg -x failed on $deb"
inner="$tmp/usr/src/linux-source-7.3.tar.xz"
[ -f "$inner" ] || die "$deb does not contain usr/src/linux-source-7.3.tar.xz"
echo "$TAR_SHA  $inner" | sha256sum -c --status || die "sha256 mismatch for inner tarball; expected $TAR_SHA"
mv "$inner" "$tarball"
echo "$tarball"
