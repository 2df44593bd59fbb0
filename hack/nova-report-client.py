#!/usr/bin/env python3
"""Nova's own Placement client against a Placement endpoint.

    $(hack/nova-venv.sh)/bin/python hack/nova-report-client.py URL TOKEN
    $(hack/nova-venv.sh)/bin/python hack/nova-report-client.py --keystone AUTH_URL \
        USERNAME PASSWORD PROJECT REGION

Drives nova.scheduler.client.report.SchedulerReportClient (the client nova-compute,
nova-scheduler, nova-conductor and nova-api share) the way those services do, against
URL with TOKEN in X-Auth-Token; no Keystone and no Nova database are needed. Prints one
JSON line per step, {"step", "ok", "got", "expected"}, and exits 1 if any step got
something else than real Placement 16 gives for the same calls. With --keystone, the
client logs in to Keystone with a password as nova-compute does with `[placement]
auth_type = password` (user and project in the domain Default) and finds Placement in
the service catalog (type placement, interface public, the region given) (the expected values were
taken from `hack/placement-oracle/oracle.py serve` on an empty cloud). The endpoint must
start empty: the providers and consumers have fixed uuids.

Steps: three compute nodes report their provider trees as nova-compute does (inventories
with allocation ratios and reserved amounts, standard and CUSTOM_ traits, aggregates, a
nested PCI device provider with a custom resource class); a restarted compute reads its
tree back; the scheduler builds its ResourceRequest from a flavor with a required and a
forbidden trait (plus the mandatory COMPUTE_STATUS_DISABLED pre-filter) and from a flavor
with a granular group for the PCI device, asks for allocation candidates and claims one;
a claim made on a stale candidate is refused; the quota code counts usages; a migration
moves an instance's allocations to its migration record; allocations are deleted; VGPU
inventory and an allocation on it are reshaped into a child provider; nova-api mirrors a
host aggregate; a compute node's providers are deleted; a shared storage pool in cn1's
aggregate joins cn1's tree and gives the disk of a claim.
"""

import json
import sys
import traceback
import warnings

# Nova imports eventlet, which warns on import that it is deprecated: not ours to fix.
warnings.simplefilter("ignore")

from keystoneauth1 import adapter, session, token_endpoint  # noqa: E402
from keystoneauth1.identity import v3 as identity_v3  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import request_filter  # noqa: E402
from nova.scheduler import utils as scheduler_utils  # noqa: E402
from nova.scheduler.client import report  # noqa: E402

PROJECT = "6f1d0e52-0000-4000-8000-00000000000a"
USER = "6f1d0e52-0000-4000-8000-00000000000b"
CN1 = "c0a80001-0000-4000-8000-0000000000c1"
CN1_PCI = "c0a80001-0000-4000-8000-0000000000d1"
CN2 = "c0a80001-0000-4000-8000-0000000000c2"
CN3 = "c0a80001-0000-4000-8000-0000000000c3"
CN3_GPU = "c0a80001-0000-4000-8000-0000000000d3"
AGG = "a66a0000-0000-4000-8000-000000000001"
AGG2 = "a66a0000-0000-4000-8000-000000000002"
VM_A = "9a000000-0000-4000-8000-0000000000a1"
VM_B = "9a000000-0000-4000-8000-0000000000b1"
VM_C = "9a000000-0000-4000-8000-0000000000c1"
VM_D = "9a000000-0000-4000-8000-0000000000d1"
MIGRATION = "3e000000-0000-4000-8000-0000000000a1"
SHARED = "5a000000-0000-4000-8000-000000000001"
PCI_CLASS = "CUSTOM_PCI_8086_154D"


