#!/usr/bin/env python3
"""kubeplace's candidate search against real Placement, on the same cloud and queries.

Generates the cloud of benches/placement.rs (compute nodes with two NUMA cells and one or
two SR-IOV physical functions, ten sharing DISK_GB pools) as kubeplace manifests, loads it
into Placement 16 (SQLite, 127.0.0.1, through hack/placement-oracle/oracle.py), times the
benchmark's queries on both sides in one run, and prints kubeplace's speed as a ratio.

    python3 -m venv V && V/bin/pip install 'openstack-placement>=16,<17'
    cargo build --release
    PLACEMENT_VENV=V python3 benches/placement-vs-real.py --trees 10000 \
        --state-dir ~/.cache/kubeplace/placement-10k

Loading is Placement's slow part (tens of milliseconds per provider: 10,000 trees are about
45,000 providers and take on the order of 25 minutes on a 2-core machine); `--trees 1000`
gives a first figure in a few minutes. With `--state-dir DIR` the loaded Placement database is
kept in DIR beside the sha256 of the manifest files it holds; a later run with the same
`--trees` (hence byte-identical files) skips the load and re-times both sides in a few minutes.
Another `--trees` in the same DIR replaces the database, so keep one DIR per size.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
NS = uuid.uuid5(uuid.NAMESPACE_DNS, "resourceproviders.kubeplace.io")
# Trees per manifest file. kubeplace reads each file within a YAML parser budget of 250,000
# nodes (about 1,900 of these trees), so a large cloud is written as several files, and both
# sides are given the same files.
TREES_PER_FILE = 1000

QUERIES = [
    ("plain", "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"),
    ("required-forbidden", "resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_GOLD"),
    ("any-of", "resources=VCPU:1,MEMORY_MB:512&required=in:CUSTOM_A,CUSTOM_B"),
    ("isolate-two-groups", "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy=isolate"),
]


def agg(i):
    return "00000000-0000-4000-8000-%012d" % (i % 10)


def rp(name, parent=None, inventories=None, traits=None, aggregates=None):
    spec = {}
    if parent:
        spec["parent"] = parent
    if inventories:
        spec["inventories"] = inventories
    if traits:
        spec["traits"] = traits
    if aggregates:
        spec["aggregates"] = aggregates
    return {"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider", "metadata": {"name": name}, "spec": spec}


def inv(total, ratio=1.0):
    return {"total": total, "allocationRatio": ratio}


def cloud(trees, first=0):
    """The sharing pools (with the first trees only) and trees first..trees-1."""
    docs = []
    if first == 0:
        for s in range(10):
            docs.append(rp(f"pool-{s}", inventories={"DISK_GB": inv(100000)}, traits=["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"], aggregates=[agg(s)]))
    for i in range(first, trees):
        cn = "cn%06d" % i
        traits = ["COMPUTE_NODE"]
        if i % 2 == 0:
            traits.append("HW_CPU_X86_AVX2")
        if i % 10 == 3:
            traits.append("CUSTOM_GOLD")
        if i % 3 == 0:
            traits.append("CUSTOM_A")
        if i % 3 == 1:
            traits.append("CUSTOM_B")
        docs.append(rp(cn, inventories={"DISK_GB": inv(2000)} if i % 5 else None, traits=traits, aggregates=[agg(i)]))
        for cell in range(2):
            numa = f"{cn}-numa{cell}"
            docs.append(rp(numa, parent=cn, inventories={"VCPU": inv(32, 4.0), "PCPU": inv(16), "MEMORY_MB": inv(131072, 1.5)}))
            if cell == 0 or i % 2 == 1:
                docs.append(rp(f"{numa}-pf0", parent=numa, inventories={"SRIOV_NET_VF": inv(8)}, traits=["HW_NIC_SRIOV", f"CUSTOM_PHYSNET_{i % 4}"]))
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per query on each side")
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--state-dir", help="keep the loaded Placement database here and reuse it "
                                        "when it holds this cloud (see above)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifests = []
        for first in range(0, max(args.trees, 1), TREES_PER_FILE):
            manifest = pathlib.Path(tmp) / ("cloud-%03d.json" % (first // TREES_PER_FILE))
            items = cloud(min(args.trees, first + TREES_PER_FILE), first)
            manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            manifests.append(str(manifest))
        queries = []
        for name, q in QUERIES:
            queries.append((name, q))
            queries.append((name + "/limit=50", q + "&limit=50"))
        qfile = pathlib.Path(tmp) / "queries.txt"
        qfile.write_text("\n".join(q for _, q in queries) + "\n")
        # kubeplace first: it answers in seconds, so a cloud it cannot read fails before the load.
        print("timing kubeplace …", file=sys.stderr, flush=True)
        kubeplace_ms = []
        for name, q in queries:
            res = subprocess.run(
                [args.kubeplace, "placement", "candidates", "-f", *manifests, "--query", q, "--time-repeat", str(max(args.repeat, 5))],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                sys.exit(f"kubeplace failed on {name} (exit {res.returncode}):\n{res.stderr}")
            kubeplace_ms.append(json.loads(res.stderr.strip().splitlines()[-1])["ms"])
        print(f"{args.trees} trees into Placement …", file=sys.stderr, flush=True)
        # The oracle reads YAML; JSON is YAML. Its progress goes to our stderr.
        oracle = [sys.executable, str(ROOT / "hack" / "placement-oracle" / "oracle.py"), "query"]
        for m in manifests:
            oracle += ["-f", m]
        oracle += ["--queries-file", str(qfile), "--time", "--repeat", str(args.repeat)]
        if args.state_dir:
            oracle += ["--state-dir", os.path.expanduser(args.state_dir)]
        out = subprocess.run(oracle, check=True, stdout=subprocess.PIPE, text=True).stdout
        placement_ms = [json.loads(line)["ms"] for line in out.splitlines() if line.startswith("{") and '"ms"' in line]
        if len(placement_ms) != len(queries):
            sys.exit(f"expected {len(queries)} timings from Placement, got {len(placement_ms)}")
        rows = [(name, p_ms, k_ms) for (name, _), p_ms, k_ms in zip(queries, placement_ms, kubeplace_ms)]
    print(f"{args.trees} trees, median of {args.repeat} runs per query (same machine, same run)")
    print(f"{'query':32} {'Placement ms':>14} {'kubeplace ms':>14} {'ratio':>10}")
    for name, p_ms, k_ms in rows:
        ratio = p_ms / k_ms if k_ms > 0 else float("inf")
        print(f"{name:32} {p_ms:14.1f} {k_ms:14.3f} {ratio:9.0f}x")
    print(f"geometric mean ratio: {statistics.geometric_mean([p / max(k, 1e-6) for _, p, k in rows]):.0f}x")


if __name__ == "__main__":
    main()
