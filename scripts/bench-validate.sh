#!/usr/bin/env bash
# `unwindlab validate --every 997` against `unwindlab exec` on the same
# real shell workload (Debian's static busybox, its ash running a loop of
# builtins), for x86-64, AArch64 and s390x, side by side in one run: each
# architecture's program gets generated SFrame V3 (`sframe gen --inject`),
# then exec and validate run interleaved, three rounds, best of each.
# Prints wall and CPU (user + system) seconds and the speed ratio
# exec / validate. Needs `make deps` (the Debian programs cache) and a
# release build (`make bench-validate` does both).
set -euo pipefail
cd "$(dirname "$0")/.."
unwindlab=${UNWINDLAB:-target/release/unwindlab}
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
iterations=${BENCH_VALIDATE_LOOP:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arch in amd64 arm64 s390x; do
    mkdir -p "$work/$arch"
    # argv[0] must end in `busybox` for busybox to take `sh` as the applet.
    "$unwindlab" sframe gen "$cache/$arch/bin/busybox" --inject -o "$work/$arch/busybox" >/dev/null
done
python3 - "$unwindlab" "$work" "$iterations" <<'PY'
import os, resource, subprocess, sys, time
unwindlab, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
script = f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo $i > /dev/null; done; echo done"
names = {"amd64": "x86-64", "arm64": "aarch64", "s390x": "s390x"}

def timed(cmd):
    """Wall and CPU seconds of one run (CPU: the child's user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out

print(f"busybox sh -c 'loop of {n} builtins', generated SFrame V3; best of 3 rounds, exec and validate interleaved")
print("| architecture | samples (per unwinder) | exec wall / CPU | validate --every 997 (sframe + fp) wall / CPU | "
      "validate --unwinder sframe wall / CPU | speed ratio exec/validate (both; sframe only), CPU |")
print("|---|---|---|---|---|---|")
for arch, name in names.items():
    prog = os.path.join(work, arch, "busybox")
    runs = {
        "exec": [unwindlab, "exec", prog, "sh", "-c", script],
        "both": [unwindlab, "validate", "--every", "997", prog, "sh", "-c", script],
        "sframe": [unwindlab, "validate", "--every", "997", "--unwinder", "sframe", prog, "sh", "-c", script],
    }
    best, samples = {}, "?"
    for _ in range(3):
        for key, cmd in runs.items():
            wall, cpu, out = timed(cmd)
            if key == "exec":
                assert out == b"done\n", (arch, out)
            elif key == "sframe":
                samples = out.decode().split(" samples")[0].split()[-1]
            w, c = best.get(key, (wall, cpu))
            best[key] = (min(w, wall), min(c, cpu))
    fmt = lambda k: f"{best[k][0]:.2f} s / {best[k][1]:.2f} s"
    ratio = lambda k: best["exec"][1] / best[k][1]
    print(f"| {name} | {samples} | {fmt('exec')} | {fmt('both')} | {fmt('sframe')} | {ratio('both'):.3f}; {ratio('sframe'):.3f} |")
PY
