#!/usr/bin/env python3
"""How many series kubeplace's /metrics holds over the 10k-tree cloud, per capacity setting.

Writes the cloud of benches/placement-vs-real.py (and benches/cluster/: compute nodes with
two NUMA cells and one or two SR-IOV functions, ten sharing DISK_GB pools; 10,000 trees are
45,010 providers) as manifests, serves it with `kubeplace placement serve --metrics-addr`
under each `--capacity-metrics` setting (the same capacity code the operator's leader
reports with), scrapes /metrics and prints the series, the bytes, the scrape's time and the
server's peak resident memory before and after scraping (VmHWM).

    cargo build --release
    python3 benches/metrics-series.py --trees 10000

`--kubeplace PATH` picks another binary (target/debug/kubeplace: the same counts, slower
scrapes).
"""
import argparse
import importlib.util
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("placement_vs_real", ROOT / "benches" / "placement-vs-real.py")
pvr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pvr)

SETTINGS = [
    ("default (hosts, at most 20,000)", []),
    ("off (zones only)", ["--capacity-metrics", "off"]),
    ("every flag on (providers, no cap)", ["--capacity-metrics", "providers", "--capacity-metrics-max-hosts", "1000000"]),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_mib(pid):
    """The process's peak resident memory so far (VmHWM), in MiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def families(text):
    """Series per metric family (a histogram's or counter's suffixes folded in)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        for suffix in ("_bucket", "_count", "_sum", "_total", "_created"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        out[name] = out.get(name, 0) + 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=10000)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifests = []
        for first in range(0, max(args.trees, 1), pvr.TREES_PER_FILE):
            path = pathlib.Path(tmp) / ("cloud-%03d.json" % (first // pvr.TREES_PER_FILE))
            items = pvr.cloud(min(args.trees, first + pvr.TREES_PER_FILE), first)
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            manifests += ["-f", str(path)]
        print(f"{args.trees} trees; {args.kubeplace}")
        print(f"{'setting':36} {'series':>9} {'capacity':>9} {'bytes':>11} {'scrape ms':>10} {'peak MiB before/after':>22}")
        for name, flags in SETTINGS:
            port = free_port()
            server = subprocess.Popen(
                [args.kubeplace, "placement", "serve", "--listen", "127.0.0.1:0",
                 "--metrics-addr", f"127.0.0.1:{port}", *manifests, *flags],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )
            try:
                line = server.stdout.readline()
                if "listening on" not in line:
                    sys.exit(f"kubeplace placement serve said {line!r}")
                url = f"http://127.0.0.1:{port}/metrics"
                before = peak_mib(server.pid)
                urllib.request.urlopen(url).read()  # the first scrape warms nothing up; timed below
                started = time.monotonic()
                text = urllib.request.urlopen(url).read().decode()
                took = (time.monotonic() - started) * 1000
                after = peak_mib(server.pid)
            finally:
                server.terminate()
                server.wait()
            fams = families(text)
            total = sum(fams.values())
            capacity = sum(n for f, n in fams.items()
                           if f.startswith("openstack_placement_") or f.startswith("kubeplace_zone_")
                           or f.startswith("kubeplace_capacity_"))
            print(f"{name:36} {total:>9,} {capacity:>9,} {len(text):>11,} {took:>10.0f} {before:>10.0f} / {after:<9.0f}")


if __name__ == "__main__":
    main()
