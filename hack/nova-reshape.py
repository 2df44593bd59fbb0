#!/usr/bin/env python3
"""Nova's reshape scenario (its functional test_report_client's
test_update_from_provider_tree_reshape) driven through Nova's own report client against
a Placement endpoint.

    $(hack/nova-venv.sh)/bin/python hack/nova-reshape.py URL TOKEN

Builds the test's provider tree with nova.scheduler.client.report.SchedulerReportClient
(a compute node with two NUMA children, a sharing storage provider in the compute's
aggregate, another compute in that aggregate) and its allocations, then reshapes as the
test does: two reshapes that change nothing, one that adds CUSTOM_FOO inventory and
allocations everywhere, one that folds every child's inventory into the compute node
without moving the allocations off them (which must fail as Placement fails it: a
ReshapeFailed carrying `placement.inventory.inuse`, the code Nova's resource tracker reads),
the same with the allocations moved, and the way back. Prints one JSON line per step,
{"step", "got"}, for comparing with real Placement 16's run of the same script; exits 1
when a call Nova makes raises where the test expects none. The endpoint must start empty:
the providers and consumers have fixed uuids.
"""

import copy
import json
import sys
import traceback
import warnings

# Nova imports eventlet, which warns on import that it is deprecated: not ours to fix.
warnings.simplefilter("ignore")

from keystoneauth1 import adapter, session, token_endpoint  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler.client import report  # noqa: E402

COMPUTE = "c0a80001-0000-4000-8000-00000000aa01"
COMPUTE_NAME = "computehost"
NUMA1 = "c0a80001-0000-4000-8000-00000000aa11"
NUMA2 = "c0a80001-0000-4000-8000-00000000aa12"
SSP = "5a000000-0000-4000-8000-00000000aa01"
OTHERCN = "c0a80001-0000-4000-8000-00000000aa02"
AGG1 = "a66a0000-0000-4000-8000-00000000aa01"
CN_INST1 = "9a000000-0000-4000-8000-00000000aa01"
CN_INST2 = "9a000000-0000-4000-8000-00000000aa02"
OTHERCN_INST = "9a000000-0000-4000-8000-00000000aa03"
PROJ = "6f1d0e52-0000-4000-8000-00000000aa0a"
USER = "6f1d0e52-0000-4000-8000-00000000aa0b"


def step(name, got):
    print(json.dumps({"step": name, "got": got}, sort_keys=True), flush=True)


class ServiceToken(token_endpoint.Token):
    """A static token that also claims the roles of nova-compute's service user. Placement's
    noauth2 takes roles from X-Roles, and its reshaper policy wants `service`, which its
    `admin` token alone is not; kubeplace's static token is allowed everything and reads
    the token only."""

    def get_headers(self, session, **kwargs):
        return {"X-Auth-Token": self.token, "X-Roles": "admin,member,reader,service"}


def client(url, token):
    sess = session.Session(auth=ServiceToken(url, token), timeout=60)
    ad = adapter.Adapter(sess, service_type="placement", endpoint_override=url,
                         raise_exc=False)
    return report.SchedulerReportClient(adapter=ad)


def tree_view(tree):
    """What the test's assertProviderTree compares: per provider its parent, inventory
    totals, aggregates and traits."""
    out = {}
    for uuid in sorted(tree.get_provider_uuids()):
        d = tree.data(uuid)
        out[uuid] = {"parent": d.parent_uuid,
                     "inventory": {rc: inv["total"] for rc, inv in d.inventory.items()},
                     "aggregates": sorted(d.aggregates), "traits": sorted(d.traits)}
    return out


def allocs_view(allocs):
    """What the test's assertAllocations compares: each consumer's resources per provider,
    project and user (generations left out)."""
    return {c: {"allocations": {rp: a["resources"] for rp, a in v["allocations"].items()},
                "project_id": v.get("project_id"), "user_id": v.get("user_id")}
            for c, v in allocs.items()}


def reshape_failure(rc, ctx, tree, allocs):
    """The reshape the test expects to fail: what Nova raised and the code it carries."""
    try:
        rc.update_from_provider_tree(ctx, tree, allocations=allocs)
    except exception.ReshapeFailed as e:
        text = e.kwargs.get("error", "")
        try:
            code = json.loads(text)["errors"][0]["code"]
        except (ValueError, KeyError, IndexError, TypeError):
            code = None
        return {"raised": "ReshapeFailed", "code": code,
                "inventory.inuse in message": "placement.inventory.inuse" in e.format_message()}
    return {"raised": None}


def set_up_provider_tree(rc, ctx):
    """The test's _set_up_provider_tree."""
    tree = rc.get_provider_tree_and_ensure_root(ctx, COMPUTE, name=COMPUTE_NAME)
    tree.update_inventory(COMPUTE, {"MEMORY_MB": {"total": 2048},
                                    "SRIOV_NET_VF": {"total": 2}})
    tree.update_aggregates(COMPUTE, [AGG1])
    numa = {"VCPU": {"total": 8}, "CUSTOM_PCPU": {"total": 8}, "SRIOV_NET_VF": {"total": 4}}
    tree.new_child("numa1", COMPUTE, uuid=NUMA1)
    tree.update_inventory("numa1", numa)
    tree.new_child("numa2", COMPUTE, uuid=NUMA2)
    tree.update_inventory("numa2", numa)
    tree.new_root("ssp", SSP)
    tree.update_inventory(SSP, {"DISK_GB": {"total": 500}})
    tree.update_aggregates(SSP, [AGG1])
    tree.update_traits(SSP, ["MISC_SHARES_VIA_AGGREGATE"])
    rc.update_from_provider_tree(ctx, tree)
    # Another compute, not in this client's cache, in the same aggregate.
    resp = rc.post("/resource_providers", {"uuid": OTHERCN, "name": "othercn"},
                   version="1.20")
    resp = rc.put("/resource_providers/%s/inventories" % OTHERCN,
                  {"inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024}},
                   "resource_provider_generation": resp.json()["generation"]})
    rc.put("/resource_providers/%s/aggregates" % OTHERCN,
           {"aggregates": [AGG1],
            "resource_provider_generation": resp.json()["resource_provider_generation"]},
           version="1.19")


