#!/bin/sh
# Fails if the source files of a crate import each other, directly or
# around a longer cycle: `use` items and inline paths that start with
# `crate::`, `super::`, `self::` or a child module are resolved to the file
# that defines the module they name (the longest module prefix), and every
# strongly connected group of more than one file is reported. A `mod x;`
# declaration is not an import; inline `mod x { … }` blocks (tests) count as
# part of their file. Comments are ignored, so intra-doc links do not count.
# It also fails if a lower layer imports a higher one (LAYERS below: emu's
# machine knows nothing of the Linux it runs), and, for the crates in
# GROUPED, if the files and folders of each of their folders (`linux/fs`,
# `linux/emulator.rs`, `machine/arch`, …) import each other around a cycle.
#
#   scripts/import-cycles.sh [crate dir …]   (default: every crate of the workspace)
set -eu
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
    # The workspace's members, as Cargo.toml lists them, and the root package.
    # shellcheck disable=SC2046
    set -- . $(sed -n '/^members/{s/.*\[//;s/\].*//;s/[",]/ /g;p}' Cargo.toml)
fi
exec python3 - "$@" <<'PY'
import os
import re
import sys


def modules(src):
    """Module path (tuple) -> file, for the files below `src`."""
    out = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                key = ()
            elif rel[-1] == "mod":
                key = tuple(rel[:-1])
            else:
                key = tuple(rel)
            # A binary's main.rs and the library share names only by accident.
            if key == () and () in out and name == "main.rs":
                continue
            out[key] = path
    return out


def strip(text):
    """The code without comments and string contents."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = []
    for line in text.split("\n"):
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        line = re.sub(r"//.*", "", line)
        lines.append(line)
    return lines


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (as segment lists)."""
    tree = tree.strip()
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{" and depth == 0:
            start = i
        depth += ch == "{"
        depth -= ch == "}"
    if start is None:
        path = re.sub(r"\s+as\s+\w+$", "", tree)
        return [[s for s in path.split("::") if s]]
    prefix = [s for s in tree[:start].split("::") if s]
    inner, parts, depth, cur = tree[start + 1 : tree.rindex("}")], [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        if part.strip():
            out += [prefix + p for p in expand(part)]
    return out


def resolve(mods, here, segments):
    """The module a path names, as the longest prefix that is a module."""
    head, rest = segments[0], segments[1:]
    if head == "crate":
        base = ()
    elif head == "self":
        base = here
    elif head == "super":
        base = here
        while head == "super":
            base = base[:-1]
            if rest and rest[0] == "super":
                head, rest = rest[0], rest[1:]
            else:
                break
    elif here + (head,) in mods:
        base, rest = here + (head,), rest
    else:
        return None
    for seg in rest:
        if base + (seg,) in mods:
            base = base + (seg,)
        else:
            break
    return base


def imports(mods, key, path):
    """Modules the file at `path` (module `key`) refers to."""
    lines = strip(open(path, encoding="utf-8").read())
    # Children declared by `mod NAME;`: inline paths starting with one of
    # them (`x86_64::X86_64`) are imports of that child.
    children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", "\n".join(lines), re.M))
    heads = "|".join(["crate", "super", "self"] + sorted(children))
    inline = re.compile(r"(?<![\w:.])(?:" + heads + r")(?:::\w+)+")
    deps = set()
    stack = []  # inline modules: (module path, brace depth when opened)
    depth = 0
    statement = None
    for line in lines:
        here = stack[-1][0] if stack else key
        m = re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*\{", line)
        if m:
            stack.append((here + (m.group(3),), depth))
        if statement is not None or re.match(r"\s*(pub(\([^)]*\))?\s+)?use\s", line):
            statement = (statement or "") + " " + line
            if ";" in line:
                body = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?use\s+", "", statement.strip()).rstrip(";").strip()
                for segs in expand(body):
                    if segs and segs[0] not in ("std", "core", "alloc"):
                        target = resolve(mods, here, segs)
                        if target is not None:
                            deps.add(target)
                statement = None
        else:
            for m in inline.finditer(line):
                segs = m.group(0).split("::")
                target = resolve(mods, key if segs[0] in children else here, segs)
                if target is not None:
                    deps.add(target)
        depth += line.count("{") - line.count("}")
        while stack and depth <= stack[-1][1]:
            stack.pop()
    return deps


def cycles(graph):
    """Strongly connected groups of more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# Folders of a crate that must not import another folder of it: (crate,
# lower folder, higher folder), paths below the crate's src/.
LAYERS = [("emu", "machine", "linux")]
# Crates whose folders' entries (a file, or a folder taken as one) must not
# import each other around a cycle either.
GROUPED = ["emu"]


def group(src, path):
    """`src/a/b/c.rs` -> `a/b`; `src/a/b.rs` -> `a/b.rs`; `src/a.rs` -> `a.rs`."""
    parts = os.path.relpath(path, src).split(os.sep)
    return "/".join(parts[:2])

failed = False
for crate in sys.argv[1:]:
    src = os.path.join(crate, "src")
    if not os.path.isdir(src):
        continue
    mods = modules(src)
    graph = {}
    for key, path in mods.items():
        deps = {mods[d] for d in imports(mods, key, path) if d in mods and mods[d] != path}
        graph[path] = deps
    for knot in cycles(graph):
        failed = True
        print(f"{crate}: import cycle among " + ", ".join(knot))
        for a in knot:
            for b in sorted(graph[a]):
                if a < b and a in graph.get(b, ()):
                    print(f"  {a} <-> {b} (import each other)")
    if os.path.normpath(crate) in GROUPED:
        groups = {}
        for a, deps in graph.items():
            groups.setdefault(group(src, a), set())
            for b in deps:
                if group(src, a) != group(src, b):
                    groups[group(src, a)].add(group(src, b))
        for cycle in cycles(groups):
            failed = True
            print(f"{crate}: folders' entries import each other around a cycle: " + ", ".join(cycle))
    for name, lower, higher in LAYERS:
        if os.path.normpath(crate) != name:
            continue
        low, high = os.path.join(src, lower) + os.sep, os.path.join(src, higher) + os.sep
        for a in sorted(graph):
            for b in sorted(graph[a]):
                if a.startswith(low) and b.startswith(high):
                    failed = True
                    print(f"{crate}: {a} imports {b}: {lower}/ must not import {higher}/")
if failed:
    sys.exit(1)
print("no import cycles (of files, and of folders' entries in " + ", ".join(GROUPED) + "), no layer imported from below, in: " + " ".join(sys.argv[1:]))
PY
