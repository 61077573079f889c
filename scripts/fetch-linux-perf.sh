#!/usr/bin/env bash
# Fetches Debian's perf 7.x (package linux-perf) with every package it
# depends on, recursively, into a private root under a cache, and runs it
# from there through the root's own dynamic loader (scripts/perf does):
# nothing is installed on the host. perf 7.x is built for trixie (glibc 2.41,
# libpython3.13, libdw1t64, …), which bookworm's libraries cannot run.
#
#   $CACHE/debs/PKG_VERSION_ARCH.deb        the packages, kept (rebuilding a root never downloads)
#   $CACHE/closure-VERSION.txt              "PKG VERSION ARCH" of every package of that root
#   $CACHE/closure-VERSION.txt.source       "linux-perf VERSION SUITE" it was computed for
#   $CACHE/apt/                             the private apt configuration, lists and caches
#   $CACHE/root-VERSION/                    the root: every package, dpkg-deb -x
#   $CACHE/root-VERSION/unwindlab-perf.env  how to run it, KEY=VALUE lines (below)
#   $CACHE/root-VERSION/unwindlab-perfconfig
#                                           the only perf config perf reads (PERF_CONFIG)
#   $CACHE/root-VERSION/.unwindlab-perf     "linux-perf VERSION SUITE", written last
#   $CACHE/current -> root-VERSION          the root scripts/perf runs
#   $CACHE/buildid/                         perf's build-id cache (buildid.dir)
#   $CACHE/pin-gone                         "linux-perf VERSION" of a pin the archive no longer has
#   $CACHE/.lock                            one run at a time (flock)
#
# VERSION in a name has ~ made _ and : made %3a. The root is laid out as the
# packages ship it; every absolute symlink in it is made relative (so
# lib64/ld-linux-x86-64.so.2 leads to the root's loader, never the host's).
# perf runs as
#
#   env ENV… LOADER --inhibit-cache --library-path LIBRARY_PATH --argv0 perf BINARY ARGS…
#
# with LOADER the root's ld-linux-x86-64.so.2, LIBRARY_PATH the root's
# library directories, and BINARY the root's usr/bin/perf (Debian's 7.x
# packages ship the program there; a usr/bin/perf that is not an ELF file, as
# the shell wrapper of older packages, is passed over for usr/bin/perf_N.M). ld.so
# is told to skip the host's /etc/ld.so.cache, and every library perf needs
# is checked to resolve inside the root (the loader's --list, as ldd). The
# library path is given to the loader, not as LD_LIBRARY_PATH, so the
# programs perf starts (perf record -- PROG) run with the host's libraries.
# ENV is the environment perf gets:
#   PERF_EXEC_PATH   the root's usr/lib/perf-core (perf's scripts and helpers;
#                    compiled in as /usr/lib/perf-core)
#   PERF_CONFIG      the root's unwindlab-perfconfig, which perf then reads
#                    alone: neither /etc/perfconfig nor ~/.perfconfig, so
#                    the user's settings (report.children, …) never change
#                    perf's output; it sets buildid.dir to $CACHE/buildid, so
#                    perf never reads or writes ~/.debug (perf record still
#                    fills that cache unless given --no-buildid-cache)
#   PYTHONHOME       the root's usr, for the embedded Python 3.13 (perf
#                    script -s x.py; the host's Python is another version)
#   MANPATH          the root's man pages first (perf CMD --help runs man)
#   TRACEEVENT_PLUGIN_DIR  libtraceevent's plugins in the root
# unwindlab-perf.env says all of it for the Rust side: PACKAGE, VERSION,
# SUITE, ROOT, LOADER, LIBRARY_PATH, BINARY, then ENV_NAME=VALUE for each
# variable; values are the rest of the line, unquoted (# lines are comments).
#
# The package is pinned (below; UNWINDLAB_PERF_PACKAGE and
# UNWINDLAB_PERF_VERSION override). When the archive no longer has the pin,
# the newest linux-perf 7.* it has is used, and one line says so. The
# closure is what apt would install on an empty system, Recommends left out
# (apt-get install --simulate with an empty private status: apt chooses
# among alternatives and virtual packages), from the package's own suite and
# the one it is built for: trixie-backports with trixie (sid pinned away),
# or sid alone. Everything apt names is extracted, perl and python3 too
# (linux-perf depends on perl:any and python3:any, for its scripts).
#
# apt is used with a private configuration only, under $CACHE/apt (see
# scripts/lib-private-apt.sh, shared with fetch-linux-source.sh): sources
# trixie, trixie-backports and sid, signed by debian-archive-keyring. Nothing
# under /etc/apt or /var/lib/apt is read for packages or written, and no step
# needs root.
#
# CACHE is $UNWINDLAB_PERF_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/unwindlab/perf.
# Idempotent and quick when cached: apt is asked for nothing while `current`
# is the pin's root (or, the pin being gone, any complete root), or the pin's
# closure and all its packages are in the cache; the cached perf is run
# (perf --version) each time all the same. --refresh updates the private
# lists and chooses again. A root is extracted into a temporary directory,
# renamed, and marked complete (.unwindlab-perf) only once its perf has
# answered; `current` is replaced atomically.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prog=fetch-linux-perf
default_package=linux-perf
default_version=7.3.4-1~bpo13+1
suites=(trixie trixie-backports sid)
triplet=x86_64-linux-gnu