def inventory(vcpus, memory_mb, disk_gb):
    """What the libvirt driver reports for a host: Nova's default initial allocation
    ratios (4.0 for VCPU, 1.0 for memory and disk) and 512 MB reserved for the host."""
    return {
        "VCPU": {"total": vcpus, "reserved": 0, "min_unit": 1, "max_unit": vcpus,
                 "step_size": 1, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": memory_mb, "reserved": 512, "min_unit": 1,
                      "max_unit": memory_mb, "step_size": 1, "allocation_ratio": 1.0},
        "DISK_GB": {"total": disk_gb, "reserved": 0, "min_unit": 1, "max_unit": disk_gb,
                    "step_size": 1, "allocation_ratio": 1.0},
    }


PCI_INVENTORY = {PCI_CLASS: {"total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1,
                             "step_size": 1, "allocation_ratio": 1.0}}
VGPU_INVENTORY = {"VGPU": {"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4,
                           "step_size": 1, "allocation_ratio": 1.0}}

# name, uuid, traits, aggregates; cn1 also gets the PCI child.
COMPUTES = [
    ("cn1", CN1, {"COMPUTE_NODE", "HW_CPU_X86_AVX2", "CUSTOM_GOLD"}, {AGG}),
    # Gold, but with the trait the flavor forbids.
    ("cn2", CN2, {"COMPUTE_NODE", "CUSTOM_GOLD", "HW_CPU_X86_SGX"}, {AGG}),
    # Not gold.
    ("cn3", CN3, {"COMPUTE_NODE", "HW_CPU_X86_AVX2"}, set()),
]

failures = []
# (auth_url, username, password, project, region) with --keystone.
KEYSTONE = None


def step(name, got, expected):
    ok = got == expected
    if not ok:
        failures.append(name)
    print(json.dumps({"step": name, "ok": ok, "got": got, "expected": expected},
                     sort_keys=True), flush=True)


def client(url, token):
    """A report client over an explicit keystoneauth Adapter: a static token and the
    endpoint given, as `[placement] auth_type = admin_token` would set up. raise_exc is
    off because the report client reads statuses itself. The timeout turns a server that
    stops answering into a failed run instead of a hung test."""
    if KEYSTONE:
        auth_url, username, password, project, region = KEYSTONE
        auth = identity_v3.Password(
            auth_url=auth_url, username=username, password=password,
            project_name=project, user_domain_name="Default",
            project_domain_name="Default")
        sess = session.Session(auth=auth, timeout=60)
        ad = adapter.Adapter(sess, service_type="placement", interface="public",
                             region_name=region, raise_exc=False)
        return report.SchedulerReportClient(adapter=ad)
    sess = session.Session(auth=token_endpoint.Token(url, token), timeout=60)
    ad = adapter.Adapter(sess, service_type="placement", endpoint_override=url,
                         raise_exc=False)
    return report.SchedulerReportClient(adapter=ad)


def tree_view(tree, uuid):
    d = tree.data(uuid)
    return {"name": d.name, "parent": d.parent_uuid, "inventory": d.inventory,
            "traits": sorted(d.traits), "aggregates": sorted(d.aggregates)}


def request_spec(flavor, instance):
    spec = objects.RequestSpec(
        flavor=flavor, image=objects.ImageMeta.from_dict({"properties": {}}),
        project_id=PROJECT, user_id=USER, num_instances=1, is_bfv=False,
        scheduler_hints={}, availability_zone=None, requested_destination=None,
        requested_resources=[], instance_uuid=instance)
    # The scheduler's mandatory pre-filter (the others need Nova's database or are off
    # by default): disabled computes carry COMPUTE_STATUS_DISABLED.
    request_filter.compute_status_filter(None, spec)
    return spec


def flavor(vcpus, memory_mb, root_gb, extra_specs):
    return objects.Flavor(vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb,
                          ephemeral_gb=0, swap=0, extra_specs=extra_specs)


def candidates(sched, ctx, spec):
    """The scheduler's GET /allocation_candidates for a request spec."""
    return sched.get_allocation_candidates(
        ctx, scheduler_utils.resources_from_request_spec(ctx, spec, None))


