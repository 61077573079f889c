#!/usr/bin/env bash
# Fuzzes scenario files for N seconds (default 600): scenarios generated
# field by field from the fuzzer's bytes, byte-level mutations of them, raw
# text, and committed guests with corrupted ELF headers, each parsed, run
# (bounded: lab::fuzz::confine) and rendered. The generator is lab::fuzz,
# shared with the seeded property test tests/scenario_fuzz.rs.
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
set -euo pipefail
seconds=${1:-600}
cd "$(dirname "$0")/../lab/fuzz"
mkdir -p corpus/scenario
# Seeds: every committed scenario as raw text (first byte 0 = raw mode),
# guest paths made relative to guests/bin as the harness expects.
python3 - <<'PY'
import glob
n = 0
for f in sorted(glob.glob("../../scenarios/*.json")):
    text = open(f).read().replace("../guests/bin/", "")
    open(f"corpus/scenario/seed-{n:03d}", "wb").write(b"\0" + text.encode())
    n += 1
print(f"fuzz: {n} seeds")
PY
# -timeout: one input runs at most ~200,000 guest instructions and ~300
# samples (well under a second); 20 s means a hang.
cargo +nightly fuzz run scenario corpus/scenario -- -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=2048 -max_len=8192 -dict=scenario.dict -print_final_stats=1 2>&1 | tee fuzz.log
