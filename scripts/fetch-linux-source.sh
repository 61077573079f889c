#!/usr/bin/env bash
# Fetches the kernel's own deferred-unwind code for kupstream (the C harness
# that compiles kernel/unwind/deferred.c and user.c against unwindlab's shim)
# from Debian's linux-source-7.x package, and extracts only the files it
# needs into a cache. The project contains no kernel code: only this script.
#
#   $CACHE/debs/PKG_VERSION_all.deb         the package, kept (re-extracting never downloads)
#   $CACHE/debs/PKG_VERSION_all.deb.source  "PKG VERSION SUITE" of that archive
#   $CACHE/apt/                             the private apt configuration, lists and caches
#   $CACHE/linux-source-VERSION/            the tree, with the kernel's own relative paths
#   $CACHE/linux-source-VERSION/.unwindlab-source
#                                           "PKG VERSION SUITE", written last
#   $CACHE/current -> linux-source-VERSION  the tree kupstream uses
#   $CACHE/pin-gone                         "PKG VERSION" of a pin the archive no longer has
#   $CACHE/.lock                            one run at a time (flock)
#
# VERSION in a directory name has ~ made _ (no Debian version contains _) and
# : made %3a (as apt names archives). A tree holds kernel/unwind/*,
# include/linux/unwind_{deferred,deferred_types,user,user_types}.h,
# include/asm-generic/unwind_user.h and arch/x86/include/asm/unwind_user.h for
# the harness, and include/uapi/linux/perf_event.h, tools/perf/util/session.c,
# kernel/events/callchain.c and kernel/events/core.c for reference (perf.data
# writing). kernel/unwind/deferred.c and user.c must be there; a missing
# other file is named and left out. A tree is written to a temporary
# directory and renamed when complete, and `current` is replaced atomically,
# so an interrupted run never leaves a tree that looks complete.
#
# The package is pinned (below; UNWINDLAB_LINUX_PACKAGE and
# UNWINDLAB_LINUX_VERSION override). When the archive no longer has the pin,
# the newest linux-source-7.* it has is used, and one line says so.
#
# apt is used with a private configuration only, under $CACHE/apt (see
# scripts/lib-private-apt.sh, shared with fetch-linux-perf.sh): its own
# sources (trixie-backports and sid, signed by debian-archive-keyring),
# lists, status and caches; from the host's configuration only the settings
# for reaching the archive. Nothing under /etc/apt or /var/lib/apt is read
# for packages or written, and no step needs root.
#
# CACHE is $UNWINDLAB_LINUX_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/unwindlab/linux.
# Idempotent and quick when cached: apt is asked for nothing while `current`
# is the pin's tree (or, the pin being gone, any complete tree), or the pin's
# tree or archive is in the cache. The private lists are updated only when
# they are missing or lack the pin (their age is no reason: what is cached
# is used); --refresh updates them and chooses again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prog=fetch-linux-source
default_package=linux-source-7.3
default_version=7.3.4-1~bpo13+1
suites=(trixie-backports sid)

package=${UNWINDLAB_LINUX_PACKAGE:-$default_package}
version=${UNWINDLAB_LINUX_VERSION:-$default_version}
cache=${UNWINDLAB_LINUX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/linux}
apt=$cache/apt
# Relative to the tree's root; one tar pattern each.
files=(
  'kernel/unwind/*'
  include/linux/unwind_deferred.h
  include/linux/unwind_deferred_types.h
  include/linux/unwind_user.h
  include/linux/unwind_user_types.h
  include/asm-generic/unwind_user.h
  arch/x86/include/asm/unwind_user.h
  include/uapi/linux/perf_event.h
  tools/perf/util/session.c
  kernel/events/callchain.c
  kernel/events/core.c
)
required=(kernel/unwind/deferred.c kernel/unwind/user.c)

refresh=false
case ${1:-} in
  '') ;;
  --refresh) refresh=true ;;
  *)
    echo "usage: $0 [--refresh]" >&2
    exit 1
    ;;
esac

die() {
  echo "fetch-linux-source: $*" >&2
  exit 1
}
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