package=${UNWINDLAB_PERF_PACKAGE:-$default_package}
version=${UNWINDLAB_PERF_VERSION:-$default_version}
cache=${UNWINDLAB_PERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/perf}
apt=$cache/apt

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
  echo "$prog: $*" >&2
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
root_name() { printf 'root-%s' "$(safe_version "$1")"; }
closure_path() { printf '%s/closure-%s.txt' "$cache" "$(safe_version "$1")"; }
# As apt-get download names it.
deb_path() { printf '%s/debs/%s_%s_%s.deb' "$cache" "$1" "${2//:/%3a}" "$3"; }
# The "PKG VERSION SUITE" line of a complete root, or nothing.
source_of() { cat "$1/.unwindlab-perf" 2>/dev/null || true; }
# True if the line names PKG VERSION.
is_pin() { [ "$(cut -d' ' -f1-2 <<< "$1")" = "$2 $3" ]; }

# Makes $cache/current lead to the root named $1, atomically.
point_current() {
  local link=$cache/.current.$$
  cleanup+=("$link")
  ln -sfn "$1" "$link"
  mv -Tf "$link" "$cache/current"
}

# Reads ROOT/unwindlab-perf.env into env_file[KEY] and perf_env (NAME=VALUE).
declare -A env_file=()
perf_env=()
read_env() {
  local key value
  env_file=()
  perf_env=()
  while IFS='=' read -r key value; do
    case $key in '' | '#'*) continue ;; esac
    env_file[$key]=$value
    case $key in ENV_*) perf_env+=("${key#ENV_}=$value") ;; esac
  done < "$1/unwindlab-perf.env"
}

# Runs the root's perf with the given arguments, as scripts/perf does.
run_perf() {
  env "${perf_env[@]}" "${env_file[LOADER]}" --inhibit-cache --library-path "${env_file[LIBRARY_PATH]}" \
    --argv0 perf "${env_file[BINARY]}" "$@"
}

# Checks that the perf of root $1 starts and is 7.x; sets perf_version to
# its first line. One line names what is wrong otherwise.
check_perf() {
  local root=$1 out missing outside
  read_env "$root"
  [ -x "${env_file[LOADER]}" ] || die "$root has no loader ${env_file[LOADER]} (remove $root and run $0 again)"
  [ -f "${env_file[BINARY]}" ] || die "$root has no ${env_file[BINARY]} (remove $root and run $0 again)"
  # What the loader would load, as ldd says it: every library in the root.
  # (The loader stops at the first library it cannot find, and would take
  # one from the host's /usr/lib when the root lacks it: both are named.)
  if ! out=$("${env_file[LOADER]}" --inhibit-cache --library-path "${env_file[LIBRARY_PATH]}" \
    --list "${env_file[BINARY]}" 2>&1); then
    missing=$(sed -n 's/.*error while loading shared libraries: \([^:]*\):.*/\1/p' <<< "$out" | head -n1)
    [ -z "$missing" ] || die "perf in $root cannot start: no $missing in the root (no package of $(closure_path "${env_file[VERSION]}") has it; remove the root to extract it again)"
    die "perf in $root cannot start: the root's loader says: $(head -n1 <<< "$out")"
  fi
  outside=$(awk -v root="$root/" '$2 == "=>" && index($3, root) != 1 { printf "%s%s => %s", sep, $1, $3; sep = ", " }' <<< "$out")
  [ -z "$outside" ] || die "perf in $root would load libraries from outside the root: $outside (no package of $(closure_path "${env_file[VERSION]}") has them; remove the root to extract it again)"
  if ! out=$(run_perf --version 2>&1 < /dev/null); then
    die "perf in $root does not start: $(head -n1 <<< "$out")"
  fi
  perf_version=$(head -n1 <<< "$out")
  [[ $perf_version == "perf version 7."* ]] || die "perf in $root is not perf 7.x: perf --version printed '$perf_version'"
}

