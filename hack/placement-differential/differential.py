#!/usr/bin/env python3
"""Differential test: kubeplace's allocation-candidate engine against real Placement.

    differential.py [--seed 1] [--scenarios 20] [--queries 30] [--jobs 2]
                    [--minimize 8] [--kubeplace PATH] [--out DIR]

For each of --scenarios random clouds (trees of depth 1-3, sharing providers,
aggregates, traits, inventories with odd reserved/min_unit/max_unit/step_size/
allocation_ratio, allocations some of which are at or above capacity) it writes
kubeplace manifests, generates --queries random GET /allocation_candidates
queries (and a few GET /resource_providers ones, and some deliberately
malformed ones), answers them with real Placement through
../placement-oracle/oracle.py (one load per scenario, all queries in one
--queries-file run) and with `kubeplace placement candidates|providers`
(one process per query), normalizes both answers and compares them.

Every disagreement is written to --out (default: failures/ next to this file)
as JSON (query, microversion, both normalized answers) next to the scenario's
manifest. Then up to --minimize disagreements of distinct kinds are shrunk
(providers, allocations, traits, aggregates, inventories and query parameters
are removed while the same kind of disagreement persists), using an
in-process Placement that is wiped and reloaded for each attempt, and the
result is re-checked with a fresh oracle.py run. See README.md.
"""

import argparse
import collections
import concurrent.futures
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
ORACLE_DIR = os.path.join(REPO, "hack", "placement-oracle")
ORACLE = os.path.join(ORACLE_DIR, "oracle.py")
DEFAULT_VENV = os.environ.get("PLACEMENT_VENV", "/root/scratch/venv")
DEFAULT_KUBEPLACE = os.path.join(REPO, "target", "release", "kubeplace")

PROVIDER_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "resourceproviders.kubeplace.io")

AGGS = ["a99e0000-0000-4000-8000-%012d" % i for i in range(1, 5)]
UNUSED_AGG = "a99e0000-0000-4000-8000-0000000000ff"
UNKNOWN_UUID = "0dead000-0000-4000-8000-000000000000"

STD_TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42", "COMPUTE_VOLUME_MULTI_ATTACH",
              "HW_NIC_SRIOV", "STORAGE_DISK_SSD"]
CUSTOM_TRAITS = ["CUSTOM_GOLD", "CUSTOM_SILVER", "CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"]
# Standard traits that no generated provider has (fine to query: Placement knows them).
ABSENT_STD_TRAITS = ["HW_GPU_API_VULKAN", "COMPUTE_TRUSTED_CERTS"]
ABSENT_STD_CLASSES = ["VGPU", "IPV4_ADDRESS"]

CANDIDATE_MVS = [(16, 1), (22, 1), (25, 1), (28, 2), (29, 2), (33, 1), (34, 1), (35, 2),
                 (36, 3), (39, 5)]
# kubeplace serves microversions 1.16-1.39 only (its CLI says so): nothing lower is asked.
PROVIDER_MVS = [16, 18, 22, 32, 39]
RATIOS = [1.0, 1.0, 2.0, 1.5, 0.57, 16.0, 0.9, 0.5, 1.33]


def mvs(minor):
    return "1.%d" % minor


def derived_uuid(name):
    return str(uuid.uuid5(PROVIDER_NAMESPACE, name))


# --------------------------------------------------------------------------
# Bootstrap: the oracle's venv (for in-process Placement while minimizing)
# and PYTHONHASHSEED=0.


def bootstrap():
    python = sys.executable
    reexec = False
    if importlib.util.find_spec("placement") is None:
        candidate = os.path.join(DEFAULT_VENV, "bin", "python")
        if os.environ.get("_PDIFF_REEXEC") == "venv" or not os.path.exists(candidate):
            sys.exit("differential: openstack-placement is not importable; set PLACEMENT_VENV")
        python = candidate
        reexec = True
    if os.environ.get("PYTHONHASHSEED") != "0":
        reexec = True
    if reexec:
        env = dict(os.environ, PYTHONHASHSEED="0", _PDIFF_REEXEC="venv")
        os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


# --------------------------------------------------------------------------
# Scenarios


