#!/usr/bin/env python3
"""Prints, for each criterion group named, every function's mean time and its
ratio to the group's first function, from target/criterion (one run; the
target directory is $CARGO_TARGET_DIR when set, as cargo's)."""
import json, os, sys

target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.dirname(__file__), "..", "target")
root = os.path.join(target, "criterion")
for group in sys.argv[1:]:
    gdir = os.path.join(root, group)
    rows = []
    for fn in sorted(os.listdir(gdir)):
        est = os.path.join(gdir, fn, "new", "estimates.json")
        if os.path.exists(est):
            rows.append((fn, json.load(open(est))["mean"]["point_estimate"]))
    rows.sort(key=lambda r: (r[0] not in ("unwindlab", "deferred_requests"), r[0]))
    ref = rows[0][1]
    print(f"{group}:")
    for fn, ns in rows:
        print(f"  {fn:20s} {ns / 1e3:10.1f} µs   {ns / ref:5.2f}x of {rows[0][0]}")
