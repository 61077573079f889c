#!/usr/bin/env bash
# A fork-and-pipe-heavy shell workload (Debian's static bash: 200 pipelines
# into a subshell and 200 command substitutions, 400 forks, no exec) under
# `unwindlab exec` and under qemu-x86_64, side by side in one run, three
# times each; prints the times and their ratio. Needs `make deps` (the
# Debian programs cache) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
bash_static=$cache/amd64/bin/bash-static
work='n=0; for i in {1..200}; do echo $i | { read x; n=$((n+x)); }; x=$(echo $i); done; echo $x'
python3 - "$bash_static" "$work" <<'PY'
import subprocess, sys, time
bash, work = sys.argv[1], sys.argv[2]
runs = {"unwindlab exec": ["target/release/unwindlab", "exec", bash, "-c", work], "qemu-x86_64": ["qemu-x86_64", bash, "-c", work]}
best = {}
for _ in range(3):
    for name, cmd in runs.items():
        t = time.perf_counter(); out = subprocess.run(cmd, capture_output=True, check=True).stdout; t = time.perf_counter() - t
        assert out == b"200\n", (name, out)
        best[name] = min(best.get(name, t), t)
for name, t in best.items():
    print(f"{name:15} {t:6.2f} s  ({400 / t:6.1f} forks/s)")
print(f"unwindlab exec / qemu-x86_64: {best['unwindlab exec'] / best['qemu-x86_64']:.2f}x the time")
PY