# Ends the run if the cache answers without apt: `current` is the pin's
# root, or the pin is gone and `current` is a complete root, or the pin's
# root is there (then `current` is pointed at it).
cached() {
  local line name
  line=$(source_of "$cache/current")
  if [ -n "$line" ] && is_pin "$line" "$package" "$version"; then
    check_perf "$(readlink -f "$cache/current")"
    echo "$prog: cached in $(readlink -f "$cache/current") ($package $version: $perf_version)"
    exit 0
  fi
  if [ -n "$line" ] && [ "$(cat "$cache/pin-gone" 2>/dev/null)" = "$package $version" ]; then
    check_perf "$(readlink -f "$cache/current")"
    echo "$prog: cached in $(readlink -f "$cache/current") ($(cut -d' ' -f1-2 <<< "$line"): $perf_version; the pin $package $version is gone from the archive, --refresh to look again)"
    exit 0
  fi
  name=$(root_name "$version")
  line=$(source_of "$cache/$name")
  if [ -n "$line" ] && is_pin "$line" "$package" "$version"; then
    check_perf "$cache/$name"
    point_current "$name"
    echo "$prog: cached in $cache/$name ($package $version: $perf_version)"
    exit 0
  fi
}

$refresh || cached

mkdir -p "$cache/debs"
# One run at a time per cache (two worktrees running `make deps`); the other
# one may have done the work meanwhile.
exec 9> "$cache/.lock"
if ! flock -n 9; then
  echo "$prog: waiting for another $prog on $cache"
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

# Sets chosen to "PKG VERSION SUITE" of the newest linux-perf 7.*.
find_newest() {
  local line best=""
  while read -r line; do
    [[ $(cut -d' ' -f2 <<< "$line") == 7.* ]] || continue
    if [ -z "$best" ] || dpkg --compare-versions "$(cut -d' ' -f2 <<< "$line")" gt "$(cut -d' ' -f2 <<< "$best")"; then
      best=$line
    fi
  done < <(versions "$default_package")
  [ -n "$best" ] || die "the Debian archive (${suites[*]}) has no $default_package 7.* (apt-cache madison $default_package in $apt)"
  chosen=$best
}

# Sets chosen to "PKG VERSION SUITE": the pin, else the newest linux-perf 7.*.
choose() {
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
    echo "$prog: the pin $package $version is gone from the archive; using $(cut -d' ' -f1-2 <<< "$chosen") ($(cut -d' ' -f3 <<< "$chosen"))"
    echo "$package $version" > "$cache/pin-gone"
  fi
}

# The closure comes from the package's suite (990) and, for a backport, the
# release it is built for (500); the other suites are pinned away (-1).
prefer() {
  local suite=$1 base="" s
  case $suite in *-backports) base=${suite%-backports} ;; esac
  for s in "${suites[@]}"; do
    printf 'Package: *\nPin: release n=%s\nPin-Priority: %s\n\n' "$s" \
      "$(if [ "$s" = "$suite" ]; then echo 990; elif [ "$s" = "$base" ]; then echo 500; else echo -1; fi)"
  done > "$apt/preferences"
}

