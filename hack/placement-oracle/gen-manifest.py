#!/usr/bin/env python3
"""Generate a synthetic kubeplace manifest for load and speed tests (stdlib only).

    gen-manifest.py --hosts 100 [--numa 2] [--shares 2] [--allocations 50] [--seed 1] > big.yaml

Each host is a root (COMPUTE_NODE, DISK_GB, some random traits, one aggregate)
with --numa NUMA children (VCPU, MEMORY_MB, maybe PCPU) and, on every other
host, an SR-IOV PF under numa0. --shares sharing DISK_GB providers
(MISC_SHARES_VIA_AGGREGATE) sit in the aggregates. Allocations land on random
NUMA cells, some of them above capacity. Output is deterministic for a seed.
"""
import argparse
import random

TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F", "HW_CPU_HYPERTHREADING",
          "COMPUTE_VOLUME_MULTI_ATTACH", "CUSTOM_GOLD", "CUSTOM_SILVER", "CUSTOM_RACK_A"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--numa", type=int, default=2)
    ap.add_argument("--shares", type=int, default=2)
    ap.add_argument("--aggregates", type=int, default=4)
    ap.add_argument("--allocations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    aggs = ["7f3e0000-0000-4000-8000-%012d" % i for i in range(a.aggregates)]
    docs = []
    numas = []

    def rp(name, spec):
        docs.append({"kind": "ResourceProvider", "name": name, "spec": spec})

    for h in range(a.hosts):
        host = "cn%05d" % h
        traits = ["COMPUTE_NODE"] + sorted(rnd.sample(TRAITS, rnd.randint(0, 3)))
        rp(host, {"traits": traits, "aggregates": [rnd.choice(aggs)],
                  "inventories": {"DISK_GB": {"total": rnd.choice([100, 500, 1000]), "reserved": 10}}})
        for n in range(a.numa):
            numa = "%s-numa%d" % (host, n)
            numas.append(numa)
            inv = {"VCPU": {"total": rnd.choice([8, 16, 32]), "allocationRatio": rnd.choice([1.0, 2.0, 4.0])},
                   "MEMORY_MB": {"total": rnd.choice([16384, 32768, 65536]), "reserved": 512,
                                 "stepSize": 256, "minUnit": 256}}
            if rnd.random() < 0.5:
                inv["PCPU"] = {"total": rnd.choice([4, 8])}
            rp(numa, {"parent": host, "traits": ["HW_NUMA_ROOT"], "inventories": inv})
        if h % 2 == 0 and a.numa:
            rp(host + "-numa0-pf0", {"parent": host + "-numa0",
                                     "traits": ["HW_NIC_SRIOV", rnd.choice(["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"])],
                                     "inventories": {"SRIOV_NET_VF": {"total": 8, "maxUnit": 4}}})
    for s in range(a.shares):
        rp("share%03d" % s, {"traits": ["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"],
                             "aggregates": [aggs[s % len(aggs)]],
                             "inventories": {"DISK_GB": {"total": 10000, "reserved": 100}}})

    out = []
    for d in docs:
        out.append("apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: %s\nspec:\n" % d["name"])
        s = d["spec"]
        if "parent" in s:
            out.append("  parent: %s\n" % s["parent"])
        if s.get("traits"):
            out.append("  traits: [%s]\n" % ", ".join(s["traits"]))
        if s.get("aggregates"):
            out.append("  aggregates: [%s]\n" % ", ".join(s["aggregates"]))
        if s.get("inventories"):
            out.append("  inventories:\n")
            for rc, inv in s["inventories"].items():
                out.append("    %s: {%s}\n" % (rc, ", ".join("%s: %s" % kv for kv in inv.items())))
        out.append("---\n")
    for i in range(min(a.allocations, len(numas)) if numas else 0):
        numa = rnd.choice(numas)
        vcpu = rnd.choice([1, 2, 4, 8, 64])  # 64 is above every capacity: over-capacity usage
        out.append("apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: vm%05d\n"
                   "spec:\n  consumer: 44444444-0000-4000-8000-%012d\n  allocations:\n"
                   "  - provider: %s\n    resources: {VCPU: %d, MEMORY_MB: %d}\n---\n"
                   % (i, i, numa, vcpu, 1024 * rnd.choice([1, 2, 4])))
    print("".join(out).rstrip("-\n"))


if __name__ == "__main__":
    main()
