#!/usr/bin/env bash
# Fetches Debian's own statically linked programs for the conformance suite
# (tests/conformance.rs), for amd64, arm64 and s390x, from Debian's archive:
# each package in tests/conformance/packages.txt is downloaded with
# `apt-get download PKG:ARCH` and unpacked with `dpkg-deb -x` into one root
# per architecture under the cache:
#
#   $CACHE/debs/PKG_VERSION_ARCH.deb    the archives, kept
#   $CACHE/ARCH/                        the unpacked root the tests use
#   $CACHE/ARCH/.stamps/PKG_VERSION     what that root holds
#   $CACHE/ARCH/bin/APPLET -> busybox   every busybox applet, for PATH
#   $CACHE/manifest.txt                 "ARCH PKG VERSION" lines, written last
#
# CACHE is $UNWINDLAB_DEBIAN_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/unwindlab/debian.
# Idempotent and quick when cached: apt is asked only for the candidate
# versions (no download, no update) unless an architecture or its package
# lists are missing. Adding the foreign architectures and `apt-get update`
# need root (or sudo).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="$here/../tests/conformance/packages.txt"
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
arches=(amd64 arm64 s390x)
mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$list")

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=(sudo); fi
fi
as_root() {
  if [ "$(id -u)" -ne 0 ] && [ ${#sudo[@]} -eq 0 ]; then
    echo "fetch-debian-programs: '$*' needs root (run 'make deps' as root)" >&2
    exit 1
  fi
  "${sudo[@]}" "$@"
}

# The foreign architectures: apt can only download what dpkg knows about.
native=$(dpkg --print-architecture)
need_update=false
for arch in "${arches[@]}"; do
  [ "$arch" = "$native" ] && continue
  if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    echo "fetch-debian-programs: dpkg --add-architecture $arch"
    as_root dpkg --add-architecture "$arch"
    need_update=true
  fi
done

# The candidate versions of every PKG:ARCH, from one apt-cache call (each
# call reads all the package lists: seconds, as this machine keeps no
# pkgcache.bin). Leaves version[PKG:ARCH] set, and missing[] the rest.
declare -A version=()
candidates() {
  local names=() arch pkg
  for arch in "${arches[@]}"; do for pkg in "${pkgs[@]}"; do names+=("$pkg:$arch"); done; done
  version=()
  while read -r pkg arch v; do version[$pkg:$arch]=$v; done < <(
    apt-cache show --no-all-versions "${names[@]}" 2>/dev/null |
      awk '/^Package: /{p=$2} /^Architecture: /{a=$2} /^Version: /{v=$2} /^$/{if(p!="")print p, a, v; p=""} END{if(p!="")print p, a, v}')
  missing=()
  for name in "${names[@]}"; do [ -n "${version[$name]:-}" ] || missing+=("$name"); done
}

# Cached: the manifest names every package for every architecture and each
# root is complete. Then apt is not asked at all (--refresh asks it).
if [ "${1:-}" != --refresh ] && ! $need_update && [ -f "$cache/manifest.txt" ]; then
  ok=true
  for arch in "${arches[@]}"; do
    [ -f "$cache/$arch/.stamps/applets" ] || ok=false
    for pkg in "${pkgs[@]}"; do grep -q "^$arch $pkg " "$cache/manifest.txt" || ok=false; done
  done
  if $ok; then
    echo "fetch-debian-programs: cached in $cache ($(wc -l < "$cache/manifest.txt") package builds; --refresh to look for newer versions)"
    exit 0
  fi
fi

candidates
if [ ${#missing[@]} -ne 0 ] || $need_update; then
  echo "fetch-debian-programs: apt-get update (no candidate for: ${missing[*]:-new architectures})"
  as_root apt-get update -qq
  candidates
  if [ ${#missing[@]} -ne 0 ]; then
    echo "fetch-debian-programs: Debian has no ${missing[*]} (apt-cache show ${missing[0]})" >&2
    exit 1
  fi
fi

mkdir -p "$cache/debs"
fetched=0
for arch in "${arches[@]}"; do
  root="$cache/$arch"
  want=""
  for pkg in "${pkgs[@]}"; do want+="$pkg ${version[$pkg:$arch]}"$'\n'; done
  # The root is rebuilt whole when any version changed, so it never mixes two.
  if [ -f "$root/.stamps/complete" ] && [ "$(cat "$root/.stamps/complete")" = "$want" ]; then
    continue
  fi
  rm -rf "$root"
  mkdir -p "$root/.stamps"
  for pkg in "${pkgs[@]}"; do
    v=${version[$pkg:$arch]}
    deb="$cache/debs/${pkg}_${v//:/%3a}_$arch.deb"
    if [ ! -s "$deb" ]; then
      tmp=$(mktemp -d "$cache/debs/.download.XXXXXX")
      # apt's sandbox user may not write into the cache (root's home): that
      # warning is expected and harmless, so only errors are shown.
      (cd "$tmp" && apt-get download -qq "$pkg:$arch=$v" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
      got=$(ls "$tmp"/*.deb 2>/dev/null | head -n1 || true)
      if [ -z "$got" ]; then
        rm -rf "$tmp"
        echo "fetch-debian-programs: apt-get download $pkg:$arch=$v failed" >&2
        exit 1
      fi
      mv "$got" "$deb"
      rm -rf "$tmp"
      fetched=$((fetched + 1))
    fi
    dpkg-deb -x "$deb" "$root"
    echo "$v" > "$root/.stamps/$pkg"
  done
  # bash-static installs /bin/bash-static; scripts call it bash.
  [ -e "$root/bin/bash-static" ] && ln -sf bash-static "$root/bin/bash"
  printf '%s' "$want" > "$root/.stamps/complete"
done

# Every busybox applet as a link in bin/, so PATH=$root/bin finds the
# same-architecture programs (the host's /bin is amd64 and dynamic). The
# applet list is the native build's: the configuration is the same on every
# architecture.
applets=$("$cache/$native/bin/busybox" --list)
for arch in "${arches[@]}"; do
  root="$cache/$arch"
  [ -f "$root/.stamps/applets" ] && continue
  for applet in $applets; do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  touch "$root/.stamps/applets"
done

manifest=""
for arch in "${arches[@]}"; do
  for pkg in "${pkgs[@]}"; do manifest+="$arch $pkg ${version[$pkg:$arch]}"$'\n'; done
done
if [ ! -f "$cache/manifest.txt" ] || [ "$(cat "$cache/manifest.txt")" != "${manifest%$'\n'}" ]; then
  printf '%s' "$manifest" > "$cache/manifest.txt"
fi
echo "fetch-debian-programs: ${#pkgs[@]} packages for ${#arches[@]} architectures in $cache ($fetched downloaded)"
