#!/usr/bin/env bash
# Fetches Debian's own programs for the conformance suite (tests/conformance.rs),
# for amd64, arm64 and s390x, from Debian's archive, with `apt-get download
# PKG:ARCH`, and unpacks them with `dpkg-deb -x` into roots under the cache:
#
# * the statically linked programs of tests/conformance/packages.txt
#   (busybox-static, bash-static), one root per architecture, $CACHE/ARCH/;
# * the dynamically linked programs of tests/conformance/packages-dynamic.txt
#   (coreutils, sed, grep, …) with the libraries they need, one complete root
#   per architecture, $CACHE/root-ARCH/, which `qemu-ARCH -L ROOT` and
#   `unwindlab exec --prefix ROOT` run them from.
#
#   $CACHE/debs/PKG_VERSION_ARCH.deb    the archives, kept
#   $CACHE/ARCH/                        the static root
#   $CACHE/ARCH/bin/APPLET -> busybox   every busybox applet, for PATH
#   $CACHE/root-ARCH/                   the dynamic root (usr-merged, see below)
#   $CACHE/{ARCH,root-ARCH}/.stamps/    what each root holds
#   $CACHE/manifest.txt                 "ARCH PKG VERSION" lines, static, written last
#   $CACHE/manifest-dynamic.txt         the same for the dynamic roots, libraries included
#
# The libraries of a dynamic root are the closure of the Depends and
# Pre-Depends of its programs (`apt-cache depends`, first alternative of
# each), followed only through library packages: by Debian Policy 8.1 those
# are the packages named lib* (libc6, libacl1, libselinux1, libpcre2-8-0, …),
# minus lib*-bin, -dev, -common, -data, -doc and libc-l10n, which ship no
# shared object, plus zlib1g (libz.so.1, named before the policy; pigz). Everything else (dpkg, debianutils, install-info,
# gcc-12-base, …) is a packaging dependency, not a run-time one, and is left
# out. The rule is checked, not trusted: every DT_NEEDED of every program and
# library of the root, and every program's PT_INTERP, must be found in it.
#
# A dynamic root is laid out like an installed bookworm system: its /bin,
# /sbin, /lib and /lib64 are merged into /usr (symlinks bin -> usr/bin, …),
# every absolute symlink is made relative (so /lib64/ld-linux-x86-64.so.2
# leads to the root's ld.so, never the host's), and etc/ld.so.cache is an
# empty file, so ld.so finds libraries in its default directories under the
# root (/lib/TRIPLET, /usr/lib/TRIPLET) and never by the host's cache.
#
# CACHE is $UNWINDLAB_DEBIAN_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/unwindlab/debian.
# Idempotent and quick when cached: apt is asked for nothing unless a root,
# an architecture or the package lists are missing (--refresh asks it for
# newer versions). Adding the foreign architectures and `apt-get update`
# need root (or sudo).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="$here/../tests/conformance/packages.txt"
dynlist="$here/../tests/conformance/packages-dynamic.txt"
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
arches=(amd64 arm64 s390x)
declare -A triplet=([amd64]=x86_64-linux-gnu [arm64]=aarch64-linux-gnu [s390x]=s390x-linux-gnu)
read_list() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$1"; }
mapfile -t pkgs < <(read_list "$list")
mapfile -t dynpkgs < <(read_list "$dynlist")
refresh=false
[ "${1:-}" = --refresh ] && refresh=true

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

# Cached: each manifest names every listed package for every architecture
# and each root is complete. Then apt is not asked at all.
cached=true
for arch in "${arches[@]}"; do
  [ -f "$cache/$arch/.stamps/applets" ] && [ -f "$cache/root-$arch/.stamps/complete" ] || cached=false
  for pkg in "${pkgs[@]}"; do grep -qs "^$arch $pkg " "$cache/manifest.txt" || cached=false; done
  for pkg in "${dynpkgs[@]}"; do grep -qs "^$arch $pkg " "$cache/manifest-dynamic.txt" || cached=false; done
done
if ! $refresh && ! $need_update && $cached; then
  echo "fetch-debian-programs: cached in $cache ($(cat "$cache/manifest.txt" "$cache/manifest-dynamic.txt" | wc -l) package builds; --refresh to look for newer versions)"
  exit 0
fi
if $need_update; then
  echo "fetch-debian-programs: apt-get update (new architectures)"
  as_root apt-get update -qq
fi