def set_up_allocs(rc):
    """The test's _set_up_provider_tree_allocs."""
    body = {
        CN_INST1: {"allocations": {
            COMPUTE: {"resources": {"MEMORY_MB": 512, "SRIOV_NET_VF": 1}},
            NUMA1: {"resources": {"VCPU": 2, "CUSTOM_PCPU": 2}},
            SSP: {"resources": {"DISK_GB": 100}}},
            "consumer_generation": None, "project_id": PROJ, "user_id": USER},
        CN_INST2: {"allocations": {
            COMPUTE: {"resources": {"MEMORY_MB": 256}},
            NUMA2: {"resources": {"CUSTOM_PCPU": 1, "SRIOV_NET_VF": 1}},
            SSP: {"resources": {"DISK_GB": 50}}},
            "consumer_generation": None, "project_id": PROJ, "user_id": USER},
    }
    for consumer, b in body.items():
        rc.put("/allocations/" + consumer, b, version="1.28")
    rc.put("/allocations/" + OTHERCN_INST, {
        "allocations": {OTHERCN: {"resources": {"VCPU": 2, "MEMORY_MB": 64}},
                        SSP: {"resources": {"DISK_GB": 30}}},
        "consumer_generation": None, "project_id": PROJ, "user_id": USER}, version="1.28")


def read(rc, ctx, name):
    tree = rc.get_provider_tree_and_ensure_root(ctx, COMPUTE)
    allocs = rc.get_allocations_for_provider_tree(ctx, COMPUTE_NAME)
    step(name, {"tree": tree_view(tree), "allocations": allocs_view(allocs)})
    return tree, allocs


def main():
    url, token = sys.argv[1], sys.argv[2]
    objects.register_all()
    nova.conf.CONF([], project="nova")
    ctx = nova_context.get_admin_context()
    rc = client(url, token)

    set_up_provider_tree(rc, ctx)
    # A reshape that changes nothing: no allocations yet.
    tree, allocs = read(rc, ctx, "set up")
    rc.update_from_provider_tree(ctx, tree, allocations=allocs)
    orig_tree = tree_view(tree)

    set_up_allocs(rc)
    # The allocations moved the generations: the test clears the cache rather than
    # redrive on the conflict.
    rc.clear_provider_cache()
    tree, allocs = read(rc, ctx, "allocated")
    orig_allocs = copy.deepcopy(allocs)
    rc.update_from_provider_tree(ctx, tree, allocations=allocs)

    # CUSTOM_FOO inventory on every provider of the tree, allocated where allocations are.
    tree, allocs = read(rc, ctx, "after null reshapes")
    for rp in tree.get_provider_uuids():
        tree.update_inventory(rp, dict(tree.data(rp).inventory, CUSTOM_FOO={"total": 10}))
    for alloc in allocs.values():
        for res in alloc["allocations"].values():
            res["resources"]["CUSTOM_FOO"] = 1
    rc.update_from_provider_tree(ctx, tree, allocations=allocs)

    # Everything onto the compute node: the children go, their inventory summed on it.
    tree, allocs = read(rc, ctx, "CUSTOM_FOO added")
    cum_inv = {}
    for rp in tree.get_provider_uuids():
        for rc_name, inv in tree.data(rp).inventory.items():
            cum_inv.setdefault(rc_name, {"total": 0})["total"] += inv["total"]
        if rp not in (COMPUTE, SSP):
            tree.remove(rp)
    tree.update_inventory(COMPUTE, cum_inv)
    tree.update_aggregates(COMPUTE, set())
    tree.update_traits(COMPUTE, ["CUSTOM_ALL_IN_ONE"])
    # First without moving the allocations off the children: Placement refuses it as
    # inventory in use.
    step("reshape leaving allocations on removed inventory",
         reshape_failure(rc, ctx, tree, allocs))

    for alloc in allocs.values():
        summed = {}
        for res in alloc["allocations"].values():
            for rc_name, amount in res["resources"].items():
                summed[rc_name] = summed.get(rc_name, 0) + amount
        alloc["allocations"] = {COMPUTE: {"resources": summed}}
    rc.update_from_provider_tree(ctx, tree, allocations=allocs)

    # And back to the tree as it was first.
    tree, allocs = read(rc, ctx, "all in one")
    for rp, data in orig_tree.items():
        if not tree.exists(rp):
            tree.new_child({NUMA1: "numa1", NUMA2: "numa2"}[rp], data["parent"], uuid=rp)
        inv = {rc_name: {"total": total} for rc_name, total in data["inventory"].items()}
        tree.update_inventory(rp, inv)
        tree.update_traits(rp, data["traits"])
        tree.update_aggregates(rp, data["aggregates"])
    for consumer, orig in orig_allocs.items():
        allocs[consumer]["allocations"] = orig["allocations"]
    rc.update_from_provider_tree(ctx, tree, allocations=allocs)
    read(rc, ctx, "back")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:
        traceback.print_exc()
        print(json.dumps({"step": "exception", "got": f"{type(e).__name__}: {e}"}),
              flush=True)
        sys.exit(1)
