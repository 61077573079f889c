#!/usr/bin/env bash
# Installs the Debian packages named in scripts/debian-packages.txt (or given
# as arguments) that are not installed yet. Runs apt-get only when something
# is missing (as root, or through sudo), always with --no-install-recommends:
# the list must name everything.
#
#   scripts/install-deps.sh --check   only print the missing ones, one a line
set -euo pipefail
here=$(dirname "$0")
check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
if [ $# -eq 0 ]; then
  mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$here/debian-packages.txt")
else
  pkgs=("$@")
fi
missing=()
for pkg in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if $check; then
  printf '%s\n' "${missing[@]+"${missing[@]}"}" | sed '/^$/d'
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "deps: missing Debian packages: ${missing[*]} (run 'make deps' as root, or: apt-get install --no-install-recommends ${missing[*]})" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
