#!/usr/bin/env python3
"""Wide device trees: kubeplace's and real Placement's allocation candidates over HTTP.

    python3 -m venv V && V/bin/pip install 'openstack-placement>=16,<17'
    cargo build --release
    PLACEMENT_VENV=V python3 benches/wide-vs-real.py [--timeout 60] [--devices 8 16 64]

The cloud and queries of the wide rows of `cargo bench -p kubeplace-core --bench placement --
wide`: 4 compute nodes with 2 NUMA cells (VCPU, MEMORY_MB, HW_NUMA_ROOT) holding 8, 16 or 64
one-unit CUSTOM_ACCEL devices in all (every fourth with CUSTOM_FAST); `VCPU:1` and 1, 4 or 8
numbered groups of `CUSTOM_ACCEL:1`, group_policy isolate or none, or isolate with the
groups kept under one NUMA cell (`same_subtree`). Each query with `limit=1000`, as Nova sends
it. Both servers answer over HTTP to the same Python client (keep-alive, body read whole):
`kubeplace placement serve`, and Placement 16 through hack/placement-oracle/oracle.py serve
(SQLite, Python's WSGI server, Placement's default configuration: no
max_allocation_candidates). A Placement answer slower than --timeout is reported as such and
its server restarted (it would go on computing it).
"""
import argparse
import http.client
import importlib.util
import json
import os
import pathlib
import socket
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("api_vs_real", ROOT / "benches" / "placement-api-vs-real.py")
api = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api)


def rp(name, parent, inventories, traits):
    spec = {"inventories": {c: {"total": t} for c, t in inventories.items()}}
    if parent:
        spec["parent"] = parent
    if traits:
        spec["traits"] = traits
    return {"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
            "metadata": {"name": name}, "spec": spec}


def wide_cloud(devices):
    out = []
    for n in range(4):
        cn = f"cn{n}"
        out.append(rp(cn, None, {"DISK_GB": 1000}, ["COMPUTE_NODE"]))
        for cell in range(2):
            numa = f"{cn}-numa{cell}"
            out.append(rp(numa, cn, {"VCPU": 32, "MEMORY_MB": 65536}, ["HW_NUMA_ROOT"]))
            for d in range(devices // 2):
                out.append(rp(f"{numa}-dev{d:02d}", numa, {"CUSTOM_ACCEL": 1},
                              ["CUSTOM_FAST"] if d % 4 == 0 else []))
    return out


def wide_queries():
    out = []
    for groups in (1, 4, 8):
        q = "resources=VCPU:1" + "".join(f"&resources{i}=CUSTOM_ACCEL:1" for i in range(1, groups + 1))
        for policy in ("isolate", "none"):
            out.append((f"{groups} groups, {policy}", f"{q}&group_policy={policy}"))
        members = ",".join(str(i) for i in range(1, groups + 1))
        out.append((f"{groups} groups, same_subtree",
                    f"{q}&group_policy=isolate&required_N=HW_NUMA_ROOT&same_subtree=_N,{members}"))
    return out


def timed(addr, path, runs, timeout):
    """(status, candidates, median ms), or None when an answer takes longer than timeout."""
    conn = http.client.HTTPConnection(*addr, timeout=timeout)
    times, status, n = [], 0, 0
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            status, body = api.get(conn, path)
            times.append((time.perf_counter() - t0) * 1e3)
            if status == 200:
                n = len(json.loads(body)["allocation_requests"])
    except (socket.timeout, TimeoutError):
        return None
    return status, n, statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--devices", type=int, nargs="*", default=[8, 16, 64])
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per query on Placement (kubeplace: 5x)")
    args = ap.parse_args()
    print(f"load averages at start: {os.getloadavg()}")
    print("\n| devices | query, limit=1000 | candidates (kubeplace / Placement) | Placement ms | kubeplace ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for devices in args.devices:
            path = pathlib.Path(tmp) / f"wide-{devices}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": wide_cloud(devices)}))
            kubeplace, k_addr, _ = api.start_kubeplace(args.kubeplace, [str(path)])
            placement = None
            try:
                for name, q in wide_queries():
                    if placement is None:
                        placement, p_addr, _ = api.start_placement([str(path)], None)
                    target = "/allocation_candidates?" + q + "&limit=1000"
                    k = timed(k_addr, target, args.repeat * 5, args.timeout)
                    p = timed(p_addr, target, args.repeat, args.timeout)
                    if p is None:
                        placement.kill()
                        placement.wait()
                        placement = None
                        print(f"| {devices} | {name} | {k[1]} / – | > {args.timeout * 1e3:.0f} | {k[2]:.2f} | > {args.timeout * 1e3 / k[2]:.0f}x |",
                              flush=True)
                        ratios.append(args.timeout * 1e3 / k[2])
                        continue
                    print(f"| {devices} | {name} | {k[1]} / {p[1]} | {p[2]:.1f} | {k[2]:.2f} | {p[2] / k[2]:.0f}x |",
                          flush=True)
                    ratios.append(p[2] / k[2])
            finally:
                kubeplace.kill()
                if placement is not None:
                    placement.terminate()
                    placement.wait(timeout=60)
    print(f"\ngeometric mean ratio (timeouts counted at the timeout): {statistics.geometric_mean(ratios):.0f}x")
    print(f"load averages at end: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