# A dependency apt-cache names is followed if it is a library package.
is_library() {
  case $1 in
    libc-l10n | *-bin | *-dev | *-common | *-data | *-doc) return 1 ;;
    lib* | zlib1g) return 0 ;;
    *) return 1 ;;
  esac
}

# The library closure of the dynamic programs on every architecture, one
# apt-cache call per level of dependencies for all architectures together
# (each call reads all the package lists: seconds). Leaves dynset[ARCH] set to
# the programs and libraries of that architecture's root, space-separated.
declare -A dynset=()
closure() {
  local arch pkg dep names todo=() seen=() level out
  declare -A known=()
  for arch in "${arches[@]}"; do
    dynset[$arch]=""
    for pkg in "${dynpkgs[@]}"; do todo+=("$pkg:$arch"); known[$pkg:$arch]=1; done
  done
  while [ ${#todo[@]} -ne 0 ]; do
    seen+=("${todo[@]}")
    # "PKG[:ARCH]" heads, then "  [|](Pre)Depends: DEP[:ARCH]" lines; after a
    # "|Depends:" (an alternative) the next ones are its other choices.
    out=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${todo[@]}" |
      awk -v native="$native" '
        function full(n) { return n ~ /:/ ? n : n ":" native }
        /^[^ ]/ { alt = 0; next }
        /^ *\|?(Pre)?Depends: / {
          if (!alt) print full($2)
          alt = ($1 ~ /^\|/)
        }')
    todo=()
    for dep in $out; do
      [ -n "${known[$dep]:-}" ] && continue
      known[$dep]=1
      is_library "${dep%%:*}" && todo+=("$dep")
    done
  done
  for pkg in "${seen[@]}"; do dynset[${pkg##*:}]+="${pkg%%:*} "; done
}

# The candidate versions of every PKG:ARCH needed, from one apt-cache call.
# Leaves version[PKG:ARCH] set, and missing[] the rest.
declare -A version=()
candidates() {
  local names=() arch pkg
  for arch in "${arches[@]}"; do
    for pkg in "${pkgs[@]}" ${dynset[$arch]}; do names+=("$pkg:$arch"); done
  done
  version=()
  while read -r pkg arch v; do version[$pkg:$arch]=$v; done < <(
    apt-cache show --no-all-versions "${names[@]}" 2>/dev/null |
      awk '/^Package: /{p=$2} /^Architecture: /{a=$2} /^Version: /{v=$2} /^$/{if(p!="")print p, a, v; p=""} END{if(p!="")print p, a, v}')
  missing=()
  for name in "${names[@]}"; do [ -n "${version[$name]:-}" ] || missing+=("$name"); done
}

closure
candidates
if [ ${#missing[@]} -ne 0 ]; then
  echo "fetch-debian-programs: apt-get update (no candidate for: ${missing[*]})"
  as_root apt-get update -qq
  closure
  candidates
  if [ ${#missing[@]} -ne 0 ]; then
    echo "fetch-debian-programs: Debian has no ${missing[*]} (apt-cache show ${missing[0]})" >&2
    exit 1
  fi
fi

mkdir -p "$cache/debs"
fetched=0
# Prints the path of PKG:ARCH's archive, downloading it if needed.
deb_of() {
  local pkg=$1 arch=$2 v=${version[$1:$2]} deb tmp got
  deb="$cache/debs/${pkg}_${v//:/%3a}_$arch.deb"
  if [ ! -s "$deb" ]; then
    tmp=$(mktemp -d "$cache/debs/.download.XXXXXX")
    # apt's sandbox user may not write into the cache (root's home): that
    # warning is expected and harmless, so only errors are shown.
    (cd "$tmp" && apt-get download -qq "$pkg:$arch=$v" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
    got=$(ls "$tmp"/*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$got" ]; then
      rm -rf "$tmp"
      echo "fetch-debian-programs: apt-get download $pkg:$arch=$v failed" >&2
      return 1
    fi
    mv "$got" "$deb"
    rm -rf "$tmp"
  fi
  echo "$deb"
}

# The static roots.
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
    [ -s "$cache/debs/${pkg}_${version[$pkg:$arch]//:/%3a}_$arch.deb" ] || fetched=$((fetched + 1))
    deb=$(deb_of "$pkg" "$arch")
    dpkg-deb -x "$deb" "$root"
    echo "${version[$pkg:$arch]}" > "$root/.stamps/$pkg"
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

# Merges the root's /bin, /sbin, /lib* into /usr as bookworm's usrmerge does
# (a file in both places is an error), leaving symlinks behind.
merge_usr() {
  local root=$1 d f rel
  for d in bin sbin lib lib32 lib64 libx32; do
    [ -d "$root/$d" ] && [ ! -L "$root/$d" ] || continue
    mkdir -p "$root/usr/$d"
    while IFS= read -r -d '' f; do
      rel=${f#"$root/$d/"}
      if [ -e "$root/usr/$d/$rel" ] || [ -L "$root/usr/$d/$rel" ]; then
        echo "fetch-debian-programs: $root: /$d/$rel and /usr/$d/$rel both exist" >&2
        return 1
      fi
    done < <(find "$root/$d" -mindepth 1 ! -type d -print0)
    cp -a "$root/$d/." "$root/usr/$d/"
    rm -rf "${root:?}/$d"
    ln -s "usr/$d" "$root/$d"
  done
}

# Every absolute symlink made relative, so it leads into the root whoever
# follows it (the host kernel under qemu-user included).
relative_links() {
  local root=$1 link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [ "${target#/}" != "$target" ] || continue
    ln -sfn "$(realpath -m -s --relative-to="$(dirname "$link")" "$root$target")" "$link"
  done < <(find "$root" -type l -print0)
}

# The rule for libraries, checked: each program's interpreter and every
# DT_NEEDED of the programs and libraries is in the root, and no symlink
# leads out of it.
check_root() {
  local root=$1 arch=$2 f interp need have=() problems=()
  local libdirs=("$root/usr/lib/${triplet[$arch]}" "$root/usr/lib" "$root/usr/lib64")
  while IFS= read -r -d '' f; do
    # Dangling is allowed (/etc/rmt is an alternative, docs link to skipped
    # packages); what the programs need is checked below.
    target=$(readlink -m "$f")
    [ "${target#"$root"/}" != "$target" ] || problems+=("${f#"$root"} leads out of the root")
  done < <(find "$root" -type l -print0)
  while IFS= read -r -d '' f; do
    interp=$(readelf -lW "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p' || true)
    if [ -n "$interp" ] && [ ! -e "$root$interp" ]; then problems+=("${f#"$root"}: no interpreter $interp"); fi
    for need in $(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
      found=false
      for d in "${libdirs[@]}"; do [ -e "$d/$need" ] && found=true; done
      $found || problems+=("${f#"$root"} needs $need")
    done
  done < <(find "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib/${triplet[$arch]}" -maxdepth 1 -type f -print0 2>/dev/null)
  if [ ${#problems[@]} -ne 0 ]; then
    printf 'fetch-debian-programs: %s: %s\n' "$root" "${problems[@]}" >&2
    return 1
  fi
}

# The dynamic roots.
for arch in "${arches[@]}"; do
  root="$cache/root-$arch"
  want=""
  for pkg in $(printf '%s\n' ${dynset[$arch]} | sort); do want+="$pkg ${version[$pkg:$arch]}"$'\n'; done
  if [ -f "$root/.stamps/complete" ] && [ "$(cat "$root/.stamps/complete")" = "$want" ]; then
    continue
  fi
  rm -rf "$root"
  mkdir -p "$root/.stamps"
  for pkg in ${dynset[$arch]}; do
    [ -s "$cache/debs/${pkg}_${version[$pkg:$arch]//:/%3a}_$arch.deb" ] || fetched=$((fetched + 1))
    deb=$(deb_of "$pkg" "$arch")
    dpkg-deb -x "$deb" "$root"
  done
  merge_usr "$root"
  relative_links "$root"
  mkdir -p "$root/etc"
  : > "$root/etc/ld.so.cache"
  check_root "$root" "$arch"
  printf '%s' "$want" > "$root/.stamps/complete"
done

write_if_changed() {
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "${2%$'\n'}" ]; then printf '%s' "$2" > "$1"; fi
}
manifest=""
dynmanifest=""
for arch in "${arches[@]}"; do
  for pkg in "${pkgs[@]}"; do manifest+="$arch $pkg ${version[$pkg:$arch]}"$'\n'; done
  for pkg in ${dynset[$arch]}; do dynmanifest+="$arch $pkg ${version[$pkg:$arch]}"$'\n'; done
done
write_if_changed "$cache/manifest.txt" "$manifest"
write_if_changed "$cache/manifest-dynamic.txt" "$dynmanifest"
echo "fetch-debian-programs: ${#pkgs[@]} static and ${#dynpkgs[@]} dynamic packages (+$(($(wc -w <<< "${dynset[amd64]}") - ${#dynpkgs[@]})) libraries) for ${#arches[@]} architectures in $cache ($fetched downloaded)"
