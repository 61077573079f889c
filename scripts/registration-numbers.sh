#!/usr/bin/env bash
# Exact / truncated / wrong stacks per .sframe registration interface
# (issue 15), with the frame-pointer fallback on and off, for the dynamic
# guest (lab-dyn plugin 2, on its lab root) and two Debian programs (sort,
# gzip, each in a lab root made by `unwindlab sysroot` from the Debian
# programs cache), on x86-64, AArch64 and s390x. Every cell is one
# deterministic `unwindlab run` of a scenario written here: perf sampling
# every 211 instructions, kernel.registration exec | loader-prctl |
# loader-syscall, kernel.unwinders [sframe, fp] or [sframe]. Prints the
# Markdown table of BENCHMARKS.md. Needs a release build and `make deps`.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache=${UNWINDLAB_DEBIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/unwindlab/debian}
unwindlab=${UNWINDLAB:-$repo/target/release/unwindlab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$repo" "$cache" "$unwindlab" "$work" <<'PY'
import json, re, subprocess, sys
repo, cache, unwindlab, work = sys.argv[1:]
arches = [("x86_64", "amd64"), ("aarch64", "arm64"), ("s390x", "s390x")]
interfaces = ["exec", "loader-prctl", "loader-syscall"]
unwinders = [("on", ["sframe", "fp"]), ("off", ["sframe"])]

def root_for(program, debarch):
    root = f"{work}/root-{program}-{debarch}"
    subprocess.run([unwindlab, "sysroot", f"{cache}/root-{debarch}/usr/bin/{program}", "--prefix",
                    f"{cache}/root-{debarch}", "-o", root], check=True, stdout=subprocess.DEVNULL)
    with open(f"{root}/in.txt", "w") as f:
        f.write("".join(f"{(i * 7919) % 1000} line {i}\n" for i in range(300)))
    return root

print("| program | arch | registration | FP fallback | samples | exact | truncated | wrong |")
print("|---|---|---|---|---|---|---|---|")
for arch, debarch in arches:
    programs = [("lab-dyn plugin 2", f"{repo}/guests/root/{arch}/guests/lab-dyn", f"{repo}/guests/root/{arch}", ["plugin", "2"])]
    for program, args in [("sort", ["/in.txt"]), ("gzip", ["-c", "/in.txt"])]:
        root = root_for(program, debarch)
        programs.append((f"{program} {' '.join(args)}", f"{root}/usr/bin/{program}", root, args))
    for label, path, root, args in programs:
        for interface in interfaces:
            for fallback, order in unwinders:
                scenario = {
                    "name": "registration-numbers",
                    "description": f"{label} on {arch}, registration {interface}, FP fallback {fallback}",
                    "machine": {"arch": arch, "cpus": 1},
                    "guests": [{"name": "p", "path": path, "root": root, "args": args}],
                    "tracers": [{"kind": "perf", "name": "perf", "period": 211}],
                    "kernel": {"registration": interface, "unwinders": order},
                }
                file = f"{work}/scenario.json"
                with open(file, "w") as f:
                    json.dump(scenario, f)
                out = subprocess.run([unwindlab, "run", file], capture_output=True, text=True, check=True).stdout
                m = re.search(r"samples: (\d+) taken, \d+ judged: (\d+) exact, (\d+) truncated, (\d+) wrong", out)
                samples, exact, truncated, wrong = map(int, m.groups())
                pct = lambda n: f"{n} ({100 * n / samples:.0f} %)"
                print(f"| {label} | {arch.replace('_', '-')} | {interface} | {fallback} | {samples} | {pct(exact)} | {pct(truncated)} | {pct(wrong)} |")
PY
