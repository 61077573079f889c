#!/usr/bin/env bash
# Guest instructions per second under the emulator's tracking modes, as
# ratios to a run without execution hooks (BENCHMARKS.md, "Emulator
# throughput"). Prints the Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked -p emu --bench throughput
