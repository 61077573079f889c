#!/usr/bin/env python3
"""How long the explorer takes to open as runs grow (issue 28): pages of
about 5,000 and 50,000 events (the x86-64 lab guest recursing 300 deep,
sampled every 124 and every 12 instructions), each opened in headless
Chromium over the DevTools pipe (scripts/cdp.py) three times, alternating
the sizes, side by side in one run. Measured in the page:

* open: from navigation start to the explorer's first drawing done (the
  data parsed, the checkpoints built, the first event drawn);
* seek: End then Home pressed (the state rebuilt from a checkpoint and the
  timeline, list and panels redrawn), per key;
* step: 100 presses of → , per key.

Prints a Markdown table (BENCHMARKS.md "EXPLORER") with the page sizes,
the medians and the 50k/5k ratios. A benchmark, not a test: it asserts
nothing. Usage: scripts/bench-explore.py target/release/unwindlab"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import ENV  # noqa: E402
from cdp import Chromium  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = 3


def page(binary, tmp, period):
    """The explorer page of the lab guest sampled every `period`
    instructions: its path and its number of events."""
    scenario = {
        "name": f"explorer-bench-{period}", "description": "the explorer's benchmark",
        "machine": {"arch": "x86_64", "cpus": 1},
        "guests": [{"name": "lab", "path": os.path.join(ROOT, "guests/bin/x86_64/lab-v3"), "args": ["recurse", "300"]}],
        "tracers": [{"kind": "perf", "name": "perf", "period": period}],
        "kernel": {"profile": "sframe-v13"},
    }
    path = os.path.join(tmp, f"s{period}.json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    html = os.path.join(tmp, f"p{period}.html")
    subprocess.run([binary, "run", path, "--explore", html], check=True, env=ENV,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = open(html).read()
    data = json.loads(text[text.index('id="data">') + 10:text.index("</script>")])
    return html, len(data["ev"])


KEY = "document.dispatchEvent(new KeyboardEvent('keydown', {key: %r}))"


def measure(b, html):
    """(open, seek, step) in ms for one opening of `html`."""
    b.open("file://" + html, timeout=300)
    opened = b.eval("window.explorer.openMs")
    seek = b.eval("(() => { const t = performance.now(); %s; %s; return (performance.now() - t) / 2; })()"
                  % (KEY % "End", KEY % "Home"))
    step = b.eval("(() => { const t = performance.now(); for (let i = 0; i < 100; i++) %s; "
                  "return (performance.now() - t) / 100; })()" % (KEY % "ArrowRight"))
    return opened, seek, step


def main():
    binary = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        pages = [page(binary, tmp, p) for p in (124, 12)]
        results = {html: [] for html, _ in pages}
        b = Chromium(os.path.join(tmp, "profile"))
        try:
            for _ in range(RUNS):
                for html, _ in pages:
                    results[html].append(measure(b, html))
        finally:
            b.close()
        rows = []
        for html, events in pages:
            size = os.path.getsize(html)
            med = [statistics.median(r[k] for r in results[html]) for k in range(3)]
            rows.append((events, size, med))
    print(f"Explorer pages, opened in headless Chromium {RUNS} times each, alternating; medians:\n")
    print("| events | page | bytes/event | open | open/event | seek (End, Home) | step (→) |")
    print("|---|---|---|---|---|---|---|")
    for events, size, (opened, seek, step) in rows:
        print(f"| {events:,} | {size / 2**20:.2f} MiB | {size / events:.0f} | {opened:.0f} ms | "
              f"{1000 * opened / events:.1f} µs | {seek:.1f} ms | {step:.1f} ms |")
    (e1, s1, m1), (e2, s2, m2) = rows
    print(f"\n50k/5k: events ×{e2 / e1:.1f}, page ×{s2 / s1:.1f}, open ×{m2[0] / m1[0]:.1f}, "
          f"seek ×{m2[1] / m1[1]:.1f}, step ×{m2[2] / m1[2]:.1f}")


if __name__ == "__main__":
    main()
