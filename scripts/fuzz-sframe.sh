#!/usr/bin/env bash
# Fuzzes the SFrame reader (decode + check + dump + lookup) for N seconds.
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
set -euo pipefail
seconds=${1:-600}
cd "$(dirname "$0")/../sframe/fuzz"
mkdir -p corpus/sframe
python3 - <<'PY'
import glob, json, struct
n = 0
for f in sorted(glob.glob("../tests/data/simple-frame-rs/*.json")):
    d = json.load(open(f))
    if d["content"]:
        open(f"corpus/sframe/seed-v{n:03d}", "wb").write(struct.pack("<Q", d["section_base"]) + bytes(d["content"]))
        n += 1
for f in sorted(glob.glob("../tests/data/sframe-samples/*.sframe.bin")):
    open(f"corpus/sframe/seed-s{n:03d}", "wb").write(struct.pack("<Q", 0) + open(f, "rb").read())
    n += 1
print(f"fuzz: {n} seeds")
PY
cargo +nightly fuzz run sframe corpus/sframe -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=4096
