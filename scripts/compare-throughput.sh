#!/usr/bin/env bash
# Throughput of `unwindlab sframe compare`, in MB of executable code per
# second, over every ELF object of one Debian architecture's libraries
# (`usr/lib` of the root `scripts/fetch-debian-programs.sh` unpacked), in one
# run: as Debian ships them (no .sframe: only the CFI is read and its
# coverage counted) and with SFrame V3 generated from their CFI and injected
# into each (`sframe gen --inject`: every PC of every function checked).
# Usage: scripts/compare-throughput.sh [path/to/unwindlab] [amd64|arm64|s390x]
set -euo pipefail
bin=${1:-target/release/unwindlab}
arch=${2:-arm64}
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
root=$cache/root-$arch
[ -d "$root/usr/lib" ] || { echo "$root/usr/lib: not fetched (make deps)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Every regular ELF file (symbolic links are aliases), injected where the
# generator can; the others are copied as they are.
find "$root/usr/lib" -type f | LC_ALL=C sort > "$out/all"
while read -r f; do
  [ "$(od -An -tx1 -N4 "$f" | tr -d ' \n')" = 7f454c46 ] || continue
  dest=$out/with-sframe/${f#"$root"/}
  mkdir -p "$(dirname "$dest")"
  "$bin" sframe gen "$f" --inject -o "$dest" > /dev/null 2>&1 || cp "$f" "$dest"
done < "$out/all"
measure() { # name dir
  local start end
  start=$(date +%s.%N)
  "$bin" sframe compare --json "$2" > "$out/$1.json" || true
  end=$(date +%s.%N)
  python3 - "$out/$1.json" "$1" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
secs = float(sys.argv[4]) - float(sys.argv[3])
print(f"| {sys.argv[2]} | {t['files']} ({t['with_sframe']} with .sframe, {t['errors']} errors) "
      f"| {t['text_bytes'] / 1e6:.1f} MB | {t['checked_bytes'] / 1e6:.1f} MB checked, {t['disagreeing_bytes']} B disagree "
      f"| {secs:.2f} s | {t['text_bytes'] / 1e6 / secs:.1f} MB/s |")
PY
}
echo "| $arch /usr/lib | files | executable code | checked | wall time ($(nproc) cores) | throughput |"
echo "|---|---|---|---|---|---|"
measure "as shipped" "$root/usr/lib"
measure "with generated SFrame V3" "$out/with-sframe"