# Writes the closure of PKG=VERSION from SUITE: "PKG VERSION ARCH" lines,
# what apt-get would install on an empty system (no Recommends).
closure() {
  local pkg=$1 ver=$2 suite=$3 out file
  file=$(closure_path "$ver")
  prefer "$suite"
  if ! out=$(apt_do apt-get install --simulate -qq --no-install-recommends "$pkg=$ver" 2>&1); then
    die "apt cannot install $pkg $ver from $suite on an empty system: $(grep -m1 -e '^E:' -e 'but it is not' -e 'but .* is to be installed' <<< "$out" || head -n1 <<< "$out")"
  fi
  # "Inst PKG (VERSION RELEASE… [ARCH])", and " [PKG…]" after it when it breaks some
  awk '$1 == "Inst" && match($0, /\[[^] ]+\]\)/) {
    v = $3; sub(/^\(/, "", v); print $2, v, substr($0, RSTART + 1, RLENGTH - 3) }' <<< "$out" |
    sort > "$file.new"
  grep -q "^$pkg $ver " "$file.new" || die "apt-get install --simulate $pkg=$ver does not install it: $(head -n1 <<< "$out")"
  mv "$file.new" "$file"
  echo "$pkg $ver $suite" > "$file.source"
}

# The pin's closure, kept from an earlier run with all its packages, needs no apt.
have_closure() {
  local file pkg ver arch
  file=$(closure_path "$version")
  chosen=$(cat "$file.source" 2>/dev/null || true)
  is_pin "$chosen" "$package" "$version" || return 1
  while read -r pkg ver arch; do
    [ -s "$(deb_path "$pkg" "$ver" "$arch")" ] || return 1
  done < "$file"
}

if $refresh || ! have_closure; then
  setup_apt
  choose
  read -r pkg ver suite <<< "$chosen"
  closure "$pkg" "$ver" "$suite"
fi
read -r pkg ver suite <<< "$chosen"
name=$(root_name "$ver")
root=$cache/$name
list=$(closure_path "$ver")

# The chosen root may be there already (--refresh, or a fallback seen before).
if is_pin "$(source_of "$root")" "$pkg" "$ver"; then
  check_perf "$root"
  point_current "$name"
  echo "$prog: cached in $root ($pkg $ver: $perf_version)"
  exit 0
fi

# --- the packages -------------------------------------------------------------

want=()
while read -r p v a; do
  [ -s "$(deb_path "$p" "$v" "$a")" ] || want+=("$p=$v")
