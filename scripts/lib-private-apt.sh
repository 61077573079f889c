# apt, privately: sourced by scripts/fetch-linux-source.sh and
# scripts/fetch-linux-perf.sh, which download from Debian's archive without
# touching the host's apt.
#
# The caller sets, before calling any of these:
#   prog     its name, for messages ("fetch-linux-source")
#   apt      the private apt directory ($CACHE/apt)
#   suites   the suites to list (an array: trixie-backports sid, …)
#   die      a function: one line on stderr, exit 1
# and may set mirror and keyring (Debian's archive, debian-archive-keyring).
#
# APT_CONFIG names $apt/apt.conf, which replaces the host's apt.conf.d (so
# none of its hooks run: no appstream refresh, no PackageKit, no DEP-11
# downloads) and names its own sources (the suites, main, signed by
# debian-archive-keyring), lists, status (empty: nothing is installed, so
# apt computes a whole dependency closure) and caches. From the host's
# configuration only the settings for reaching the archive are kept:
# proxies, timeouts, retries, and the Release date checks. Nothing under
# /etc/apt or /var/lib/apt is read for packages or written, and no step needs
# root (as root, apt's _apt sandbox is off: that user cannot enter the cache
# in root's home; the archive's signatures are checked all the same).
# $apt/preferences is the caller's (pins), and may be absent.
# The caller's variables (prog, apt, suites, updated) are not assigned here:
# shellcheck shell=bash disable=SC2154,SC2034
mirror=${mirror:-http://deb.debian.org/debian}
keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}

setup_apt() {
  local suite host
  mkdir -p "$apt/apt.conf.d" "$apt/sources.list.d" "$apt/preferences.d" "$apt/state" \
    "$apt/lists/partial" "$apt/cache/archives/partial"
  [ -e "$apt/status" ] || : > "$apt/status"
  for suite in "${suites[@]}"; do
    echo "deb [signed-by=$keyring] $mirror $suite main"
  done > "$apt/sources.list.new"
  # Other suites than the lists were updated for: update again.
  if ! cmp -s "$apt/sources.list.new" "$apt/sources.list"; then
    rm -f "$apt/updated"
    mv "$apt/sources.list.new" "$apt/sources.list"
  else
    rm -f "$apt/sources.list.new"
  fi
  # The host's settings for reaching the archive, as the host's apt sees them.
  host=$(apt-config dump 2>/dev/null | grep -E '^Acquire::(Check-Valid-Until|Check-Date|Max-ValidTime|Min-ValidTime|Retries|ForceIPv4|ForceIPv6|(http|https|ftp)::(Proxy|Proxy-Auto-Detect|Timeout)(::[^ ]*)?) ' || true)
  cat > "$apt/apt.conf" << EOF
// Written by scripts/$prog.sh: apt, privately (APT_CONFIG=this file).
Dir::Etc::Parts "$apt/apt.conf.d";
Dir::Etc::Main "/dev/null";
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/sources.list.d";
Dir::Etc::Preferences "$apt/preferences";
Dir::Etc::PreferencesParts "$apt/preferences.d";
Dir::State "$apt/state";
Dir::State::Lists "$apt/lists";
Dir::State::Status "$apt/status";
Dir::Cache "$apt/cache";
Dir::Cache::srcpkgcache "";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Sandbox::User "root";
Acquire::Languages "none";
// From the host's configuration:
$host
EOF
}
apt_do() { APT_CONFIG=$apt/apt.conf "$@"; }

# Updates the private lists; $1 says why. Sets updated=true.
update() {
  local err
  echo "$prog: apt-get update of the private lists ($1)"
  rm -f "$apt/updated"
  if ! err=$(apt_do apt-get update -qq --error-on=any 2>&1 > /dev/null); then
    die "apt-get update of the private lists failed (no network to the Debian archive?): $(grep -m1 '^E:' <<< "$err" || head -n1 <<< "$err")"
  fi
  touch "$apt/updated"
  updated=true
}

# "PKG VERSION SUITE" lines of the given packages, from the private lists.
versions() {
  apt_do apt-cache madison "$@" 2>/dev/null |
    awk -F' *[|] *' '{ split($3, w, " "); sub("/.*", "", w[2]); gsub(" ", "", $1); print $1, $2, w[2] }'
}
