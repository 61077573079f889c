#!/usr/bin/env bash
# The main job: the built-in scenario (a guest profiled with deferred user
# unwinding, every stack judged against ground truth), then a tour of the
# SFrame tools on a program built here.
set -euo pipefail
bin=${1:-target/release/unwindlab}
echo "== unwindlab run (the built-in scenario)"
"$bin" run
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
src=sframe/tests/data/toolchain/prog.c
gcc -O2 -Wa,--gsframe -o "$out/prog-x86_64" "$src"
aarch64-linux-gnu-gcc -O2 -static -mbranch-protection=standard -Wa,--gsframe -o "$out/prog-aarch64" "$src"
for exe in "$out/prog-x86_64" "$out/prog-aarch64"; do
  echo "== $(basename "$exe"): unwindlab sframe check"
  "$bin" sframe check "$exe"
  echo "== $(basename "$exe"): unwindlab sframe dump (first function)"
  "$bin" sframe dump "$exe" | sed -n '/func idx \[0\]/,/^$/p'
done
main=$(nm "$out/prog-x86_64" | awk '$3 == "recurse" { print "0x" $1 }')
echo "== rules inside recurse() of prog-x86_64 (PIE, link-time addresses)"
"$bin" sframe lookup "$out/prog-x86_64" "$main" "$(printf '0x%x' $((main + 1)))" "$(printf '0x%x' $((main + 8)))"
echo "== the raw V3 section of a binutils 2.46 test (DRAP, flex FDE)"
python3 - "$out/drap.sframe" <<'PY'
import json, sys
d = json.load(open("sframe/tests/data/simple-frame-rs/cfi-sframe-x86_64-esc-expr-1-2.46.json"))
open(sys.argv[1], "wb").write(bytes(d["content"]))
PY
"$bin" sframe lookup --base 0x402048 "$out/drap.sframe" 0x401000 0x401009 0x40101a 0x40105e
