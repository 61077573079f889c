#!/usr/bin/env python3
"""`unwindlab exec` against qemu-user on Debian's programs, side by side in
one run: a fork-heavy bash loop (400 forks), `xz -T2` compressing 1 MiB, and
`sort -n` of 50,000 numbers, on x86-64, AArch64 and s390x. Each command runs
twice per runner, the best time counts; outputs must be identical.
Runners: qemu-ARCH (with -L ROOT for dynamic programs), `unwindlab exec`
(instruction counting only: `Tracking::Count`), and `unwindlab exec` keeping
the ground truth as scenario runs do (UNWINDLAB_EXEC_GROUND_TRUTH=1, the
mode `exec` ran in before), to show what counting alone saves.

Usage: scripts/bench-exec.py [path/to/unwindlab]   (make bench-exec; needs
`make deps` for the Debian programs cache and a release build)
"""
import os
import subprocess
import sys
import tempfile
import time

from bench_env import ENV  # every run's environment, fixed (see there)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/unwindlab")
CACHE = os.environ.get("UNWINDLAB_DEBIAN_CACHE",
                       os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                    "unwindlab/debian"))
ARCHES = [("amd64", "x86_64", "x86-64"), ("arm64", "aarch64", "AArch64"), ("s390x", "s390x", "s390x")]
FORKS = 'n=0; for i in {1..200}; do echo $i | { read x; n=$((n+x)); }; x=$(echo $i); done; echo $x'




def best_of(cmd, stdin=None, env=None, cwd=None, runs=2):
    best, out = None, None
    env = env or ENV
    for _ in range(runs):
        t = time.perf_counter()
        with open(stdin or os.devnull, "rb") as f:
            r = subprocess.run(cmd, stdin=f, capture_output=True, env=env, cwd=cwd)
        t = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode(errors='replace')[:300]}")
        out = r.stdout if out is None else out
        assert r.stdout == out, f"{cmd}: output differs between runs"
        best = t if best is None else min(best, t)
    return best, out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.txt")
        with open(data, "w") as f:
            # Deterministic text: 1 MiB of numbers with some repetition.
            x, lines, size = 12345, [], 0
            while size < 1 << 20:
                x = (x * 1103515245 + 12345) % (1 << 31)
                lines.append(f"{x % 1000003} {x % 97}\n")
                size += len(lines[-1])
            f.writelines(lines)
        numbers = os.path.join(tmp, "numbers.txt")
        with open(numbers, "w") as f:
            f.writelines(line.split()[0] + "\n" for line in lines[:50000])
        print("| workload | architecture | qemu-user | unwindlab exec | exec / qemu | exec with ground truth "
              "| ground truth / counting |", flush=True)
        print("|---|---|---|---|---|---|---|")
        for deb, qarch, name in ARCHES:
            root = os.path.join(CACHE, f"root-{deb}")
            bash = os.path.join(CACHE, deb, "bin", "bash-static")
            work = [
                ("bash, 400 forks", [bash, "-c", FORKS], None, False),
                # Input on stdin: the root, the programs' /, holds no data.
                ("xz -T2, 1 MiB", [os.path.join(root, "usr/bin/xz"), "-T2", "-c"], data, True),
                ("sort -n, 50,000 lines", [os.path.join(root, "usr/bin/sort"), "-n"], numbers, True),
            ]
            for label, cmd, stdin, dynamic in work:
                qemu = [f"qemu-{qarch}"] + (["-L", root] if dynamic else []) + cmd
                lab = [BIN, "exec"] + (["--root", root] if dynamic else []) + cmd
                tq, oq = best_of(qemu, stdin, cwd=tmp)
                tl, ol = best_of(lab, stdin, cwd=tmp)
                env = dict(ENV, UNWINDLAB_EXEC_GROUND_TRUTH="1")
                tg, og = best_of(lab, stdin, env=env, cwd=tmp)
                assert oq == ol == og, f"{name} {label}: outputs differ"
                print(f"| {label} | {name} | {tq:.2f} s | {tl:.2f} s | **{tl / tq:.2f}×** | {tg:.2f} s | {tg / tl:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