def candidates_view(acs):
    """Each candidate as {provider: resources}, in a stable order."""
    reqs = acs[0]
    if reqs is None:
        return None
    out = [{rp: a["resources"] for rp, a in r["allocations"].items()} for r in reqs]
    return sorted(out, key=lambda c: json.dumps(c, sort_keys=True))


def summary_view(summaries, uuid):
    """A provider summary with its traits sorted (Placement lists them in set order)."""
    if not summaries or uuid not in summaries:
        return None
    return {**summaries[uuid], "traits": sorted(summaries[uuid]["traits"])}


def allocs_view(allocs):
    return {rp: a["resources"] for rp, a in allocs["allocations"].items()}


def main():
    global KEYSTONE
    if sys.argv[1] == "--keystone":
        KEYSTONE = tuple(sys.argv[2:7])
        url, token = None, None
    else:
        url, token = sys.argv[1], sys.argv[2]
    objects.register_all()
    nova.conf.CONF([], project="nova")
    ctx = nova_context.RequestContext(user_id=USER, project_id=PROJECT, is_admin=True)

    # --- nova-compute: each compute's resource tracker reports its tree.
    for name, uuid, traits, aggs in COMPUTES:
        rc = client(url, token)
        tree = rc.get_provider_tree_and_ensure_root(ctx, uuid, name=name)
        step(f"ensure_root {name}", tree_view(tree, uuid),
             {"name": name, "parent": None, "inventory": {}, "traits": [],
              "aggregates": []})
        # What a virt driver's update_provider_tree does to the tree it is given.
        tree.update_inventory(name, inventory(8, 16384, 100))
        tree.update_traits(name, traits)
        tree.update_aggregates(name, aggs)
        if uuid == CN1:
            # PCI in Placement: one child per device, named after its address.
            tree.new_child(f"{name}_pci_0000_84_00_0", uuid, uuid=CN1_PCI)
            tree.update_inventory(CN1_PCI, PCI_INVENTORY)
            tree.update_traits(CN1_PCI, {"CUSTOM_PCI_TRUSTED"})
        rc.update_from_provider_tree(ctx, tree)
        # The report client's cache after the flush holds the generations it was given.
        cached = rc._provider_tree
        step(f"update_from_provider_tree {name}",
             {"generation": cached.data(uuid).generation, "root": tree_view(cached, uuid)},
             # One generation per write: inventories, traits, and aggregates when any.
             {"generation": 3 if aggs else 2,
              "root": {"name": name, "parent": None, "inventory": inventory(8, 16384, 100),
                       "traits": sorted(traits), "aggregates": sorted(aggs)}})
        # A second periodic update with nothing changed sends no writes.
        rc.update_from_provider_tree(ctx, rc.get_provider_tree_and_ensure_root(ctx, uuid))
        step(f"update_from_provider_tree again {name}",
             rc._provider_tree.data(uuid).generation, 3 if aggs else 2)

    # Two workers creating the same provider at once (the loser's GET found nothing, then
    # its POST is refused): Nova reads the provider back when the conflict is on the
    # uuid, and gives up when it is on the name alone.
    racer = client(url, token)
    got = racer._create_resource_provider(ctx, CN2, "cn2")
    step("create_resource_provider race",
         {k: got.get(k) for k in ("uuid", "name", "generation")} if got else got,
         {"uuid": CN2, "name": "cn2", "generation": 3})
    try:
        racer._create_resource_provider(ctx, "c0a80001-0000-4000-8000-0000000000f2", "cn2")
        clash = None
    except Exception as e:
        clash = type(e).__name__
    step("create_resource_provider name clash", clash, "ResourceProviderCreationFailed")

    # --- nova-compute restarted: a fresh client reads the tree back from Placement.
    rc = client(url, token)
    tree = rc.get_provider_tree_and_ensure_root(ctx, CN1, name="cn1")
    step("restarted compute reads its tree",
         {"uuids": tree.get_provider_uuids(), "root": tree_view(tree, CN1),
          "child": tree_view(tree, CN1_PCI),
          "generations": [tree.data(CN1).generation, tree.data(CN1_PCI).generation]},
         {"uuids": [CN1, CN1_PCI],
          "root": {"name": "cn1", "parent": None, "inventory": inventory(8, 16384, 100),
                   "traits": ["COMPUTE_NODE", "CUSTOM_GOLD", "HW_CPU_X86_AVX2"],
                   "aggregates": [AGG]},
          "child": {"name": "cn1_pci_0000_84_00_0", "parent": CN1,
                    "inventory": PCI_INVENTORY, "traits": ["CUSTOM_PCI_TRUSTED"],
                    "aggregates": []},
          "generations": [3, 2]})
    # The host reserves more memory: only the inventory changes.
    more_reserved = inventory(8, 16384, 100)
    more_reserved["MEMORY_MB"]["reserved"] = 1024
    tree.update_inventory("cn1", more_reserved)
    rc.update_from_provider_tree(ctx, tree)
    step("inventory change",
         {"generation": rc._provider_tree.data(CN1).generation,
          "MEMORY_MB reserved": rc._provider_tree.data(CN1).inventory["MEMORY_MB"]["reserved"]},
         {"generation": 4, "MEMORY_MB reserved": 1024})
    step("get_provider_by_name",
         rc.get_provider_by_name(ctx, "cn1_pci_0000_84_00_0")["uuid"], CN1_PCI)

    # --- nova-scheduler: a flavor requiring CUSTOM_GOLD and forbidding HW_CPU_X86_SGX.
    sched = client(url, token)
    big = flavor(4, 8192, 20, {"trait:CUSTOM_GOLD": "required",
                               "trait:HW_CPU_X86_SGX": "forbidden"})
    spec_a = request_spec(big, VM_A)
    res_req = scheduler_utils.resources_from_request_spec(ctx, spec_a, None)
    step("resource request", res_req.to_querystring(),
         "limit=1000&required=CUSTOM_GOLD%2C%21HW_CPU_X86_SGX"
         "&resources=DISK_GB%3A20%2CMEMORY_MB%3A8192%2CVCPU%3A4"
         "&root_required=%21COMPUTE_STATUS_DISABLED")
    acs_a = sched.get_allocation_candidates(ctx, res_req)
    want_a = {CN1: {"DISK_GB": 20, "MEMORY_MB": 8192, "VCPU": 4}}
    step("get_allocation_candidates",
         {"version": acs_a[2], "candidates": candidates_view(acs_a),
          "summary cn1": summary_view(acs_a[1], CN1)},
         {"version": "1.36", "candidates": [want_a],
          "summary cn1": {"resources": {"VCPU": {"capacity": 32, "used": 0},
                                        "MEMORY_MB": {"capacity": 15360, "used": 0},
                                        "DISK_GB": {"capacity": 100, "used": 0}},
                          "traits": ["COMPUTE_NODE", "CUSTOM_GOLD", "HW_CPU_X86_AVX2"],
                          "parent_provider_uuid": None, "root_provider_uuid": CN1}})
    # A second scheduler worker places VM_B at the same time and sees the same answer.
    spec_b = request_spec(big, VM_B)
    acs_b = candidates(sched, ctx, spec_b)
    step("get_allocation_candidates for a second instance", candidates_view(acs_b), [want_a])

    claimed = scheduler_utils.claim_resources(ctx, sched, spec_a, VM_A, acs_a[0][0],
                                              allocation_request_version=acs_a[2])
    step("claim_resources", claimed, True)
    allocs = sched.get_allocs_for_consumer(ctx, VM_A)
    step("get_allocs_for_consumer",
         {"allocations": allocs_view(allocs), "project_id": allocs["project_id"],
          "user_id": allocs["user_id"], "consumer_generation": allocs["consumer_generation"]},
         {"allocations": want_a, "project_id": PROJECT, "user_id": USER,
          "consumer_generation": 1})
    # A write from a stale view of the consumer (generation 0 where it is 1): Nova tells
    # this conflict from a provider's by the words "consumer generation conflict".
    stale = {"allocations": {CN1: {"resources": want_a[CN1]}}, "project_id": PROJECT,
             "user_id": USER, "consumer_generation": 0}
    try:
        outcome = sched.put_allocations(ctx, VM_A, stale)
    except Exception as e:
        outcome = type(e).__name__
    step("put_allocations stale consumer generation", outcome, "AllocationUpdateFailed")

    # The compute's cached generation of cn1 is older than the claim (Placement moves a
    # provider's generation with its allocations): its next inventory change is a
    # conflict, and the resource tracker redrives it from a fresh tree.
    tree = rc.get_provider_tree_and_ensure_root(ctx, CN1)
    tree.update_inventory("cn1", inventory(8, 16384, 100))
    try:
        rc.update_from_provider_tree(ctx, tree)
        outcome = "updated"
    except Exception as e:
        outcome = type(e).__name__
    tree = rc.get_provider_tree_and_ensure_root(ctx, CN1)
    tree.update_inventory("cn1", inventory(8, 16384, 100))
    rc.update_from_provider_tree(ctx, tree)
    step("inventory change on a stale generation, then redriven",
         {"first": outcome, "generation": rc._provider_tree.data(CN1).generation,
          "MEMORY_MB reserved": rc._provider_tree.data(CN1).inventory["MEMORY_MB"]["reserved"]},
         {"first": "ResourceProviderUpdateConflict", "generation": 6,
          "MEMORY_MB reserved": 512})
    # Removing a class the instance uses is refused with Placement's inventory-in-use code.
    tree = rc.get_provider_tree_and_ensure_root(ctx, CN1)
    no_disk = inventory(8, 16384, 100)
    del no_disk["DISK_GB"]
    tree.update_inventory("cn1", no_disk)
    try:
        rc.update_from_provider_tree(ctx, tree)
        outcome = "updated"
    except Exception as e:
        outcome = type(e).__name__
    rc.clear_provider_cache()
    step("inventory in use", outcome, "InventoryInUse")

    # VM_B's candidate is stale: 8192 MB more does not fit in the 15360 - 8192 left.
    # Placement refuses the claim and Nova's claim_resources answers False (the
    # scheduler then tries the next candidate or fails the build).
    claimed_b = scheduler_utils.claim_resources(ctx, sched, spec_b, VM_B, acs_b[0][0],
                                                allocation_request_version=acs_b[2])
    step("claim_resources over capacity", claimed_b, False)
    step("get_allocs_for_consumer after the refused claim",
         sched.get_allocs_for_consumer(ctx, VM_B)["allocations"], {})
    step("get_allocation_candidates when full",
         candidates_view(candidates(sched, ctx, spec_b)), [])

    # A flavor with a granular group for the PCI device (its own request group, as
    # Nova makes for PCI in Placement), on the same host as the CPU and memory.
    pci = flavor(1, 1024, 10, {f"resources1:{PCI_CLASS}": "1",
                               "trait1:CUSTOM_PCI_TRUSTED": "required",
                               "group_policy": "none"})
    spec_c = request_spec(pci, VM_C)
    acs_c = candidates(sched, ctx, spec_c)
    want_c = {CN1: {"DISK_GB": 10, "MEMORY_MB": 1024, "VCPU": 1}, CN1_PCI: {PCI_CLASS: 1}}
    step("get_allocation_candidates nested",
         {"candidates": candidates_view(acs_c),
          "mappings": {k: sorted(v) for k, v in acs_c[0][0]["mappings"].items()}
          if acs_c[0] else None},
         {"candidates": [want_c], "mappings": {"": [CN1], "1": [CN1_PCI]}})
    claimed_c = scheduler_utils.claim_resources(ctx, sched, spec_c, VM_C, acs_c[0][0],
                                                allocation_request_version=acs_c[2])
    step("claim_resources nested", claimed_c, True)

    # --- nova-api's quota code counts cores and RAM from Placement's usages.
    step("get_usages_counts_for_quota",
         sched.get_usages_counts_for_quota(ctx, PROJECT, user_id=USER),
         {"project": {"cores": 5, "ram": 9216}, "user": {"cores": 5, "ram": 9216}})
    step("get_usages_counts_for_quota other project",
         sched.get_usages_counts_for_quota(ctx, "someone-else"),
         {"project": {"cores": 0, "ram": 0}})
    step("provider usages cn1",
         sched.get_allocations_for_resource_provider(ctx, CN1).allocations,
         {VM_A: {"resources": want_a[CN1]}, VM_C: {"resources": want_c[CN1]}})

    # --- nova-conductor: a cold migration moves VM_A's allocations to the migration
    # record (the destination's are claimed for the instance afterwards).
    moved = sched.move_allocations(ctx, VM_A, MIGRATION)
    step("move_allocations",
         {"moved": moved,
          "instance": sched.get_allocs_for_consumer(ctx, VM_A)["allocations"],
          "migration": allocs_view(sched.get_allocs_for_consumer(ctx, MIGRATION))},
         {"moved": True, "instance": {}, "migration": want_a})

    # --- deleting: the migration record's allocations go when it is confirmed, the
    # instance's when it is deleted; deleting again finds nothing.
    step("delete_allocation_for_instance migration",
         sched.delete_allocation_for_instance(ctx, MIGRATION, consumer_type="migration"),
         True)
    step("delete_allocation_for_instance",
         sched.delete_allocation_for_instance(ctx, VM_C), True)
    step("delete_allocation_for_instance again",
         sched.delete_allocation_for_instance(ctx, VM_C), False)
    step("delete_allocation_for_instance force, nothing left",
         sched.delete_allocation_for_instance(ctx, VM_A, force=True), False)
    step("get_usages_counts_for_quota after deletes",
         sched.get_usages_counts_for_quota(ctx, PROJECT, user_id=USER),
         {"project": {"cores": 0, "ram": 0}, "user": {"cores": 0, "ram": 0}})
    step("get_allocation_candidates after deletes",
         candidates_view(candidates(sched, ctx, spec_b)), [want_a])

    # --- a reshape, as the libvirt driver does when VGPUs move from the compute node to
    # a child per physical GPU: inventories and the allocations on them move at once.
    compute = client(url, token)
    tree = compute.get_provider_tree_and_ensure_root(ctx, CN3, name="cn3")
    tree.update_inventory("cn3", {**inventory(8, 16384, 100), **VGPU_INVENTORY})
    compute.update_from_provider_tree(ctx, tree)
    spec_d = request_spec(flavor(1, 512, 1, {"resources:VGPU": "1"}), VM_D)
    acs_d = candidates(sched, ctx, spec_d)
    want_d = {CN3: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1, "VGPU": 1}}
    step("get_allocation_candidates VGPU", candidates_view(acs_d), [want_d])
    step("claim_resources VGPU",
         scheduler_utils.claim_resources(ctx, sched, spec_d, VM_D, acs_d[0][0],
                                         allocation_request_version=acs_d[2]), True)
    # The driver reshapes when nova-compute starts (after an upgrade): a fresh client,
    # whose generations include the claim above.
    compute = client(url, token)
    tree = compute.get_provider_tree_and_ensure_root(ctx, CN3, name="cn3")
    tree.new_child("cn3_pci_0000_81_00_0", CN3, uuid=CN3_GPU)
    tree.update_inventory(CN3_GPU, VGPU_INVENTORY)
    tree.update_inventory("cn3", inventory(8, 16384, 100))
    allocs = compute.get_allocations_for_provider_tree(ctx, "cn3")
    moved_vgpu = allocs[VM_D]["allocations"][CN3]["resources"].pop("VGPU")
    allocs[VM_D]["allocations"][CN3_GPU] = {"resources": {"VGPU": moved_vgpu}}
    compute.update_from_provider_tree(ctx, tree, allocations=allocs)
    after = compute.get_provider_tree_and_ensure_root(ctx, CN3)
    reshaped = sched.get_allocs_for_consumer(ctx, VM_D)
    step("update_from_provider_tree reshape",
         {"root inventory": sorted(after.data(CN3).inventory),
          "child inventory": after.data(CN3_GPU).inventory,
          "allocations": allocs_view(reshaped),
          "consumer generation": reshaped["consumer_generation"]},
         {"root inventory": ["DISK_GB", "MEMORY_MB", "VCPU"],
          "child inventory": VGPU_INVENTORY,
          "allocations": {CN3: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1},
                          CN3_GPU: {"VGPU": 1}},
          "consumer generation": 2})

    # --- nova-api mirrors host aggregates into Placement aggregates.
    compute.aggregate_add_host(ctx, AGG2, host_name="cn3")
    step("aggregate_add_host",
         sorted(compute._get_provider_aggregates(ctx, CN3).aggregates), [AGG2])
    compute.aggregate_remove_host(ctx, AGG2, "cn3")
    step("aggregate_remove_host",
         sorted(compute._get_provider_aggregates(ctx, CN3).aggregates), [])

    # --- the compute service is deleted: its instances' allocations, then its tree.
    step("delete_allocation_for_instance VGPU",
         sched.delete_allocation_for_instance(ctx, VM_D, force=True), True)
    node = objects.ComputeNode(uuid=CN3, hypervisor_hostname="cn3", host="cn3")
    compute.delete_resource_provider(ctx, node)
    step("delete_resource_provider",
         [rp["uuid"] for rp in sched.get_providers_in_tree(ctx, CN1)]
         + [sched._get_resource_provider(ctx, u) for u in (CN3, CN3_GPU)],
         [CN1, CN1_PCI, None, None])

    # --- shared storage: an operator's DISK_GB pool shared with cn1's aggregate. The
    # compute sees it in its tree, and the scheduler gets disk from it or from the host.
    op = client(url, token)
    op.get_provider_tree_and_ensure_root(ctx, SHARED, name="shared-storage")
    op.set_inventory_for_provider(ctx, SHARED, {"DISK_GB": {
        "total": 1000, "reserved": 0, "min_unit": 1, "max_unit": 1000, "step_size": 1,
        "allocation_ratio": 1.0}})
    op.set_traits_for_provider(ctx, SHARED, {"MISC_SHARES_VIA_AGGREGATE"})
    op.set_aggregates_for_provider(ctx, SHARED, {AGG})
    step("sharing provider in the compute's tree",
         client(url, token).get_provider_tree_and_ensure_root(ctx, CN1).get_provider_uuids(),
         [CN1, CN1_PCI, SHARED])
    spec_e = request_spec(flavor(1, 512, 500, {"trait:CUSTOM_GOLD": "required",
                                               "trait:HW_CPU_X86_SGX": "forbidden"}), VM_A)
    acs_e = candidates(sched, ctx, spec_e)
    want_e = {SHARED: {"DISK_GB": 500}, CN1: {"MEMORY_MB": 512, "VCPU": 1}}
    step("get_allocation_candidates shared disk",
         {"candidates": candidates_view(acs_e),
          "mappings": [sorted(r["mappings"][""]) for r in acs_e[0] or []]},
         {"candidates": [want_e], "mappings": [sorted([SHARED, CN1])]})
    step("claim_resources shared disk",
         {"claimed": scheduler_utils.claim_resources(
             ctx, sched, spec_e, VM_A, acs_e[0][0], allocation_request_version=acs_e[2]),
          "allocations": allocs_view(sched.get_allocs_for_consumer(ctx, VM_A))},
         {"claimed": True, "allocations": want_e})

    if failures:
        print(f"nova-report-client: {len(failures)} step(s) differ from Placement: "
              + ", ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:
        # A call Nova could not complete (an answer it does not accept) ends the run;
        # the last line says which and the traceback shows where.
        traceback.print_exc()
        print(json.dumps({"step": "exception", "ok": False, "expected": None,
                          "got": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)
