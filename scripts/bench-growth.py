#!/usr/bin/env python3
"""How cost grows as work grows (issue 26): wall time, CPU time and peak
memory of `unwindlab exec`, `validate` and `run` against four axes, side by
side in one run, on x86-64:

* samples (10^3 to 10^5): one workload (Debian's bash-static, generated
  SFrame V3, a loop of builtins), sampled every 10^5, 10^4 and 10^3
  instructions (exec, which takes no samples, is the constant beside them);
* stack depth (shell functions 30 to 1,000 deep, each level 2-3 native
  frames; a fixed loop at the bottom; the period grows with the depth so
  that each depth takes about as many samples);
* threads (1 to 16: the lab's threads-v3 guest, 96 work items shared by N
  worker threads, sampled every 97 instructions: a small workload);
* processes (1 to 64 subshells of bash-static, each a fixed loop).

Prints a Markdown table (the figures of BENCHMARKS.md) and draws the curves
as two SVG files (time, memory; log-log, one panel per axis) in OUT_DIR
(default docs/bench). Every run is measured once, by wait4(): its own CPU
time and peak resident set. Usage:
    scripts/bench-growth.py target/release/unwindlab [OUT_DIR]
Needs `make deps` (the Debian programs cache). Runs get a fixed environment
(ENV)."""

import json
import math
import os
import subprocess
import sys
import tempfile
import time

from bench_env import ENV  # every run's environment, fixed (see there)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("UNWINDLAB_DEBIAN_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "unwindlab", "debian")




