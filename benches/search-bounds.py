#!/usr/bin/env python3
"""What heavy searches cost `kubeplace placement serve`, and what they keep waiting.

    cargo build --release
    python3 benches/search-bounds.py [--kubeplace target/release/kubeplace] [--trees 1500]
                                     [--other OTHER-KUBEPLACE-BINARY]

Serves the cloud of benches/placement-vs-real.py (--trees compute nodes with NUMA cells and
SR-IOV functions, about 4.5 providers a tree: 1,500 trees are about 6,700 providers) and,
for each binary given (--kubeplace, and --other to set another build beside it):

1. one unlimited query of 51 request groups (MEMORY_MB, and 50 numbered groups of one VCPU
   each, group_policy=none: 2^50 ways over each compute node's two NUMA cells):
   its status, time and the server's peak resident memory (VmHWM) after it;
2. the same query from 4 clients at once: their statuses and times, and the peak after;
3. while those 4 run again, 20 writes (`PUT /traits/CUSTOM_...`) and 20 reads
   (`GET /resource_providers?name=...`) one after the other: their slowest and median times.

Prints one table row per binary; the load is what is named above.
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("vs_real", ROOT / "benches" / "placement-vs-real.py")
vs_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vs_real)

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
WIDE = "/allocation_candidates?resources=MEMORY_MB:512" + "".join(
    f"&resources{i}=VCPU:1" for i in range(1, 51)
) + "&group_policy=none"


def call(base, method, path, timeout=120):
    req = urllib.request.Request(base + path, method=method, headers=HEADERS)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    return status, time.monotonic() - started


def peak_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(binary, cloud_file):
    proc = subprocess.Popen(
        [binary, "placement", "serve", "-f", cloud_file, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k != "KUBEPLACE_PLACEMENT_TOKEN"},
    )
    try:
        line = proc.stdout.readline()
        base = "http://" + line.strip().rsplit("http://", 1)[1]
        loaded = rss_mib(proc.pid)
        one_status, one_time = call(base, "GET", WIDE)
        one_peak = peak_mib(proc.pid)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            four = list(pool.map(lambda _: call(base, "GET", WIDE), range(4)))
        four_peak = peak_mib(proc.pid)
        # Writes and reads one after the other while four heavy searches run.
        writes, reads = [], []
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            heavy = [pool.submit(call, base, "GET", WIDE) for _ in range(4)]
            time.sleep(0.2)
            for i in range(20):
                writes.append(call(base, "PUT", f"/traits/CUSTOM_BENCH_{i}")[1])
                reads.append(call(base, "GET", "/resource_providers?name=cn000001")[1])
            during = [h.result() for h in heavy]
        return {
            "loaded_mib": loaded,
            "one": (one_status, one_time, one_peak),
            "four": (sorted(s for s, _ in four), max(t for _, t in four), four_peak),
            "during": sorted(s for s, _ in during),
            "writes": (max(writes), statistics.median(writes)),
            "reads": (max(reads), statistics.median(reads)),
        }
    finally:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--other", help="another kubeplace binary to measure beside it")
    ap.add_argument("--trees", type=int, default=1500)
    args = ap.parse_args()
    docs = vs_real.cloud(args.trees)
    with tempfile.TemporaryDirectory() as tmp:
        cloud_file = os.path.join(tmp, "cloud.json")
        pathlib.Path(cloud_file).write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        print(f"{len(docs)} providers in {args.trees} trees; query: 51 groups, no limit\n")
        print("| binary | loaded MiB | 1 query: status, s, peak MiB | 4 at once: statuses, slowest s, peak MiB "
              "| during 4: statuses | write slowest / median ms | read slowest / median ms |")
        print("|---|---|---|---|---|---|---|")
        for binary in [args.kubeplace] + ([args.other] if args.other else []):
            m = measure(binary, cloud_file)
            one, four = m["one"], m["four"]
            print(f"| {binary} | {m['loaded_mib']:.0f} | {one[0]}, {one[1]:.2f}, {one[2]:.0f} "
                  f"| {','.join(map(str, four[0]))}, {four[1]:.2f}, {four[2]:.0f} "
                  f"| {','.join(map(str, m['during']))} "
                  f"| {m['writes'][0] * 1000:.0f} / {m['writes'][1] * 1000:.1f} "
                  f"| {m['reads'][0] * 1000:.0f} / {m['reads'][1] * 1000:.1f} |", flush=True)


if __name__ == "__main__":
    main()
