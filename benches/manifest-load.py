#!/usr/bin/env python3
"""How long kubeplace takes to read a cloud from one manifest file, by size and format.

    cargo build --release
    python3 benches/manifest-load.py [--kubeplace target/release/kubeplace] [--repeat 3]

Writes the cloud of benches/placement-vs-real.py (compute nodes with NUMA cells and SR-IOV
functions, about 4.5 providers a tree) as one file of 1,000, 10,000 and 30,000 trees in JSON
(a `List`, as `kubectl get -o json` writes it) and in YAML, and times, median of --repeat:

- `kubeplace placement serve -f FILE` from start to its `listening` line (the file read,
  every object admitted into the store, the index built);
- `kubeplace apply -f FILE` to its exit (the same, plus printing a line per object).

A file whose every object is clean is read without recording where each value was written:
JSON with a JSON parser, YAML in the plain subset (quoted strings, decimal numbers, no anchors,
tags or block scalars; what this script writes) with a plain YAML parser. Any other file, and
one with a mistake in it, is read with the parser that records each value's line for the
messages.

Also prints the CPU seconds (user + system) of each timed run's process, which the load of a
shared machine changes less than the wall time.
"""
import argparse
import importlib.util
import json
import pathlib
import resource
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("vs_real", ROOT / "benches" / "placement-vs-real.py")
vs_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vs_real)


def to_yaml(items):
    """Block YAML, one document per object, without a YAML library."""
    def scalar(v):
        return json.dumps(v) if isinstance(v, str) else json.dumps(v)

    def emit(v, indent):
        pad = "  " * indent
        out = []
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, (dict, list)) and x:
                    out.append(f"{pad}{k}:")
                    out.extend(emit(x, indent + 1))
                else:
                    out.append(f"{pad}{k}: {scalar(x) if not isinstance(x, (dict, list)) else json.dumps(x)}")
        else:
            for x in v:
                if isinstance(x, dict):
                    inner = emit(x, indent + 1)
                    out.append(f"{pad}- {inner[0].strip()}")
                    out.extend(inner[1:])
                else:
                    out.append(f"{pad}- {scalar(x)}")
        return out

    return "".join("---\n" + "\n".join(emit(doc, 0)) + "\n" for doc in items)


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd, until_line):
    """Wall seconds and CPU seconds of one run (the CPU counted when the process is reaped)."""
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if until_line:
        line = proc.stdout.readline()
        took = time.perf_counter() - t0
        proc.kill()
        proc.wait()
        if "listening" not in line:
            raise SystemExit(f"{cmd}: no listening line: {line!r} {proc.stderr.read()[:500]}")
    else:
        out, err = proc.communicate()
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{cmd} exited {proc.returncode}: {err[:500]}")
    return took, children_cpu() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trees", type=int, nargs="*", default=[1000, 10000, 30000])
    args = ap.parse_args()
    print("| trees | providers | format | MB | serve s | apply s | serve CPU s | apply CPU s | MB/s (serve) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for trees in args.trees:
            items = vs_real.cloud(trees)
            for fmt in ("json", "yaml"):
                path = pathlib.Path(tmp) / f"cloud-{trees}.{fmt}"
                if fmt == "json":
                    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1))
                else:
                    path.write_text(to_yaml(items))
                mb = path.stat().st_size / 1e6
                serve = [timed([args.kubeplace, "placement", "serve", "--listen", "127.0.0.1:0", "-f", str(path)], True)
                         for _ in range(args.repeat)]
                apply = [timed([args.kubeplace, "apply", "-f", str(path)], False) for _ in range(args.repeat)]
                med = lambda runs, i: statistics.median(r[i] for r in runs)
                print(f"| {trees} | {len(items)} | {fmt} | {mb:.1f} | {med(serve, 0):.2f} | {med(apply, 0):.2f} "
                      f"| {med(serve, 1):.2f} | {med(apply, 1):.2f} | {mb / med(serve, 0):.0f} |", flush=True)


if __name__ == "__main__":
    main()