def measured(cmd):
    """Wall and CPU seconds (the child's own, by wait4()), peak RSS in MiB and stdout of one run of `cmd`."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=ENV)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench-growth: {' '.join(cmd)} exited {p.returncode}: {err.decode(errors='replace')[-400:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "mib": ru.ru_maxrss / 1024, "out": out.decode()}


def samples_of(text):
    """Samples judged, from validate's first line or run's account."""
    for line in text.splitlines():
        if " samples: " in line and line.split(":")[0] in ("sframe", "fp"):
            return int(line.split(" samples")[0].split()[-1])
        if line.strip().startswith("samples: "):
            return int(line.split("judged")[0].split(",")[-1].split()[0])
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    unwindlab = os.path.abspath(sys.argv[1])
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "bench")
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="unwindlab-growth-")
    bash = os.path.join(work, "bash-static")
    subprocess.run([unwindlab, "sframe", "gen", os.path.join(CACHE, "amd64", "bin", "bash-static"), "--inject",
                    "-o", bash], check=True, stdout=subprocess.DEVNULL)
    threads = os.path.join(ROOT, "guests", "bin", "x86_64", "threads-v3")

    def loop(n):
        return f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"

    # axis -> [(x, program, args, period, cpus)]
    axes = {
        "samples": [(s, bash, ["-c", loop(4000) + "; echo done"], p, 1)
                    for s, p in ((1e3, 100003), (1e4, 10007), (1e5, 997))],
        # The descent costs in proportion to the depth: the period grows
        # with it, so every depth takes about as many samples (~9,000).
        "depth": [(d, bash, ["-c", f"f() {{ if [ $1 -gt 0 ]; then f $(($1-1)); else {loop(200)}; fi; }}; f {d}; echo done"],
                   997 * d // 30 | 1, 1) for d in (30, 100, 300, 1000)],
        "threads": [(n, threads, ["workers", str(n)], 97, 2) for n in (1, 2, 4, 8, 16)],
        "processes": [(n, bash, ["-c", f"n=0; while [ $n -lt {n} ]; do ( {loop(20)} ); n=$((n+1)); done; echo done"],
                       997, 1) for n in (1, 4, 16, 64)],
    }
    results = {}  # (axis, x, mode) -> measurement
    print("| axis | x | samples | exec wall / CPU / MiB | validate --every P wall / CPU / MiB | "
          "run (perf every P) wall / CPU / MiB | validate/exec CPU |")
    print("|---|---|---|---|---|---|---|")
    for axis, points in axes.items():
        for x, prog, args, period, cpus in points:
            scenario = {
                "name": f"growth-{axis}-{x:g}",
                "description": f"{axis} {x:g}",
                "machine": {"arch": "x86_64", "cpus": cpus},
                "guests": [{"name": "g", "path": prog, "args": args}],
                "tracers": [{"kind": "perf", "name": "perf", "period": period}],
                "kernel": {"profile": "sframe-v13"},
                "events": [],
            }
            path = os.path.join(work, "scenario.json")
            with open(path, "w") as f:
                json.dump(scenario, f)
            runs = {
                "exec": [unwindlab, "exec", prog, *args],
                "validate": [unwindlab, "validate", "--every", str(period), prog, *args],
                "run": [unwindlab, "run", path],
            }
            for mode, cmd in runs.items():
                results[(axis, x, mode)] = measured(cmd)
            v = results[(axis, x, "validate")]
            n = samples_of(v["out"])
            cell = lambda m: "{wall:.2f} s / {cpu:.2f} s / {mib:.0f}".format(**results[(axis, x, m)])
            ratio = results[(axis, x, "exec")]["cpu"] / max(v["cpu"], 1e-9)
            print(f"| {axis} | {x:g} | {n} | {cell('exec')} | {cell('validate')} | {cell('run')} | {ratio:.2f} |",
                  flush=True)
    for quantity, unit, key in (("time", "CPU seconds", "cpu"), ("memory", "peak MiB", "mib")):
        svg = draw(axes, results, key, unit, f"unwindlab: {quantity} as work grows (x86-64, log-log)")
        with open(os.path.join(out_dir, f"growth-{quantity}.svg"), "w") as f:
            f.write(svg)
    subprocess.run(["rm", "-rf", work], check=False)


COLOURS = {"exec": "#1b9e77", "validate": "#d95f02", "run": "#7570b3"}
LABELS = {"samples": "samples", "depth": "shell function depth", "threads": "threads", "processes": "processes"}


def draw(axes, results, key, unit, title):
    """One SVG: a log-log panel per axis, a line per mode."""
    pw, ph, m = 300, 220, 50
    width, height = 4 * (pw + m) + m, ph + 2 * m + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{m}" y="20" font-size="14">{title}</text>']
    for i, (axis, points) in enumerate(axes.items()):
        x0, y0 = m + i * (pw + m), 40
        xs = [p[0] for p in points]
        ys = [results[(axis, x, mode)][key] for x in xs for mode in COLOURS]
        lx = (math.log10(min(xs)), math.log10(max(xs)))
        ly = (math.floor(math.log10(max(min(ys), 1e-3))), math.ceil(math.log10(max(ys))))
        if ly[0] == ly[1]:
            ly = (ly[0], ly[0] + 1)
        px = lambda x: x0 + (math.log10(x) - lx[0]) / ((lx[1] - lx[0]) or 1) * pw
        py = lambda y: y0 + ph - (math.log10(max(y, 1e-3)) - ly[0]) / (ly[1] - ly[0]) * ph
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        for e in range(ly[0], ly[1] + 1):
            y = py(10 ** e)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#eee"/>'
                       f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
        for x in xs:
            out.append(f'<text x="{px(x):.1f}" y="{y0 + ph + 14}" text-anchor="middle">{x:g}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 30}" text-anchor="middle">{LABELS[axis]}</text>'
                   f'<text x="{x0 + 4}" y="{y0 + 12}" fill="#666">{unit}</text>')
        for mode, colour in COLOURS.items():
            pts = " ".join(f"{px(x):.1f},{py(results[(axis, x, mode)][key]):.1f}" for x in xs)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for x in xs:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(results[(axis, x, mode)][key]):.1f}" r="3" '
                           f'fill="{colour}"/>')
    for j, (mode, colour) in enumerate(COLOURS.items()):
        out.append(f'<rect x="{m + j * 90}" y="{height - 18}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{m + j * 90 + 16}" y="{height - 8}">{mode}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


if __name__ == "__main__":
    main()
