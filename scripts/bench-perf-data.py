#!/usr/bin/env python3
"""Bytes per sample: the perf.data of deferred user callchains against perf's
classic `--call-graph dwarf` (8 KiB of user stack and the user registers per
sample), measured on the same runs.

For each run, `unwindlab run --perf-data F --json` gives the file (every byte
perf would read: samples, deferred callchains, side-band records, header) and
the report's ring-buffer bytes (samples and deferred records alone) and the
bytes the same samples take as `--call-graph dwarf` records (the kernel
callchain as it was, 8,192 stack bytes, the architecture's registers: the
record size perf's kernel writes, `perfdata::dwarf_sample_bytes`). The runs:
the scenario suite's shallow and deep guests, two CPUs with threads, and one
guest recursing 30 to 1,000 deep (how each grows with depth).

Usage: scripts/bench-perf-data.py [path/to/unwindlab]   (make bench-perf-data)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/unwindlab")

SUITE = [
    "basic-x86_64",
    "basic-aarch64",
    "basic-s390x",
    "dynamic-basic-x86_64",
    "threads-two-cpus-aarch64",
    "lazy-binding-x86_64",
    "stale-after-munmap-x86_64",
]


def run(scenario_path, tmp):
    data = os.path.join(tmp, "perf.data")
    out = subprocess.run([BIN, "run", scenario_path, "--perf-data", data, "--json"],
                         check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    s = report["summary"]
    judged = max(s["judged"], 1)
    return {
        "samples": s["judged"],
        "depth": max((len(x["truth"]) for x in report["samples"]), default=0),
        "file": os.path.getsize(data) / judged,
        "buffers": s["bytes_written"] / judged,
        "dwarf": s["bytes_copy_baseline"] / judged,
    }


def row(name, r):
    return (f"| {name} | {r['samples']:,} | {r['depth']} | {r['file']:,.0f} | {r['buffers']:,.0f} | "
            f"{r['dwarf']:,.0f} | **{r['dwarf'] / r['buffers']:.1f}×** |")


def main():
    header = ("| run | samples | deepest true stack | perf.data bytes / sample | ring-buffer bytes / sample "
              "(samples + deferred records) | `--call-graph dwarf` bytes / sample | dwarf / deferred |\n"
              "|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        print(header)
        for name in SUITE:
            print(row(name, run(os.path.join(ROOT, "scenarios", name + ".json"), tmp)))
        base = json.load(open(os.path.join(ROOT, "scenarios/basic-x86_64.json")))
        for depth in (30, 100, 300, 1000):
            s = dict(base)
            s["name"] = f"recurse-{depth}"
            s["guests"] = [dict(base["guests"][0], path=os.path.join(ROOT, "guests/bin/x86_64/lab-v3"),
                                args=["recurse", str(depth)])]
            s.pop("expect", None)
            path = os.path.join(tmp, f"recurse-{depth}.json")
            with open(path, "w") as f:
                json.dump(s, f)
            print(row(f"x86-64 recursion {depth} deep", run(path, tmp)))


if __name__ == "__main__":
    main()
