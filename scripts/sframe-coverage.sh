#!/usr/bin/env bash
# Coverage of `unwindlab sframe gen` on static glibc binaries built here:
# the share of .eh_frame FDEs and of code bytes the generated section
# covers, skip reasons, and .sframe size vs .eh_frame, as a Markdown table.
# Usage: scripts/sframe-coverage.sh [path/to/unwindlab]
set -euo pipefail
bin=${1:-target/release/unwindlab}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
src=sframe/tests/data/toolchain/prog.c
gcc -O2 -static -o "$out/x86_64" "$src"
aarch64-linux-gnu-gcc -O2 -static -o "$out/aarch64" "$src"
s390x-linux-gnu-gcc -O2 -static -o "$out/s390x" "$src"
echo "| architecture (static glibc binary, -O2) | SFrame | FDEs covered | code bytes covered | flex FDEs | .sframe / .eh_frame bytes | skipped (reason × count) |"
echo "|---|---|---|---|---|---|---|"
for arch in x86_64 aarch64 s390x; do
  for v in 3 2; do
    "$bin" sframe gen "$out/$arch" --sframe-version "$v" --json > "$out/$arch-$v.json"
    python3 - "$out/$arch-$v.json" "$arch" "$v" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
pct = lambda a, b: f"{100.0 * a / b:.1f} %" if b else "–"
reasons = "; ".join(f"{r} × {n}" for r, n in s["reasons"].items()) or "none"
arch = {"x86_64": "x86-64"}.get(sys.argv[2], sys.argv[2])
print(f"| {arch} | V{sys.argv[3]} | {s['fdes_covered']} / {s['fdes']} ({pct(s['fdes_covered'], s['fdes'])}) "
      f"| {s['covered_bytes']} / {s['fde_bytes']} ({pct(s['covered_bytes'], s['fde_bytes'])}); {pct(s['covered_bytes'], s['text_bytes'])} of all executable bytes "
      f"| {s['flex']} | {s['sframe_bytes']} / {s['cfi_bytes']} ({s['sframe_bytes'] / s['cfi_bytes']:.2f}) | {reasons} |")
PY
  done
done
