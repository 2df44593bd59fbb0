#!/usr/bin/env python3
"""Lists import cycles between the modules of each crate of the workspace.

Two granularities: the top-level modules of a crate (`admission` ↔ `status`), and the
files of one folder (`placement/packed_tree.rs` ↔ `placement/inventory.rs`). Reads
`crate::…`, `super::…` and `self::…` paths in the source. Exits 1 when any cycle exists.

    hack/import-cycles.py            # every crate of the workspace
    hack/import-cycles.py src        # one source root
    hack/import-cycles.py --map      # also print which top-level module uses which
    hack/import-cycles.py --climbs   # also list imports that climb: a module using what an
                                     # ancestor module's own file defines (tests left out)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{)?")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^}]*)\}", re.S)


def modules(src):
    """Module path (tuple) of every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            out[os.path.join(dirpath, f)] = tuple(parts)
    return out


def references(text, here):
    """Module paths a file names, resolved against its own module path."""
    refs = []
    for m in GROUP.finditer(text):
        base = [s for s in m.group(2).split("::") if s]
        for item in m.group(3).split(","):
            item = item.strip().split(" as ")[0]
            if item == "self":
                refs.append((m.group(1), base))
            elif item:
                refs.append((m.group(1), base + item.split("::")))
    for m in PATH.finditer(text):
        if m.group(3):
            continue
        refs.append((m.group(1), m.group(2).strip(":").split("::")))
    for anchor, segs in refs:
        if anchor == "crate":
            base = ()
        elif anchor == "super":
            base = here[:-1]
        else:
            base = here
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
        yield base + tuple(segs)


def cycles(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def without_tests(text):
    """A file's text before its test module: what tests import is not the file's map."""
    at = text.find("#[cfg(test)]\nmod ")
    return text if at < 0 else text[:at]


TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;")


def test_modules(mods):
    """Modules of their own file declared under `#[cfg(test)]`: tests, left out of climbs."""
    out = set()
    for path, here in mods.items():
        for m in TEST_MODULE.finditer(open(path, encoding="utf-8").read()):
            out.add(here + (m.group(1),))
    return out


def check(src):
    mods = modules(src)
    known = set(mods.values())
    tests = test_modules(mods)
    top, folder, climbs = {}, {}, []
    for path, here in mods.items():
        text = open(path, encoding="utf-8").read()
        for ref in references(without_tests(text), here) if here not in tests else ():
            while ref and ref not in known:
                ref = ref[:-1]
            if ref and len(ref) < len(here) and here[: len(ref)] == ref:
                climbs.append(("::".join(here), "::".join(ref)))
        for ref in references(text, here):
            while ref and ref not in known:
                ref = ref[:-1]
            if not ref or ref == here:
                continue
            # Top-level modules of the crate.
            if here and ref[0] != here[0]:
                top.setdefault(here[0], set()).add(ref[0])
            # Files of one folder: the first segments where the two paths part.
            k = 0
            while k < min(len(here), len(ref)) and here[k] == ref[k]:
                k += 1
            if k < len(here) and k < len(ref) and k > 0:
                a, b = here[: k + 1], ref[: k + 1]
                folder.setdefault(a, set()).add(b)
    found = [("::".join(c[0][:-1]) or "crate", ["::".join(m) for m in c]) for c in cycles(folder)]
    found += [("crate", c) for c in cycles(top)]
    return found, top, sorted(set(climbs))


def main():
    args = sys.argv[1:]
    show_map = "--map" in args
    show_climbs = "--climbs" in args
    args = [a for a in args if a not in ("--map", "--climbs")]
    roots = args or [
        os.path.join(ROOT, "src"),
        *sorted(
            os.path.join(ROOT, "crates", c, "src")
            for c in os.listdir(os.path.join(ROOT, "crates"))
        ),
    ]
    bad = 0
    for src in roots:
        found, top, climbs = check(src)
        if show_map:
            print(f"{os.path.relpath(src, ROOT)}:")
            for module in sorted(top):
                print(f"  {module} -> {', '.join(sorted(top[module]))}")
        if show_climbs:
            for module, ancestor in climbs:
                print(f"{os.path.relpath(src, ROOT)}: {module} climbs to {ancestor}")
            print(f"{os.path.relpath(src, ROOT)}: {len(climbs)} imports climb")
        for where, cycle in found:
            bad += 1
            print(f"{os.path.relpath(src, ROOT)}: {where}: {' ↔ '.join(cycle)}")
    print(f"{bad} import cycles")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