safe_version() {
  local v=${1//\~/_}
  printf '%s' "${v//:/%3a}"
}
tree_name() { printf 'linux-source-%s' "$(safe_version "$1")"; }
deb_path() { printf '%s/debs/%s_%s_all.deb' "$cache" "$1" "${2//:/%3a}"; }
# The "PKG VERSION SUITE" line of a complete tree, or nothing.
source_of() { cat "$1/.unwindlab-source" 2>/dev/null || true; }
# True if the line names PKG VERSION.
is_pin() { [ "$(cut -d' ' -f1-2 <<< "$1")" = "$2 $3" ]; }

# Makes $cache/current lead to the tree named $1, atomically.
point_current() {
  local link=$cache/.current.$$
  cleanup+=("$link")
  ln -sfn "$1" "$link"
  mv -Tf "$link" "$cache/current"
}

# Ends the run if the cache answers without apt: `current` is the pin's tree,
# or the pin is gone and `current` is a complete tree, or the pin's tree is
# there (then `current` is pointed at it).
cached() {
  local line name
  line=$(source_of "$cache/current")
  if [ -n "$line" ] && is_pin "$line" "$package" "$version"; then
    echo "fetch-linux-source: cached in $(readlink -f "$cache/current") ($package $version)"
    exit 0
  fi
  if [ -n "$line" ] && [ "$(cat "$cache/pin-gone" 2>/dev/null)" = "$package $version" ]; then
    echo "fetch-linux-source: cached in $(readlink -f "$cache/current") ($(cut -d' ' -f1-2 <<< "$line"); the pin $package $version is gone from the archive, --refresh to look again)"
    exit 0
  fi
  name=$(tree_name "$version")
  line=$(source_of "$cache/$name")
  if [ -n "$line" ] && is_pin "$line" "$package" "$version"; then
    point_current "$name"
    echo "fetch-linux-source: cached in $cache/$name ($package $version)"
    exit 0
  fi
}

$refresh || cached

mkdir -p "$cache/debs"
# One run at a time per cache (two worktrees running `make deps`); the other
# one may have done the work meanwhile.
exec 9> "$cache/.lock"
if ! flock -n 9; then
  echo "fetch-linux-source: waiting for another fetch-linux-source on $cache"
  flock 9
  $refresh || cached
fi

# --- apt, privately ---------------------------------------------------------

# setup_apt, apt_do, update, versions (needs prog, apt, suites and die).
# shellcheck source=scripts/lib-private-apt.sh
. "$here/lib-private-apt.sh"

# Sets chosen to "PKG VERSION SUITE" of the pin, or nothing.
find_pin() {
  chosen=$(versions "$package" | awk -v v="$version" '$2 == v { print; exit }')
}

# Sets chosen to "PKG VERSION SUITE" of the newest linux-source-7.*.
find_newest() {
  local names line best=""
  mapfile -t names < <(apt_do apt-cache search --names-only '^linux-source-7\.' 2>/dev/null |
    awk '$1 ~ /^linux-source-7\.[0-9]+$/ { print $1 }')
  [ ${#names[@]} -ne 0 ] || die "the Debian archive (${suites[*]}) has no linux-source-7.* package (apt-cache search in $apt)"
  while read -r line; do
    if [ -z "$best" ] || dpkg --compare-versions "$(cut -d' ' -f2 <<< "$line")" gt "$(cut -d' ' -f2 <<< "$best")"; then
      best=$line
    fi
  done < <(versions "${names[@]}")
  [ -n "$best" ] || die "the Debian archive (${suites[*]}) has no version of ${names[*]}"
  chosen=$best
}

# Sets chosen to "PKG VERSION SUITE": the pin, else the newest linux-source-7.*.
choose() {
  setup_apt
  updated=false
  if $refresh; then
    update "--refresh"
  elif [ ! -e "$apt/updated" ]; then
    update "none yet"
  fi
  find_pin
  if [ -z "$chosen" ] && ! $updated; then
    update "no $package $version in them"
    find_pin
  fi
  if [ -n "$chosen" ]; then
    rm -f "$cache/pin-gone"
  else
    find_newest
    echo "fetch-linux-source: the pin $package $version is gone from the archive; using $(cut -d' ' -f1-2 <<< "$chosen") ($(cut -d' ' -f3 <<< "$chosen"))"
    echo "$package $version" > "$cache/pin-gone"
  fi
}

# The pin's archive, kept from an earlier run, needs no apt.
chosen=$(cat "$(deb_path "$package" "$version").source" 2>/dev/null || true)
if $refresh || ! [ -s "$(deb_path "$package" "$version")" ] || ! is_pin "$chosen" "$package" "$version"; then
  choose
fi
read -r pkg ver suite <<< "$chosen"
name=$(tree_name "$ver")
tree=$cache/$name

# The chosen tree may be there already (--refresh, or a fallback seen before).
if is_pin "$(source_of "$tree")" "$pkg" "$ver"; then
  point_current "$name"
  echo "fetch-linux-source: cached in $tree ($pkg $ver)"
  exit 0
fi

# --- the archive --------------------------------------------------------------

deb=$(deb_path "$pkg" "$ver")
downloaded=""
if [ ! -s "$deb" ]; then
  size=$(apt_do apt-cache show "$pkg=$ver" 2>/dev/null | awk '/^Size: / { printf "%.0f MB", $2 / 1e6; exit }')
  echo "fetch-linux-source: downloading $pkg $ver from $suite (${size:-size unknown})"
  start=$SECONDS
  dl=$(mktemp -d "$cache/debs/.download.XXXXXX")
  cleanup+=("$dl")
  if ! err=$(cd "$dl" && apt_do apt-get download -qq "$pkg=$ver" 2>&1); then
    die "apt-get download $pkg=$ver failed (no network to the Debian archive?): $(grep -m1 '^E:' <<< "$err" || head -n1 <<< "$err")"
  fi
  got=$(find "$dl" -maxdepth 1 -name '*.deb' -print -quit)
  [ -n "$got" ] || die "apt-get download $pkg=$ver fetched no .deb: $err"
  mv "$got" "$deb"
  downloaded=", downloaded in $((SECONDS - start)) s"
fi
echo "$chosen" > "$deb.source"

# --- the tree -----------------------------------------------------------------

# The tarball is ./usr/src/PKG.tar.xz, its top directory PKG/. One pass:
# the .deb's data, the tarball out of it, xz, and only the wanted members.
echo "fetch-linux-source: extracting from $deb"
start=$SECONDS
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
cleanup+=("$tmp")
mkdir "$tmp/tree" "$tmp/err"
patterns=()
for f in "${files[@]}"; do patterns+=("$pkg/$f"); done
set +e
dpkg-deb --fsys-tarfile "$deb" 2> "$tmp/err/dpkg-deb" |
  tar -xOf - "./usr/src/$pkg.tar.xz" 2> "$tmp/err/tar" |
  xz -dc 2> "$tmp/err/xz" |
  tar -x -C "$tmp/tree" --no-same-owner --strip-components=1 --wildcards "${patterns[@]}" 2> "$tmp/err/tar-xz"
status=("${PIPESTATUS[@]}")
set -e
# A member not found is expected of an optional file and checked below.
grep -v -e ': Not found in archive$' -e 'Exiting with failure status due to previous errors$' \
  "$tmp/err/tar-xz" > "$tmp/err/tar-xz.real" || true
grep -q "usr/src/$pkg.tar.xz: Not found in archive" "$tmp/err/tar" &&
  die "$deb has no ./usr/src/$pkg.tar.xz (dpkg-deb -c $deb)"
stages=(dpkg-deb tar xz tar-xz)
for i in 0 1 2 3; do
  [ "${status[$i]}" -ne 0 ] || continue
  e=$tmp/err/${stages[$i]}
  [ "$i" -ne 3 ] || e=$e.real
  # A stage killed by a broken pipe only shows that a later one failed.
  if [ "${status[$i]}" -eq 141 ] || [ ! -s "$e" ] || grep -q 'Broken pipe' "$e"; then continue; fi
  [ "$i" -ne 0 ] || die "$deb is damaged (remove it to download it again): $(head -n1 "$e")"
  die "extracting $deb failed: ${stages[$i]%-xz}: $(head -n1 "$e")"
done
for f in "${required[@]}"; do
  [ -f "$tmp/tree/$f" ] || die "$pkg $ver has no $f (the deferred-unwind code is in Linux 6.17 and later)"
done
missing=()
for f in "${files[@]}"; do
  # shellcheck disable=SC2086 # the one pattern, kernel/unwind/*, is globbed on purpose
  [ -e "$(printf '%s\n' "$tmp"/tree/$f | head -n1)" ] || missing+=("$f")
done
[ ${#missing[@]} -eq 0 ] || echo "fetch-linux-source: note: $pkg $ver has no ${missing[*]}; left out"
echo "$chosen" > "$tmp/tree/.unwindlab-source"
rm -rf "$tree"
mv -T "$tmp/tree" "$tree"
point_current "$name"
count=$(find "$tree" -type f ! -name .unwindlab-source | wc -l)
echo "fetch-linux-source: $pkg $ver ($suite) in $tree ($count files$downloaded, extracted in $((SECONDS - start)) s)"