done < "$list"
downloaded=""
if [ ${#want[@]} -ne 0 ]; then
  size=$(apt_do apt-cache show "${want[@]}" 2>/dev/null | awk '/^Size: / { s += $2 } END { printf "%.0f MB", s / 1e6 }')
  echo "$prog: downloading ${#want[@]} of the $(wc -l < "$list") packages of $pkg $ver ($suite; $size)"
  start=$SECONDS
  dl=$(mktemp -d "$cache/debs/.download.XXXXXX")
  cleanup+=("$dl")
  if ! err=$(cd "$dl" && apt_do apt-get download -qq "${want[@]}" 2>&1); then
    die "apt-get download failed (no network to the Debian archive?): $(grep -m1 '^E:' <<< "$err" || head -n1 <<< "$err")"
  fi
  while read -r p v a; do
    f=$dl/$(basename "$(deb_path "$p" "$v" "$a")")
    [ ! -s "$f" ] || mv "$f" "$cache/debs/"
    [ -s "$(deb_path "$p" "$v" "$a")" ] || die "apt-get download $p=$v fetched no $(basename "$f")"
  done < "$list"
  downloaded=", ${#want[@]} downloaded in $((SECONDS - start)) s"
fi

# --- the root -----------------------------------------------------------------

echo "$prog: extracting $(wc -l < "$list") packages into $root"
start=$SECONDS
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
cleanup+=("$tmp")
while read -r p v a; do
  deb=$(deb_path "$p" "$v" "$a")
  err=$(dpkg-deb -x "$deb" "$tmp" 2>&1) || die "$deb is damaged (remove it to download it again): $(head -n1 <<< "$err")"
done < "$list"

# Every absolute symlink made relative, so it leads into the root whoever
# follows it.
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  [ "${target#/}" != "$target" ] || continue
  ln -sfn "$(realpath -m -s --relative-to="$(dirname "$link")" "$tmp$target")" "$link"
done < <(find "$tmp" -type l -print0)

# The loader, the library directories and the binary.
loader=""
for f in "usr/lib/$triplet/ld-linux-x86-64.so.2" "lib/$triplet/ld-linux-x86-64.so.2" usr/lib64/ld-linux-x86-64.so.2 lib64/ld-linux-x86-64.so.2; do
  if [ -e "$tmp/$f" ]; then
    loader=$f
    break
  fi
done
[ -n "$loader" ] || die "$pkg $ver: no package of its closure ships ld-linux-x86-64.so.2 (is libc6 in $list?)"
libdirs=()
for d in "lib/$triplet" "usr/lib/$triplet" lib usr/lib lib64 usr/lib64; do
  # A directory that is a link into another one is named once.
  if [ -d "$tmp/$d" ] && [ ! -L "$tmp/$d" ] && [ -n "$(find "$tmp/$d" -maxdepth 1 -name 'lib*.so*' -print -quit)" ]; then
    libdirs+=("$d")
  fi
done
# usr/bin/perf, unless it is a shell wrapper for usr/bin/perf_7.N (as it was
# in Debian before 6.x), then the newest of those.
binary=""
while IFS= read -r -d '' f; do
  [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && binary=usr/bin/$(basename "$f")
done < <(find "$tmp/usr/bin" -maxdepth 1 -type f \( -name perf -o -name 'perf_[0-9]*' \) -print0 | sort -zV)
[ -n "$binary" ] || die "$pkg $ver has no usr/bin/perf program (dpkg-deb -c $(deb_path "$pkg" "$ver" amd64))"
execpath=$(cd "$tmp" && { find usr/libexec usr/lib -maxdepth 1 -type d -name 'perf*-core' -print -quit 2> /dev/null || true; })
[ -n "$execpath" ] || echo "$prog: note: $pkg $ver has no usr/lib/perf-core; PERF_EXEC_PATH left out"
plugins=$(cd "$tmp" && { find "usr/lib/$triplet" -maxdepth 3 -type d -path '*traceevent/plugins' -print -quit 2> /dev/null || true; })

# Paths are the final root's: $tmp is renamed to $root below.
libpath=""
for d in "${libdirs[@]}"; do libpath+=${libpath:+:}$root/$d; done
mkdir -p "$cache/buildid"
printf '# Written by scripts/fetch-linux-perf.sh: the only config perf reads (PERF_CONFIG).\n[buildid]\n\tdir = %s\n' \
  "$cache/buildid" > "$tmp/unwindlab-perfconfig"
{
  echo "# Written by scripts/fetch-linux-perf.sh: how to run this root's perf."
  echo "# env ENV_*(without ENV_) LOADER --inhibit-cache --library-path LIBRARY_PATH --argv0 perf BINARY ARGS..."
  echo "# Values are the rest of the line, unquoted. scripts/perf --print-command prints it."
  echo "PACKAGE=$pkg"
  echo "VERSION=$ver"
  echo "SUITE=$suite"
  echo "ROOT=$root"
  echo "LOADER=$root/$loader"
  echo "LIBRARY_PATH=$libpath"
  echo "BINARY=$root/$binary"
  [ -z "$execpath" ] || echo "ENV_PERF_EXEC_PATH=$root/$execpath"
  echo "ENV_PERF_CONFIG=$root/unwindlab-perfconfig"
  [ -z "$(find "$tmp/usr/lib" -maxdepth 1 -name 'python3.*' -print -quit)" ] || echo "ENV_PYTHONHOME=$root/usr"
  echo "ENV_MANPATH=$root/usr/share/man:"
  [ -z "$plugins" ] || echo "ENV_TRACEEVENT_PLUGIN_DIR=$root/$plugins"
} > "$tmp/unwindlab-perf.env"

rm -rf "$root"
mv -T "$tmp" "$root"
check_perf "$root"
echo "$chosen" > "$root/.unwindlab-perf"
point_current "$name"
libs=$(for d in "${libdirs[@]}"; do find "$root/$d" -maxdepth 1 -name '*.so*' \( -type f -o -type l \); done | wc -l)
echo "$prog: $pkg $ver ($suite) in $root: $perf_version ($(wc -l < "$list") packages, $libs shared objects$downloaded, extracted in $((SECONDS - start)) s)"