def gen_inventory(rnd, rc):
    totals = {"VCPU": [2, 4, 8, 16], "PCPU": [2, 4, 6], "MEMORY_MB": [1024, 2048, 4096],
              "DISK_GB": [10, 100, 200], "SRIOV_NET_VF": [2, 4, 8], "CUSTOM_X": [1, 2, 4, 10],
              "CUSTOM_Y": [3, 5, 7]}
    total = rnd.choice(totals[rc])
    inv = {"total": total}
    if rnd.random() < 0.3:
        inv["reserved"] = rnd.choice([1, total // 4, total // 2, total])
    if rnd.random() < 0.25:
        inv["minUnit"] = rnd.choice([2, 3, 256] if rc == "MEMORY_MB" else [2, 3])
    if rnd.random() < 0.3:
        inv["maxUnit"] = max(inv.get("minUnit", 1),
                             rnd.choice([1, 2, max(1, total // 2), total, total * 2]))
    if rnd.random() < 0.25:
        inv["stepSize"] = rnd.choice([2, 3, 256, 512] if rc == "MEMORY_MB" else [2, 3])
    if rnd.random() < 0.45:
        inv["allocationRatio"] = rnd.choice(RATIOS)
    return inv


def capacity(inv):
    return int((inv["total"] - inv.get("reserved", 0)) * inv.get("allocationRatio", 1.0))


def gen_scenario(rnd):
    providers = []   # dicts: name, uuid (optional), parent, inventories, traits, aggregates

    def add(name, parent=None, inventories=None, traits=None, aggregates=None):
        p = {"name": name, "parent": parent, "inventories": inventories or {},
             "traits": sorted(set(traits or [])), "aggregates": sorted(set(aggregates or []))}
        if rnd.random() < 0.08:
            p["uuid"] = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        providers.append(p)
        return p

    def rnd_traits(k_max, extra=()):
        pool = STD_TRAITS + CUSTOM_TRAITS
        return list(extra) + rnd.sample(pool, rnd.randint(0, k_max))

    n_trees = rnd.randint(1, 4)
    for t in range(n_trees):
        root = "cn%d" % (t + 1)
        depth = rnd.choice([1, 2, 2, 3, 3])
        aggs = rnd.sample(AGGS[:3], rnd.choice([0, 1, 1, 2]))
        root_traits = rnd_traits(2, ["COMPUTE_NODE"] if rnd.random() < 0.8 else [])
        inv = {}
        if depth == 1:
            for rc in ["VCPU", "MEMORY_MB"] + (["DISK_GB"] if rnd.random() < 0.7 else []):
                inv[rc] = gen_inventory(rnd, rc)
            if rnd.random() < 0.3:
                inv["CUSTOM_X"] = gen_inventory(rnd, "CUSTOM_X")
        elif rnd.random() < 0.6:
            inv["DISK_GB"] = gen_inventory(rnd, "DISK_GB")
        add(root, None, inv, root_traits, aggs)
        if depth == 1:
            continue
        for n in range(rnd.randint(1, 2)):
            numa = "%s-numa%d" % (root, n)
            inv = {"VCPU": gen_inventory(rnd, "VCPU"), "MEMORY_MB": gen_inventory(rnd, "MEMORY_MB")}
            if rnd.random() < 0.35:
                inv["PCPU"] = gen_inventory(rnd, "PCPU")
            if rnd.random() < 0.2:
                inv["CUSTOM_X"] = gen_inventory(rnd, "CUSTOM_X")
            if rnd.random() < 0.1:
                inv = {}   # a NUMA cell without inventory
            naggs = [rnd.choice(AGGS)] if rnd.random() < 0.15 else []
            add(numa, root, inv, rnd_traits(1, ["HW_NUMA_ROOT"] if rnd.random() < 0.85 else []),
                naggs)
            if depth == 3:
                for f in range(rnd.randint(1, 2)):
                    pf = "%s-pf%d" % (numa, f)
                    inv = {"SRIOV_NET_VF": gen_inventory(rnd, "SRIOV_NET_VF")}
                    if rnd.random() < 0.2:
                        inv["CUSTOM_Y"] = gen_inventory(rnd, "CUSTOM_Y")
                    extra = ["HW_NIC_SRIOV"] if rnd.random() < 0.7 else []
                    if rnd.random() < 0.7:
                        extra.append(rnd.choice(["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"]))
                    paggs = [rnd.choice(AGGS)] if rnd.random() < 0.15 else []
                    add(pf, numa, inv, rnd_traits(1, extra), paggs)
    for s in range(rnd.choice([0, 1, 1, 2, 2, 2, 3])):
        name = "ss%d" % (s + 1)
        inv = {}
        for rc, pr in [("DISK_GB", 0.8), ("CUSTOM_X", 0.25), ("VCPU", 0.1), ("SRIOV_NET_VF", 0.1)]:
            if rnd.random() < pr:
                inv[rc] = gen_inventory(rnd, rc)
        if not inv:
            inv["DISK_GB"] = gen_inventory(rnd, "DISK_GB")
        traits = ["MISC_SHARES_VIA_AGGREGATE"] + rnd.sample(["STORAGE_DISK_SSD", "CUSTOM_GOLD",
                                                             "CUSTOM_SILVER"], rnd.randint(0, 1))
        aggs = rnd.sample(AGGS[:3], rnd.choice([0, 1, 1, 1, 2]))
        add(name, None, inv, traits, aggs)

    # Allocations, some at or above capacity.
    allocations = []
    slots = [(p["name"], rc, inv) for p in providers for rc, inv in p["inventories"].items()]
    for i in range(rnd.randint(0, 5) if slots else 0):
        items = []
        for _ in range(rnd.choice([1, 1, 1, 2])):
            pname, rc, inv = rnd.choice(slots)
            cap = capacity(inv)
            amount = rnd.choice([1, 2, max(1, cap // 2), max(1, cap), cap + 1,
                                 inv.get("minUnit", 1), inv.get("stepSize", 1)])
            amount = max(1, amount)
            merged = False
            for it in items:
                if it["provider"] == pname:
                    it["resources"][rc] = it["resources"].get(rc, 0) + amount
                    merged = True
            if not merged:
                items.append({"provider": pname, "resources": {rc: amount}})
        consumer = "c0c00000-0000-4000-8000-%012d" % (i + 1)
        allocations.append({"name": "vm%d" % (i + 1), "consumer": consumer, "allocations": items})
    # Sometimes a second object for an existing consumer (both sides sum them).
    if allocations and rnd.random() < 0.15:
        first = allocations[0]
        pname, rc, inv = rnd.choice(slots)
        allocations.append({"name": "vm-extra", "consumer": first["consumer"],
                            "allocations": [{"provider": pname, "resources": {rc: 1}}]})
    return {"providers": providers, "allocations": allocations}


def yq(s):
    return json.dumps(s)


def manifest_yaml(sc):
    docs = []
    for p in sc["providers"]:
        lines = ["apiVersion: kubeplace.io/v1alpha1", "kind: ResourceProvider", "metadata:",
                 "  name: %s" % p["name"]]
        spec = []
        if p.get("uuid"):
            spec.append("  uuid: %s" % yq(p["uuid"]))
        if p.get("parent"):
            spec.append("  parent: %s" % p["parent"])
        if p["traits"]:
            spec.append("  traits: [%s]" % ", ".join(p["traits"]))
        if p["aggregates"]:
            spec.append("  aggregates: [%s]" % ", ".join(yq(a) for a in p["aggregates"]))
        if p["inventories"]:
            spec.append("  inventories:")
            for rc in sorted(p["inventories"]):
                inv = p["inventories"][rc]
                spec.append("    %s: {%s}" % (rc, ", ".join(
                    "%s: %s" % (k, repr(float(v)) if k == "allocationRatio" else v)
                    for k, v in inv.items())))
        if spec:
            lines.append("spec:")
            lines.extend(spec)
        else:
            lines.append("spec: {}")
        docs.append("\n".join(lines))
    for a in sc["allocations"]:
        lines = ["apiVersion: kubeplace.io/v1alpha1", "kind: Allocation", "metadata:",
                 "  name: %s" % a["name"], "spec:", "  consumer: %s" % yq(a["consumer"]),
                 "  allocations:"]
        for it in a["allocations"]:
            lines.append("  - provider: %s" % it["provider"])
            lines.append("    resources: {%s}" % ", ".join(
                "%s: %d" % kv for kv in sorted(it["resources"].items())))
        docs.append("\n".join(lines))
    return "\n---\n".join(docs) + "\n"


def provider_uuid(p):
    return p.get("uuid") or derived_uuid(p["name"])


# --------------------------------------------------------------------------
# Queries


class Facts:
    """What a scenario offers to queries."""

    def __init__(self, sc):
        self.sc = sc
        self.providers = sc["providers"]
        self.uuids = [provider_uuid(p) for p in self.providers]
        self.traits = sorted({t for p in self.providers for t in p["traits"]})
        self.classes = sorted({rc for p in self.providers for rc in p["inventories"]})
        self.root_traits = sorted({t for p in self.providers if not p["parent"] for t in p["traits"]})
        self.aggs = sorted({a for p in self.providers for a in p["aggregates"]})
        used = collections.Counter()
        for a in sc["allocations"]:
            for it in a["allocations"]:
                for rc, n in it["resources"].items():
                    used[(it["provider"], rc)] += n
        self.used = used
        self.invs = collections.defaultdict(list)   # rc -> [(inv, used)]
        for p in self.providers:
            for rc, inv in p["inventories"].items():
                self.invs[rc].append((inv, used[(p["name"], rc)]))

    def focus(self, rnd):
        """Picks a tree (or a sharing provider) and what it and its sharing providers offer;
        queries built from it hit more often."""
        roots = [p for p in self.providers if not p["parent"]]
        root = rnd.choice(roots)
        root_of = scenario_root_of(self.sc)
        tree = [p for p in self.providers if root_of(p["name"]) == root["name"]]
        aggs = {a for p in tree for a in p["aggregates"]}
        shares = [p for p in self.providers if "MISC_SHARES_VIA_AGGREGATE" in p["traits"]
                  and set(p["aggregates"]) & aggs]
        members = tree + shares
        self.focus_classes = sorted({rc for p in members for rc in p["inventories"]})
        self.focus_traits = sorted({t for p in members for t in p["traits"]})
        self.focus_members = [p for p in members if p["inventories"]]
        self.focus_all = members

    def clear_focus(self):
        self.focus_classes = []
        self.focus_traits = []
        self.focus_members = []
        self.focus_all = []

    def targeted(self, rnd):
        """A provider of the focus with inventory (or None)."""
        if getattr(self, "focus_members", None) and rnd.random() < 0.75:
            return rnd.choice(self.focus_members)
        return None

    def amount_on(self, rnd, p, rc):
        inv = p["inventories"][rc]
        used = self.used[(p["name"], rc)]
        step = inv.get("stepSize", 1)
        low = max(inv.get("minUnit", 1), 1)
        low = low + (-low) % step
        free = capacity(inv) - used
        hi = min(free, inv.get("maxUnit", free))
        hi = hi - hi % step
        r = rnd.random()
        if r < 0.5 or hi < low:
            return low
        if r < 0.8:
            return rnd.randrange(low, hi + 1, step) if hi >= low else low
        return rnd.choice([hi, hi + step, free + 1, inv.get("maxUnit", hi) + 1, low - 1,
                           low + 1]) or 1

    def group_on(self, rnd, p, mv, n_classes, with_traits):
        """resources (and maybe a required value) one provider can satisfy."""
        rcs = rnd.sample(sorted(p["inventories"]), min(n_classes, len(p["inventories"])))
        res = ",".join("%s:%d" % (rc, max(1, self.amount_on(rnd, p, rc))) for rc in rcs)
        req = None
        if with_traits and mv >= 17:
            toks = []
            mine = list(p["traits"])
            others = [t for t in self.traits + ABSENT_STD_TRAITS if t not in mine]
            for _ in range(rnd.randint(1, 2)):
                if mine and (rnd.random() < 0.7 or mv < 22 or not others):
                    t = rnd.choice(mine)
                    if t not in toks:
                        toks.append(t)
                elif others and mv >= 22:
                    t = rnd.choice(others)
                    if "!" + t not in toks:
                        toks.append("!" + t)
            if mv >= 39 and mine and rnd.random() < 0.25:
                req = "in:%s,%s" % (rnd.choice(mine), rnd.choice(others or mine))
            elif toks:
                req = ",".join(toks)
        return res, req

    def trait(self, rnd):
        if getattr(self, "focus_traits", None) and rnd.random() < 0.6:
            return rnd.choice(self.focus_traits)
        return self._trait(rnd)

    def _trait(self, rnd):
        # Traits that exist in the manifests, plus standard ones (present or not).
        pool = self.traits + STD_TRAITS + ["COMPUTE_NODE", "HW_NUMA_ROOT",
                                           "MISC_SHARES_VIA_AGGREGATE"] + ABSENT_STD_TRAITS[:1]
        return rnd.choice(pool)

    def root_trait(self, rnd):
        pool = self.root_traits + ["COMPUTE_NODE", "CUSTOM_GOLD" if "CUSTOM_GOLD" in self.traits
                                   else "HW_CPU_X86_AVX2"]
        return rnd.choice(pool)

    def cls(self, rnd):
        if getattr(self, "focus_classes", None) and rnd.random() < 0.85:
            return rnd.choice(self.focus_classes)
        if not self.classes or rnd.random() < 0.04:
            return rnd.choice(ABSENT_STD_CLASSES)
        return rnd.choice(self.classes)

    def amount(self, rnd, rc):
        if rc not in self.invs or rnd.random() < 0.15:
            return rnd.choice([1, 1, 2, 4])
        inv, used = rnd.choice(self.invs[rc])
        cap = capacity(inv)
        free = cap - used
        opts = [1, 1, inv.get("minUnit", 1), inv.get("minUnit", 1) - 1,
                inv.get("stepSize", 1), 2 * inv.get("stepSize", 1),
                inv.get("maxUnit", cap), inv.get("maxUnit", cap) + 1,
                free, free + 1, cap, max(1, free // 2)]
        opts = [o for o in opts if 1 <= o < 10 ** 6]
        if rnd.random() < 0.35:
            # small amounts that respect min_unit and step_size
            step = inv.get("stepSize", 1)
            low = max(inv.get("minUnit", 1), step)
            return max(1, low - low % step) if low % step else low
        return rnd.choice(opts or [1])

    def agg(self, rnd):
        if rnd.random() < 0.08 or not self.aggs:
            return rnd.choice(AGGS + [UNUSED_AGG])
        return rnd.choice(self.aggs)

    def tree_uuid(self, rnd):
        if rnd.random() < 0.05:
            return UNKNOWN_UUID
        return rnd.choice(self.uuids)


def resources_value(f, rnd, n):
    classes = []
    for _ in range(n):
        c = f.cls(rnd)
        if c not in classes:
            classes.append(c)
    return ",".join("%s:%d" % (c, f.amount(rnd, c)) for c in classes)


def required_values(f, rnd, mv, allow_multi=True):
    """One or more values for a `required` parameter (a list: repeated keys)."""
    values = []
    n_params = 1
    if allow_multi and rnd.random() < 0.25:
        n_params = 2
    used = set()
    for _ in range(n_params):
        if mv >= 39 and rnd.random() < 0.3:
            k = rnd.randint(1, 3)
            ts = []
            for _ in range(k):
                t = f.trait(rnd)
                if t not in ts:
                    ts.append(t)
            values.append("in:" + ",".join(ts))
            continue
        toks = []
        for _ in range(rnd.randint(1, 3)):
            t = f.trait(rnd)
            if t in used:
                continue
            used.add(t)
            if mv >= 22 and rnd.random() < 0.35:
                toks.append(("!!" if rnd.random() < 0.05 else "!") + t)
            else:
                toks.append(t)
        if not toks:
            toks.append(f.trait(rnd))
        if rnd.random() < 0.04:
            toks[0] = " %s " % toks[0]    # surrounding spaces are stripped
        values.append(",".join(toks))
    return values


def member_of_values(f, rnd, mv):
    values = []
    n = 2 if (mv >= 24 and rnd.random() < 0.25) else 1
    for _ in range(n):
        forbid = mv >= 32 and rnd.random() < 0.3
        if mv >= 21 and rnd.random() < 0.35:
            a, b = f.agg(rnd), f.agg(rnd)
            v = "in:%s,%s" % (a, b) if a != b else "in:%s" % a
        else:
            v = f.agg(rnd)
        values.append(("!" + v) if forbid else v)
    return values


def suffixes_for(rnd, mv, n):
    pool = ["1", "2", "3"]
    if mv >= 33:
        pool += ["_NET", "_a-b", "X"]
    return rnd.sample(pool, n)


def gen_valid_candidates_query(f, rnd, mv):
    params = []
    feats = set()
    n_gran = 0
    if mv >= 25:
        n_gran = rnd.choices([0, 1, 2, 3], [45, 25, 20, 10])[0]
    use_unnumbered = n_gran == 0 or rnd.random() < 0.6
    if use_unnumbered:
        p = f.targeted(rnd)
        if p is not None:
            parts = []
            reqs = []
            seen = set()
            for _ in range(rnd.choice([1, 1, 2, 2, 3])):
                res, req = f.group_on(rnd, p, mv, 1, rnd.random() < 0.3)
                if res.split(":")[0] not in seen:
                    seen.add(res.split(":")[0])
                    parts.append(res)
                    if req:
                        reqs.append(req)
                p = rnd.choice(f.focus_members)
            params.append(("resources", ",".join(parts)))
            if reqs and mv >= 17:
                params.append(("required", reqs[0]))
                feats.add("required")
        else:
            params.append(("resources", resources_value(f, rnd, rnd.choice([1, 1, 1, 2, 2, 3]))))
        if mv >= 17 and "required" not in feats and rnd.random() < 0.4:
            for v in required_values(f, rnd, mv):
                params.append(("required", v))
            feats.add("required")
        if mv >= 21 and rnd.random() < 0.3:
            for v in member_of_values(f, rnd, mv):
                params.append(("member_of", v))
            feats.add("member_of")
        if mv >= 31 and rnd.random() < 0.15:
            params.append(("in_tree", f.tree_uuid(rnd)))
            feats.add("in_tree")
    suffixes = suffixes_for(rnd, mv, n_gran)
    resourceless = []
    for i, s in enumerate(suffixes):
        feats.add("granular")
        has_resourced = use_unnumbered or i > 0
        if mv >= 36 and has_resourced and rnd.random() < 0.3:
            resourceless.append(s)
            feats.add("resourceless")
            p = f.targeted(rnd)
            if p is not None:
                _, req = f.group_on(rnd, p, mv, 1, True)
                if req:
                    params.append(("required" + s, req))
                    continue
        else:
            p = f.targeted(rnd)
            if p is not None:
                res, req = f.group_on(rnd, p, mv, rnd.choice([1, 1, 2]), rnd.random() < 0.5)
                params.append(("resources" + s, res))
                if req:
                    params.append(("required" + s, req))
                if mv >= 21 and rnd.random() < 0.15:
                    for v in member_of_values(f, rnd, mv):
                        params.append(("member_of" + s, v))
                if mv >= 31 and rnd.random() < 0.1:
                    params.append(("in_tree" + s, f.tree_uuid(rnd)))
                continue
            params.append(("resources" + s, resources_value(f, rnd, rnd.choice([1, 1, 2]))))
        if rnd.random() < (0.8 if s in resourceless else 0.45):
            for v in required_values(f, rnd, mv, allow_multi=False):
                params.append(("required" + s, v))
        if mv >= 21 and rnd.random() < (0.4 if s in resourceless else 0.2):
            for v in member_of_values(f, rnd, mv):
                params.append(("member_of" + s, v))
        if s in resourceless and not any(k in ("required" + s, "member_of" + s)
                                         for k, _ in params):
            params.append(("required" + s, f.trait(rnd)))
        if mv >= 31 and rnd.random() < 0.1:
            params.append(("in_tree" + s, f.tree_uuid(rnd)))
    if mv >= 36 and suffixes and (resourceless or rnd.random() < 0.35):
        members = list(resourceless)
        for s in suffixes:
            if s not in members and (rnd.random() < 0.6 or len(members) < 1):
                members.append(s)
        rnd.shuffle(members)
        params.append(("same_subtree", ",".join(members)))
        feats.add("same_subtree")
    if len(suffixes) >= 2 or (suffixes and rnd.random() < 0.3):
        pol = rnd.choice(["none", "isolate"])
        params.append(("group_policy", pol))
        feats.add("isolate" if pol == "isolate" else "policy_none")
    if mv >= 35 and rnd.random() < 0.25:
        toks = []
        for _ in range(rnd.randint(1, 2)):
            t = f.root_trait(rnd)
            tok = ("!" + t) if rnd.random() < 0.4 else t
            if t not in [x.lstrip("!") for x in toks]:
                toks.append(tok)
        params.append(("root_required", ",".join(toks)))
        feats.add("root_required")
    if rnd.random() < 0.15:
        params.append(("limit", str(rnd.randint(1, 3))))
        feats.add("limit")
    return "&".join("%s=%s" % kv for kv in params), feats


def gen_malformed_candidates_query(f, rnd):
    t = f.trait(rnd)
    t2 = f.trait(rnd)
    if t2 == t:
        t2 = "HW_CPU_X86_AVX2" if t != "HW_CPU_X86_AVX2" else "COMPUTE_NODE"
    r = "resources=%s" % resources_value(f, rnd, 1)
    agg = f.agg(rnd)
    choices = [
        ("conflict", rnd.choice([36, 39]), "%s&required=%s,!%s" % (r, t, t)),
        ("conflict-repeated", 39, "%s&required=%s&required=!%s" % (r, t, t)),
        ("conflict-repeated-1.38", 38, "%s&required=%s&required=!%s" % (r, t, t)),
        ("conflict-in-all", 39, "%s&required=in:%s,%s&required=!%s,!%s" % (r, t, t2, t, t2)),
        ("in-with-one-forbidden", 39, "%s&required=in:%s,%s&required=!%s" % (r, t, t2, t)),
        ("conflict-granular", 39, "resources1=VCPU:1&required1=%s,!%s" % (t, t)),
        ("root-conflict", 39, "%s&root_required=%s,!%s" % (r, t, t)),
        ("bang-space", 39, "%s&required=! %s" % (r, t)),
        ("empty-entry", rnd.choice([29, 39]), "%s&required=%s,,%s" % (r, t, t2)),
        ("empty-required", 39, "%s&required=" % r),
        ("granular-no-resources", 36, "%s&required1=%s" % (r, t)),
        ("granular-no-resources-1.35", 35, "%s&required1=%s" % (r, t)),
        ("member-of-orphan-1.35", 35, "%s&member_of1=%s" % (r, agg)),
        ("unnumbered-no-resources", 36, "resources1=VCPU:1&required=%s" % t),
        ("no-resources", 39, "required=%s" % t),
        ("missing-group-policy", rnd.choice([25, 36, 39]),
         "resources1=VCPU:1&resources2=%s" % resources_value(f, rnd, 1)),
        ("missing-group-policy-resourceless", 39,
         "resources1=VCPU:1&required2=%s&same_subtree=1,2" % t),
        ("in-before-1.39", rnd.choice([36, 38]), "%s&required=in:%s,%s" % (r, t, t2)),
        ("bang-before-1.22", 21, "%s&required=!%s" % (r, t)),
        ("required-at-1.16", 16, "%s&required=%s" % (r, t)),
        ("in-forbidden", 39, "%s&required=in:%s,!%s" % (r, t, t2)),
        ("root-in", 39, "%s&root_required=in:%s,%s" % (r, t, t2)),
        ("root-required-1.34", 34, "%s&root_required=%s" % (r, t)),
        ("root-repeated", 39, "%s&root_required=%s&root_required=%s" % (r, t, t2)),
        ("same-subtree-1.35", 35, "resources1=VCPU:1&same_subtree=1"),
        ("same-subtree-unknown", 39, "resources1=VCPU:1&same_subtree=1,3"),
        ("same-subtree-empty", 39, "resources1=VCPU:1&same_subtree=1,"),
        ("forbidden-agg-1.31", 31, "%s&member_of=!%s" % (r, agg)),
        ("member-of-twice-1.23", 23, "%s&member_of=%s&member_of=%s" % (r, agg, agg)),
        ("member-of-commas", 39, "%s&member_of=!%s,%s" % (r, agg, agg)),
        ("member-of-bad-uuid", 39, "%s&member_of=not-a-uuid" % r),
        ("in-tree-bad", 39, "%s&in_tree=not-a-uuid" % r),
        ("limit-zero", 39, "%s&limit=0" % r),
        ("bad-policy", 39, "resources1=VCPU:1&group_policy=bogus"),
        ("amount-zero", 39, "resources=VCPU:0"),
        ("lowercase-class", 39, "resources=vcpu:1"),
        ("bad-resources", 39, "resources=VCPU"),
        ("unknown-param", 39, "%s&foo=bar" % r),
        ("suffix-1.32", 32, "resources_X=VCPU:1"),
        ("bang-bang", 39, "%s&required=!!%s" % (r, t)),
    ]
    name, mv, q = rnd.choice(choices)
    return q, {"malformed:" + name}, mv


def gen_providers_query(f, rnd):
    mv = rnd.choice(PROVIDER_MVS)
    params = []
    kinds = ["resources", "required", "member_of", "in_tree", "name", "uuid"]
    if rnd.random() < 0.1:
        kinds.append("conflict")
    for k in rnd.sample(kinds, rnd.choice([1, 1, 2, 3])):
        if k == "resources":
            params.append(("resources", resources_value(f, rnd, rnd.choice([1, 2]))))
        elif k == "required" and mv >= 18:
            for v in required_values(f, rnd, mv):
                params.append(("required", v))
        elif k == "conflict" and mv >= 22:
            t = f.trait(rnd)
            params.append(("required", "%s,!%s" % (t, t)))
        elif k == "member_of":
            for v in member_of_values(f, rnd, mv):
                params.append(("member_of", v))
        elif k == "in_tree":
            params.append(("in_tree", f.tree_uuid(rnd)))
        elif k == "name":
            params.append(("name", rnd.choice(f.providers)["name"]))
        elif k == "uuid":
            params.append(("uuid", rnd.choice(f.uuids)))
    return "&".join("%s=%s" % kv for kv in params), mv


def gen_queries(sc, rnd, n):
    f = Facts(sc)
    out = []
    for _ in range(n):
        if rnd.random() < 0.7:
            f.focus(rnd)
        else:
            f.clear_focus()
        r = rnd.random()
        if r < 0.08:
            q, mv = gen_providers_query(f, rnd)
            out.append({"query": q, "microversion": mvs(mv), "path": "resource_providers",
                        "feats": ["providers"]})
        elif r < 0.22:
            q, feats, mv = gen_malformed_candidates_query(f, rnd)
            out.append({"query": q, "microversion": mvs(mv), "path": "allocation_candidates",
                        "feats": sorted(feats)})
        else:
            mv = rnd.choices([m for m, _ in CANDIDATE_MVS], [w for _, w in CANDIDATE_MVS])[0]
            q, feats = gen_valid_candidates_query(f, rnd, mv)
            out.append({"query": q, "microversion": mvs(mv), "path": "allocation_candidates",
                        "feats": sorted(feats)})
    return out


def strip_limit(query):
    return "&".join(p for p in query.split("&") if not p.startswith("limit="))


def query_limit(query):
    """The limit Placement uses (the first `limit`), or None."""
    for p in query.split("&"):
        if p.startswith("limit="):
            try:
                return int(p[len("limit="):])
            except ValueError:
                return None
    return None


# --------------------------------------------------------------------------
# Running both sides


def run_oracle(manifest, queries, tmpdir):
    """Runs oracle.py once over a manifest; returns ({(path, mv, query): (status, body)}, uuids)."""
    qfile = os.path.join(tmpdir, "queries.jsonl")
    with open(qfile, "w") as fh:
        for q in queries:
            fh.write(json.dumps({"query": q["query"], "microversion": q["microversion"],
                                 "path": q["path"]}) + "\n")
    r = subprocess.run([sys.executable, ORACLE, "query", "-f", manifest, "--queries-file", qfile,
                        "--load-stats", "--tmpdir", tmpdir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("oracle failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    answers = {}
    uuids = {}
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        if "load" in rec:
            uuids = rec["load"]["uuids"]
            continue
        key = (rec.get("path", "allocation_candidates"), rec["microversion"], rec["query"])
        answers[key] = (rec["status"], rec["body"])
    return answers, uuids


def run_kubeplace(kubeplace, manifest, q):
    sub = "providers" if q["path"] == "resource_providers" else "candidates"
    r = subprocess.run([kubeplace, "placement", sub, "-f", manifest, "--query", q["query"],
                        "--microversion", q["microversion"]],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 2 or not r.stdout.strip():
        return (-1, {"kubeplace_error": r.stderr.strip()[-1000:], "exit": r.returncode})
    body = json.loads(r.stdout)
    if r.returncode == 1:
        try:
            return (int(body["errors"][0]["status"]), body)
        except (KeyError, IndexError, TypeError, ValueError):
            return (-1, body)
    return (200, body)


# --------------------------------------------------------------------------
# Normalization and comparison


class Names:
    def __init__(self, sc):
        self.by_uuid = {provider_uuid(p): p["name"] for p in sc["providers"]}

    def __call__(self, u):
        if u is None:
            return None
        return self.by_uuid.get(u, self.by_uuid.get(str(u).lower(), u))


def norm_candidate(ar, minor, names):
    allocs = ar.get("allocations")
    items = []
    if isinstance(allocs, dict):
        for u, a in allocs.items():
            for rc, n in a.get("resources", {}).items():
                items.append((names(u), rc, n))
    else:   # list form (1.10-1.11), unused here
        for a in allocs or []:
            for rc, n in a.get("resources", {}).items():
                items.append((names(a["resource_provider"]["uuid"]), rc, n))
    key = [tuple(sorted(items))]
    if minor >= 34 or "mappings" in ar:
        m = ar.get("mappings")
        key.append(None if m is None else
                   tuple(sorted((s, tuple(sorted(names(u) for u in us))) for s, us in m.items())))
    extra = sorted(set(ar) - {"allocations", "mappings"})
    if extra:
        key.append(("extra-keys",) + tuple(extra))
    return tuple(key)


def norm_summary(s, names):
    out = {"keys": sorted(s)}
    out["resources"] = {rc: [v.get("capacity"), v.get("used")]
                        for rc, v in sorted(s.get("resources", {}).items())}
    if "traits" in s:
        out["traits"] = sorted(s["traits"])
    if "parent_provider_uuid" in s:
        out["parent"] = names(s["parent_provider_uuid"])
    if "root_provider_uuid" in s:
        out["root"] = names(s["root_provider_uuid"])
    return out


def norm_candidates_body(body, minor, names):
    cands = collections.Counter(norm_candidate(ar, minor, names)
                                for ar in body.get("allocation_requests", []))
    sums = {names(u): norm_summary(s, names) for u, s in body.get("provider_summaries", {}).items()}
    return {"keys": sorted(body), "candidates": cands, "summaries": sums}


def cand_to_json(c):
    d = {"allocations": ["%s %s:%d" % it for it in c[0]]}
    if len(c) > 1:
        d["mappings"] = None if c[1] is None else {s: list(us) for s, us in c[1]}
    return d


def candidates_json(counter):
    out = []
    for c, n in sorted(counter.items(), key=lambda kv: repr(kv[0])):
        for _ in range(n):
            out.append(cand_to_json(c))
    return out


def norm_providers_body(body, minor, names):
    rows = collections.Counter()
    for p in body.get("resource_providers", []):
        row = (p.get("name"), p.get("uuid"))
        if minor >= 14:
            row += (names(p.get("parent_provider_uuid")), names(p.get("root_provider_uuid")))
        rows[row] += 1
    return rows


def summary_root_filter(sums, roots, root_of):
    return {n: s for n, s in sums.items() if root_of(n) in roots}


def compare(q, pl, kp, pl_unlimited, names, root_of):
    """Returns None (agree) or (category, detail dict)."""
    minor = int(q["microversion"].split(".")[1])
    pst, pbody = pl
    kst, kbody = kp
    if kst == -1:
        return "kubeplace-error", {"kubeplace": kbody}
    if pst != kst:
        return "status:%d-vs-%d" % (pst, kst), {
            "placement": {"status": pst, "body": pbody if pst != 200 else summarize(pbody, q, names)},
            "kubeplace": {"status": kst, "body": kbody if kst != 200 else summarize(kbody, q, names)}}
    if pst != 200:
        return None
    if q["path"] == "resource_providers":
        a = norm_providers_body(pbody, minor, names)
        b = norm_providers_body(kbody, minor, names)
        if a != b:
            return "providers:list", {"placement": sorted(a.elements()),
                                      "kubeplace": sorted(b.elements())}
        return None
    a = norm_candidates_body(pbody, minor, names)
    b = norm_candidates_body(kbody, minor, names)
    if a["keys"] != b["keys"]:
        return "shape:top-level", {"placement": a["keys"], "kubeplace": b["keys"]}
    limit = query_limit(q["query"])
    if limit is not None and pl_unlimited is not None and pl_unlimited[0] == 200:
        u = norm_candidates_body(pl_unlimited[1], minor, names)
        pc, kc = sum(a["candidates"].values()), sum(b["candidates"].values())
        if pc != kc:
            return "limit:count", {"placement": pc, "kubeplace": kc,
                                   "placement_unlimited": sum(u["candidates"].values())}
        extra = b["candidates"] - u["candidates"]
        if extra:
            return "limit:kept-not-a-candidate", {
                "kubeplace_kept_not_in_placement": candidates_json(extra),
                "placement_unlimited": candidates_json(u["candidates"])}
        # Self-check of the rule on Placement's own answer (a harness error if it fails).
        p_roots = {root_of(it[0]) for c in a["candidates"] for it in c[0]}
        if a["summaries"] != summary_root_filter(u["summaries"], p_roots, root_of):
            return "harness:limit-rule", {"placement_limited": a["summaries"],
                                          "placement_unlimited": u["summaries"]}
        kept_roots = {root_of(it[0]) for c in b["candidates"] for it in c[0]}
        want = summary_root_filter(u["summaries"], kept_roots, root_of)
        if b["summaries"] != want:
            return "limit:summaries", {"placement_expected": want,
                                       "kubeplace": b["summaries"],
                                       "kept": candidates_json(b["candidates"])}
        return None
    if a["candidates"] != b["candidates"]:
        miss = a["candidates"] - b["candidates"]
        extra = b["candidates"] - a["candidates"]
        alloc_a = collections.Counter(c[0] for c in a["candidates"].elements())
        alloc_b = collections.Counter(c[0] for c in b["candidates"].elements())
        if alloc_a == alloc_b:
            cat = "candidates:mappings-only"
        elif not extra:
            cat = "candidates:kubeplace-missing"
        elif not miss:
            cat = "candidates:kubeplace-extra"
        else:
            cat = "candidates:both"
        return cat, {"only_placement": candidates_json(miss), "only_kubeplace": candidates_json(extra),
                     "placement_count": sum(a["candidates"].values()),
                     "kubeplace_count": sum(b["candidates"].values())}
    if a["summaries"] != b["summaries"]:
        pa, pb = set(a["summaries"]), set(b["summaries"])
        if pa != pb:
            return "summaries:providers", {"only_placement": sorted(pa - pb),
                                           "only_kubeplace": sorted(pb - pa)}
        diff = {n: {"placement": a["summaries"][n], "kubeplace": b["summaries"][n]}
                for n in sorted(pa) if a["summaries"][n] != b["summaries"][n]}
        return "summaries:content", diff
    return None


def summarize(body, q, names):
    """A normalized, name-based rendering of a 200 body (for failure files)."""
    minor = int(q["microversion"].split(".")[1])
    if q["path"] == "resource_providers":
        return {"resource_providers": [list(r) for r in sorted(
            norm_providers_body(body, minor, names).elements())]}
    n = norm_candidates_body(body, minor, names)
    return {"allocation_requests": candidates_json(n["candidates"]),
            "provider_summaries": n["summaries"]}


def answer_view(ans, q, names):
    st, body = ans
    if st == 200:
        return {"status": 200, **summarize(body, q, names)}
    if isinstance(body, dict) and body.get("errors"):
        return {"status": st, "detail": body["errors"][0].get("detail")}
    return {"status": st, "body": body}


# --------------------------------------------------------------------------
# One scenario end to end


def scenario_root_of(sc):
    parent = {p["name"]: p["parent"] for p in sc["providers"]}

    def root_of(n):
        seen = 0
        while parent.get(n) and seen < 100:
            n = parent[n]
            seen += 1
        return n
    return root_of


def check_scenario(sc, queries, kubeplace, tmpdir, pl_answers=None):
    """Returns [(index, q, category, detail, placement answer, kubeplace answer)], and counts."""
    manifest = os.path.join(tmpdir, "manifest.yaml")
    with open(manifest, "w") as fh:
        fh.write(manifest_yaml(sc))
    oracle_queries = list(queries)
    for q in queries:
        if query_limit(q["query"]) is not None:
            oracle_queries.append(dict(q, query=strip_limit(q["query"])))
    if pl_answers is None:
        pl_answers, _ = run_oracle(manifest, oracle_queries, tmpdir)
    names = Names(sc)
    root_of = scenario_root_of(sc)
    results = []
    for i, q in enumerate(queries):
        key = (q["path"], q["microversion"], q["query"])
        pl = pl_answers[key]
        kp = run_kubeplace(kubeplace, manifest, q)
        unl = None
        if query_limit(q["query"]) is not None:
            unl = pl_answers.get((q["path"], q["microversion"], strip_limit(q["query"])))
        d = compare(q, pl, kp, unl, names, root_of)
        results.append((i, q, d, pl, kp, unl))
    return results


# --------------------------------------------------------------------------
# In-process Placement for minimization (wiped and reloaded per attempt)


class LivePlacement:
    def __init__(self):
        sys.path.insert(0, ORACLE_DIR)
        import oracle as oracle_mod   # noqa: E402  (hack/placement-oracle/oracle.py)
        self.o = oracle_mod
        self.tmp = tempfile.mkdtemp(prefix="pdiff-live-")
        conf = self.o.write_config(self.tmp)
        self.o.db_sync(self.tmp, conf)
        app = self.o.load_app(self.tmp)
        self.client = self.o.WsgiClient(app)
        self.loaded = False

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _get(self, path, mv="1.39"):
        st, raw = self.client.request("GET", path, None, mv)
        if st != 200:
            raise RuntimeError("GET %s -> %d" % (path, st))
        return json.loads(raw)

    def wipe(self):
        rps = self._get("/resource_providers")["resource_providers"]
        consumers = set()
        for rp in rps:
            allocs = self._get("/resource_providers/%s/allocations" % rp["uuid"])
            consumers.update(allocs.get("allocations", {}))
        for c in consumers:
            st, raw = self.client.request("DELETE", "/allocations/%s" % c, None, "1.39")
            if st not in (204, 404):
                raise RuntimeError("DELETE allocations %s -> %d %s" % (c, st, raw))
        by_uuid = {rp["uuid"]: rp for rp in rps}

        def depth(rp):
            d = 0
            while rp.get("parent_provider_uuid") and d < 100:
                rp = by_uuid[rp["parent_provider_uuid"]]
                d += 1
            return d
        for rp in sorted(rps, key=depth, reverse=True):
            st, raw = self.client.request("DELETE", "/resource_providers/%s" % rp["uuid"],
                                          None, "1.39")
            if st not in (204, 404):
                raise RuntimeError("DELETE provider %s -> %d %s" % (rp["uuid"], st, raw))

    def load(self, manifest):
        self.wipe()
        model = self.o.load_manifests([manifest])
        with self.o.CachedSchemaCheck():
            self.o.load_into_placement(self.client, model)

    # Triage: two defects of Placement 16.0.0 found by this test can be patched out of the
    # in-process Placement to see whether a disagreement is explained by them.
    #  A "arr-mutation": RequestWideSearchContext.copy_arr_if_needed copies a shared
    #    AllocationRequestResource only when group_policy == 'none'; with no policy or
    #    'isolate', _consolidate_allocation_requests adds amounts *in place* into objects
    #    other candidates share. Patch: copy whenever the class is in multi_group_rcs.
    #  B "anchor-collapse": _alloc_candidates_multiple_providers gathers per-anchor requests
    #    in a set, and AllocationRequest.__eq__/__hash__ ignore the anchor, so a request of
    #    the unnumbered group served only by sharing providers survives for one anchor
    #    (first in set order). Patch: equality includes the anchor while groups are built;
    #    the merged result is de-duplicated by content as before.
    def set_patches(self, fix_a=False, fix_b=False):
        import copy as copy_mod
        from placement.objects import allocation_candidate as ac
        from placement.objects import research_context as rc
        if not hasattr(self, "_orig"):
            self._orig = {"copy": rc.RequestWideSearchContext.copy_arr_if_needed,
                          "eq": ac.AllocationRequest.__eq__,
                          "hash": ac.AllocationRequest.__hash__,
                          "merge": ac._merge_candidates}
        o = self._orig
        if fix_a:
            def copy_arr_if_needed(ctx, arr):
                if arr.resource_class in ctx.multi_group_rcs:
                    return copy_mod.copy(arr)
                return arr
            rc.RequestWideSearchContext.copy_arr_if_needed = copy_arr_if_needed
        else:
            rc.RequestWideSearchContext.copy_arr_if_needed = o["copy"]
        if fix_b:
            def eq(a, b):
                return o["eq"](a, b) and a.anchor_root_provider_uuid == b.anchor_root_provider_uuid

            def hsh(a):
                return hash((o["hash"](a), a.anchor_root_provider_uuid))

            def merge(candidates, rw_ctx):
                areqs, psums = o["merge"](candidates, rw_ctx)
                seen, out = set(), []
                for a in areqs:
                    key = (frozenset((r.resource_provider.id, r.resource_class, r.amount)
                                     for r in a.resource_requests),
                           frozenset((k, frozenset(v)) for k, v in a.mappings.items()))
                    if key not in seen:
                        seen.add(key)
                        out.append(a)
                return out, psums
            ac.AllocationRequest.__eq__ = eq
            ac.AllocationRequest.__hash__ = hsh
            ac._merge_candidates = merge
        else:
            ac.AllocationRequest.__eq__ = o["eq"]
            ac.AllocationRequest.__hash__ = o["hash"]
            ac._merge_candidates = o["merge"]

    def query(self, q, fix_a=False, fix_b=False):
        self.set_patches(fix_a, fix_b)
        try:
            return self._query(q)
        finally:
            self.set_patches(False, False)

    def _query(self, q):
        st, raw = self.client.request("GET", "/" + q["path"], None, q["microversion"],
                                      query=q["query"])
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        return st, body


TRIAGE_MODES = [("A", True, False), ("B", False, True), ("A+B", True, True)]


def triage(live, sc, q, kp, names, root_of):
    """With Placement loaded with sc: which patched Placement (if any) agrees with kubeplace.
    Returns (label, stock-live-agrees-with-fresh-oracle-category or None)."""
    def answers(fix_a, fix_b):
        pl = live.query(q, fix_a, fix_b)
        unl = None
        if query_limit(q["query"]) is not None:
            unl = live.query(dict(q, query=strip_limit(q["query"])), fix_a, fix_b)
        return pl, unl
    pl, unl = answers(False, False)
    stock = compare(q, pl, kp, unl, names, root_of)
    if stock is None:
        return "stock-live-agrees", None
    for label, fa, fb in TRIAGE_MODES:
        pl, unl = answers(fa, fb)
        if compare(q, pl, kp, unl, names, root_of) is None:
            return {"A": "placement-bug-A-arr-mutation", "B": "placement-bug-B-anchor-collapse",
                    "A+B": "placement-bugs-A+B"}[label], stock[0]
    return "unexplained", stock[0]


def custom_names_in_query(query):
    out = set()
    for tok in query.replace("&", ",").replace("=", ",").replace(":", ",").split(","):
        tok = tok.strip().lstrip("!")
        if tok.startswith("CUSTOM_"):
            out.add(tok)
    return out


def invariant_ok(sc, q):
    """Every CUSTOM_ trait/class the query names exists in the manifests (excluded diff 3)."""
    have = {t for p in sc["providers"] for t in p["traits"]}
    have |= {rc for p in sc["providers"] for rc in p["inventories"]}
    return custom_names_in_query(q["query"]) <= have


def prune_allocations(sc):
    names = {p["name"]: p for p in sc["providers"]}
    allocs = []
    for a in sc["allocations"]:
        items = []
        for it in a["allocations"]:
            p = names.get(it["provider"])
            if p is None:
                continue
            res = {rc: n for rc, n in it["resources"].items() if rc in p["inventories"]}
            if res:
                items.append({"provider": it["provider"], "resources": res})
        if items:
            allocs.append(dict(a, allocations=items))
    sc["allocations"] = allocs
    return sc


def remove_subtree(sc, name):
    gone = {name}
    changed = True
    while changed:
        changed = False
        for p in sc["providers"]:
            if p["parent"] in gone and p["name"] not in gone:
                gone.add(p["name"])
                changed = True
    sc = json.loads(json.dumps(sc))
    sc["providers"] = [p for p in sc["providers"] if p["name"] not in gone]
    return prune_allocations(sc)


class Minimizer:
    def __init__(self, kubeplace, live, budget_s):
        self.kubeplace = kubeplace
        self.live = live
        self.deadline = time.time() + budget_s
        self.attempts = 0

    def evaluate(self, sc, q):
        tmp = tempfile.mkdtemp(prefix="pdiff-min-")
        try:
            manifest = os.path.join(tmp, "manifest.yaml")
            with open(manifest, "w") as fh:
                fh.write(manifest_yaml(sc))
            self.live.load(manifest)
            answers = {(q["path"], q["microversion"], q["query"]): self.live.query(q)}
            if query_limit(q["query"]) is not None:
                uq = dict(q, query=strip_limit(q["query"]))
                answers[(q["path"], q["microversion"], uq["query"])] = self.live.query(uq)
            (_, _, d, pl, kp, unl), = check_scenario(sc, [q], self.kubeplace, tmp, answers)
            label = None
            if d is not None:
                label, _ = triage(self.live, sc, q, kp, Names(sc), scenario_root_of(sc))
            return d, pl, kp, unl, label
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def fails(self, sc, q, category, label):
        if time.time() > self.deadline:
            return False
        if not invariant_ok(sc, q) or not sc["providers"]:
            return False
        self.attempts += 1
        try:
            d, _, _, _, got = self.evaluate(sc, q)
        except Exception as e:   # a reduced manifest Placement refuses: not a reduction
            print("  (attempt failed: %s)" % str(e)[:200], file=sys.stderr)
            return False
        return d is not None and d[0] == category and got == label

    def minimize(self, sc, q, category, label):
        sc = json.loads(json.dumps(sc))
        q = dict(q)
        progress = True
        while progress and time.time() < self.deadline:
            progress = False
            # whole allocation objects
            for a in list(sc["allocations"]):
                t = dict(sc, allocations=[x for x in sc["allocations"] if x is not a])
                if self.fails(t, q, category, label):
                    sc, progress = t, True
            # providers with their subtrees, roots first
            for p in sorted(sc["providers"], key=lambda p: p["parent"] is not None):
                if p["name"] not in {x["name"] for x in sc["providers"]}:
                    continue
                t = remove_subtree(sc, p["name"])
                if self.fails(t, q, category, label):
                    sc, progress = t, True
            # query parameters
            params = q["query"].split("&")
            for i in range(len(params)):
                if len(params) <= 1:
                    break
                if i >= len(params):
                    break
                tq = dict(q, query="&".join(params[:i] + params[i + 1:]))
                if self.fails(sc, tq, category, label):
                    q, params, progress = tq, tq["query"].split("&"), True
            # pairs of parameters (e.g. a resourceless group and its same_subtree)
            if not progress and 2 < len(params) <= 8:
                done = False
                for i in range(len(params)):
                    for j in range(i + 1, len(params)):
                        rest = [x for k, x in enumerate(params) if k not in (i, j)]
                        tq = dict(q, query="&".join(rest))
                        if self.fails(sc, tq, category, label):
                            q, params, progress, done = tq, rest, True, True
                            break
                    if done:
                        break
            # traits, aggregates, inventories, inventory fields, allocation entries
            for pi in range(len(sc["providers"])):
                for field in ("traits", "aggregates"):
                    for v in list(sc["providers"][pi][field]):
                        t = json.loads(json.dumps(sc))
                        t["providers"][pi][field].remove(v)
                        if self.fails(t, q, category, label):
                            sc, progress = t, True
                for rc in list(sc["providers"][pi]["inventories"]):
                    t = json.loads(json.dumps(sc))
                    del t["providers"][pi]["inventories"][rc]
                    t = prune_allocations(t)
                    if self.fails(t, q, category, label):
                        sc, progress = t, True
                        continue
                    for k in list(sc["providers"][pi]["inventories"][rc]):
                        if k == "total":
                            continue
                        t = json.loads(json.dumps(sc))
                        del t["providers"][pi]["inventories"][rc][k]
                        if self.fails(t, q, category, label):
                            sc, progress = t, True
                if sc["providers"][pi].get("uuid"):
                    t = json.loads(json.dumps(sc))
                    del t["providers"][pi]["uuid"]
                    if self.fails(t, q, category, label):
                        sc, progress = t, True
        return sc, q


# --------------------------------------------------------------------------
# Main


def write_json(path, obj):
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True, default=list)
        fh.write("\n")


def repro_commands(manifest_rel, q):
    sub = "providers" if q["path"] == "resource_providers" else "candidates"
    qs = q["query"].replace("'", "'\\''")
    return {
        "kubeplace": "target/release/kubeplace placement %s -f %s --query '%s' --microversion %s"
                     % (sub, manifest_rel, qs, q["microversion"]),
        "placement": "python3 hack/placement-oracle/oracle.py query -f %s --path %s "
                     "--microversion %s --query '%s'"
                     % (manifest_rel, q["path"], q["microversion"], qs),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenarios", type=int, default=20)
    ap.add_argument("--queries", type=int, default=30, help="queries per scenario")
    ap.add_argument("--jobs", type=int, default=2, help="scenarios checked in parallel")
    ap.add_argument("--kubeplace", default=DEFAULT_KUBEPLACE)
    ap.add_argument("--out", default=os.path.join(HERE, "failures"))
    ap.add_argument("--minimize", type=int, default=8,
                    help="minimize up to this many disagreements of distinct kinds (0: none)")
    ap.add_argument("--minimize-budget", type=float, default=600,
                    help="seconds for all minimization")
    ap.add_argument("--first-scenario", type=int, default=0)
    ap.add_argument("--triage", type=int, default=1,
                    help="1: re-ask each disagreement of an in-process Placement, stock and "
                         "with two Placement defects patched out (see LivePlacement)")
    ap.add_argument("--triage-budget", type=float, default=300)
    a = ap.parse_args()
    if not os.path.exists(a.kubeplace):
        sys.exit("differential: %s not found (cargo build --release --bin kubeplace)" % a.kubeplace)

    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    t0 = time.time()
    lock = threading.Lock()
    stats = collections.Counter()
    by_cat = collections.Counter()
    failures = []     # dicts
    scenario_errors = []

    def one(i):
        rnd = random.Random("%d:%d" % (a.seed, i))
        sc = gen_scenario(rnd)
        queries = gen_queries(sc, rnd, a.queries)
        tmp = tempfile.mkdtemp(prefix="pdiff-")
        try:
            results = check_scenario(sc, queries, a.kubeplace, tmp)
        except Exception as e:
            with lock:
                scenario_errors.append((i, str(e)[:500]))
            print("scenario %d: ERROR %s" % (i, str(e)[:300]), flush=True)
            return
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        names = Names(sc)
        bad = [r for r in results if r[2] is not None]

        def count(ans):
            st, body = ans
            if st != 200 or not isinstance(body, dict):
                return None
            return len(body.get("allocation_requests", body.get("resource_providers", [])))
        with lock:
            with open(os.path.join(a.out, "results.jsonl"), "a") as fh:
                for (qi, q, d, pl, kp, unl) in results:
                    fh.write(json.dumps({"scenario": i, "q": qi, "path": q["path"],
                                         "mv": q["microversion"], "query": q["query"],
                                         "feats": q["feats"], "placement": [pl[0], count(pl)],
                                         "kubeplace": [kp[0], count(kp)],
                                         "agree": d is None,
                                         "category": d[0] if d else None}) + "\n")
            stats["scenarios"] += 1
            stats["queries"] += len(results)
            stats["agree"] += len(results) - len(bad)
            stats["disagree"] += len(bad)
            stats["providers"] += len(sc["providers"])
            stats["status200"] += sum(1 for r in results if r[3][0] == 200)
            stats["status400"] += sum(1 for r in results if r[3][0] == 400)
            stats["nonempty"] += sum(1 for r in results if r[3][0] == 200 and
                                     (r[3][1].get("allocation_requests") or
                                      r[3][1].get("resource_providers")))
            if bad:
                mpath = os.path.join(a.out, "scenario-%04d.yaml" % i)
                with open(mpath, "w") as fh:
                    fh.write("# seed %d scenario %d\n" % (a.seed, i) + manifest_yaml(sc))
            for (qi, q, d, pl, kp, unl) in bad:
                by_cat[d[0]] += 1
                rec = {"scenario": i, "query_index": qi, "category": d[0],
                       "query": q["query"], "microversion": q["microversion"], "path": q["path"],
                       "feats": q["feats"], "manifest": "scenario-%04d.yaml" % i,
                       "difference": d[1],
                       "placement": answer_view(pl, q, names),
                       "kubeplace": answer_view(kp, q, names)}
                if unl is not None:
                    rec["placement_without_limit"] = answer_view(unl, q, names)
                write_json(os.path.join(a.out, "s%04d-q%02d.json" % (i, qi)), rec)
                failures.append((rec, sc, q, kp))
        print("scenario %d: %d providers, %d queries, %d disagree (%s)"
              % (i, len(sc["providers"]), len(results), len(bad),
                 ", ".join(sorted({r[2][0] for r in bad}))), flush=True)

    ids = range(a.first_scenario, a.first_scenario + a.scenarios)
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        list(ex.map(one, ids))
    t_run = time.time() - t0

    live = None
    by_label = collections.Counter()
    if failures and (a.triage or a.minimize):
        live = LivePlacement()
    # Triage every disagreement on an in-process Placement, stock and patched.
    if failures and a.triage:
        t1 = time.time()
        by_scenario = collections.defaultdict(list)
        for f in failures:
            by_scenario[f[0]["scenario"]].append(f)
        for i in sorted(by_scenario):
            if time.time() - t1 > a.triage_budget:
                break
            sc = by_scenario[i][0][1]
            tmp = tempfile.mkdtemp(prefix="pdiff-triage-")
            try:
                mpath = os.path.join(tmp, "manifest.yaml")
                with open(mpath, "w") as fh:
                    fh.write(manifest_yaml(sc))
                live.load(mpath)
                for rec, _, q, kp in by_scenario[i]:
                    label, stock_cat = triage(live, sc, q, kp, Names(sc), scenario_root_of(sc))
                    rec["triage"] = label
                    if stock_cat is not None and stock_cat != rec["category"]:
                        rec["triage_note"] = "in-process stock Placement: %s" % stock_cat
                    write_json(os.path.join(a.out, "s%04d-q%02d.json"
                                            % (rec["scenario"], rec["query_index"])), rec)
            except Exception as e:
                print("triage of scenario %d failed: %s" % (i, e), flush=True)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    for rec, _, _, _ in failures:
        by_label["%s / %s" % (rec["category"], rec.get("triage", "not-triaged"))] += 1

    # Minimize disagreements of distinct kinds: (category, triage) first, then with the
    # query's features.
    minimized = []
    if a.minimize and failures:
        seen = set()
        picked = set()
        picks = []
        ordered = sorted(failures, key=lambda f: (len(f[1]["providers"]), len(f[2]["query"])))
        for keyf in (lambda r: (r["category"], r.get("triage")),
                     lambda r: (r["category"], r.get("triage"), tuple(r["feats"]))):
            for rec, sc, q, kp in ordered:
                k = keyf(rec)
                ident = (rec["scenario"], rec["query_index"])
                if k not in seen and ident not in picked:
                    seen.add(k)
                    picked.add(ident)
                    picks.append((rec, sc, q))
        picks = picks[:a.minimize]
        mz = Minimizer(a.kubeplace, live, a.minimize_budget)
        for n, (rec, sc, q) in enumerate(picks):
            t1 = time.time()
            label = rec.get("triage")
            msc, mq = mz.minimize(sc, q, rec["category"], label)
            d = os.path.join(a.out, "min-%02d-%s-%s" % (n, rec["category"].replace(":", "-"),
                                                        label or "untriaged"))
            os.makedirs(d)
            mpath = os.path.join(d, "manifest.yaml")
            with open(mpath, "w") as fh:
                fh.write(manifest_yaml(msc))
            # Re-check with a fresh oracle.py run (the reference oracle).
            tmp = tempfile.mkdtemp(prefix="pdiff-verify-")
            try:
                (_, _, dd, pl, kp, unl), = check_scenario(msc, [mq], a.kubeplace, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            names = Names(msc)
            out = {"from": "s%04d-q%02d.json" % (rec["scenario"], rec["query_index"]),
                   "category": rec["category"], "triage": label, "query": mq["query"],
                   "microversion": mq["microversion"], "path": mq["path"],
                   "original_query": q["query"],
                   "verified_with_fresh_oracle": dd is not None and dd[0] == rec["category"],
                   "difference": dd[1] if dd else None,
                   "placement": answer_view(pl, mq, names),
                   "kubeplace": answer_view(kp, mq, names),
                   "providers": len(msc["providers"]),
                   "repro": repro_commands(os.path.relpath(mpath, REPO), mq)}
            if unl is not None:
                out["placement_without_limit"] = answer_view(unl, mq, names)
            write_json(os.path.join(d, "failure.json"), out)
            minimized.append(out)
            print("minimized %s: %d -> %d providers, query %r, verified=%s, %.0f s"
                  % (os.path.basename(d), len(sc["providers"]), len(msc["providers"]),
                     mq["query"], out["verified_with_fresh_oracle"], time.time() - t1),
                  flush=True)
    if live is not None:
        live.close()

    summary = {"seed": a.seed, "scenarios": stats["scenarios"], "queries": stats["queries"],
               "agree": stats["agree"], "disagree": stats["disagree"],
               "agreement_percent": round(100.0 * stats["agree"] / max(1, stats["queries"]), 2),
               "by_category": dict(sorted(by_cat.items())),
               "by_category_and_triage": dict(sorted(by_label.items())),
               "providers": stats["providers"],
               "placement_status_200": stats["status200"],
               "placement_status_400": stats["status400"],
               "placement_nonempty_200": stats["nonempty"],
               "scenario_errors": scenario_errors,
               "minimized": len(minimized),
               "seconds_checking": round(t_run, 1), "seconds_total": round(time.time() - t0, 1)}
    write_json(os.path.join(a.out, "summary.json"), summary)
    print("SUMMARY scenarios=%d queries=%d agree=%d disagree=%d (%.2f%% agree) by category: %s"
          % (stats["scenarios"], stats["queries"], stats["agree"], stats["disagree"],
             summary["agreement_percent"],
             ", ".join("%s=%d" % kv for kv in sorted(by_cat.items())) or "none"), flush=True)
    for k, n in sorted(by_label.items()):
        print("  %-70s %d" % (k, n))


if __name__ == "__main__":
    bootstrap()
    main()
