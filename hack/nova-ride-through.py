#!/usr/bin/env python3
"""Nova's own Placement client in a loop, as a scheduler and a conductor use it while
servers boot, migrate and are deleted.

    $(hack/nova-venv.sh)/bin/python hack/nova-ride-through.py URL TOKEN SECONDS

Reports one compute node (uuid random, 4096 VCPU) with nova-compute's
update_from_provider_tree, prints {"ready": true}, then for SECONDS repeats: the
scheduler's GET /allocation_candidates for a one-VCPU flavor and claim_resources of the
first candidate for a new instance; every third instance is migrated (move_allocations
to its migration record, then the migration's allocations deleted as the conductor does
on confirm); every instance two claims old is deleted (delete_allocation_for_instance).
Each operation is one JSON line {"op", "ok", "started", "ended", "detail"} with wall-clock
seconds, so a caller can say which ran while something else happened. `ok` is what Nova
itself would take as success: a claim that returns False is Nova's "no valid host".
Exits 1 if any operation failed.
"""

import json
import logging
import sys
import time
import traceback
import uuid as uuidlib
import warnings

# Nova imports eventlet, which warns on import that it is deprecated: not ours to fix.
warnings.simplefilter("ignore")

from keystoneauth1 import adapter, session, token_endpoint  # noqa: E402
import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import utils as scheduler_utils  # noqa: E402
from nova.scheduler.client import report  # noqa: E402

PROJECT = "6f1d0e52-0000-4000-8000-0000000000aa"
USER = "6f1d0e52-0000-4000-8000-0000000000bb"

failed = 0


def emit(op, ok, started, detail=""):
    global failed
    if not ok:
        failed += 1
    print(json.dumps({"op": op, "ok": bool(ok), "started": started, "ended": time.time(),
                      "detail": detail}), flush=True)


def run(op, fn):
    """Runs one of Nova's calls; an exception is a failure Nova would see too."""
    started = time.time()
    try:
        got = fn()
    except Exception as e:  # noqa: BLE001 - every exception is Nova's failure
        emit(op, False, started, f"{type(e).__name__}: {e}")
        return None
    return started, got


def main():
    url, token, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    # What Nova's client says of each retry and refusal, on stderr for whoever reads it.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("nova.scheduler.client.report").setLevel(logging.DEBUG)
    objects.register_all()
    nova.conf.CONF([], project="nova")
    ctx = nova_context.RequestContext(user_id=USER, project_id=PROJECT, is_admin=True)
    sess = session.Session(auth=token_endpoint.Token(url, token), timeout=60)
    ad = adapter.Adapter(sess, service_type="placement", endpoint_override=url,
                         raise_exc=False)
    rc = report.SchedulerReportClient(adapter=ad)

    compute = str(uuidlib.uuid4())
    name = f"ride-{compute[:8]}"
    tree = rc.get_provider_tree_and_ensure_root(ctx, compute, name=name)
    tree.update_inventory(name, {
        "VCPU": {"total": 4096, "reserved": 0, "min_unit": 1, "max_unit": 4096,
                 "step_size": 1, "allocation_ratio": 1.0},
        "MEMORY_MB": {"total": 4194304, "reserved": 0, "min_unit": 1,
                      "max_unit": 4194304, "step_size": 1, "allocation_ratio": 1.0},
    })
    rc.update_from_provider_tree(ctx, tree)
    print(json.dumps({"ready": True, "compute": compute}), flush=True)

    flavor = objects.Flavor(vcpus=1, memory_mb=64, root_gb=0, ephemeral_gb=0, swap=0,
                            extra_specs={})
    live = []
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        n += 1
        instance = str(uuidlib.uuid4())
        spec = objects.RequestSpec(
            flavor=flavor, image=objects.ImageMeta.from_dict({"properties": {}}),
            project_id=PROJECT, user_id=USER, num_instances=1, is_bfv=False,
            scheduler_hints={}, availability_zone=None, requested_destination=None,
            requested_resources=[], instance_uuid=instance)
        resources = scheduler_utils.resources_from_request_spec(ctx, spec, None)
        resources._limit = 10
        got = run("candidates", lambda: rc.get_allocation_candidates(ctx, resources))
        if got is None:
            continue
        started, (requests, _, version) = got
        ours = [r for r in (requests or []) if compute in r["allocations"]]
        emit("candidates", bool(ours), started, "" if ours else f"no candidate on {compute}")
        if not ours:
            continue
        got = run("claim", lambda: rc.claim_resources(
            ctx, instance, ours[0], PROJECT, USER, allocation_request_version=version))
        if got is None:
            continue
        started, claimed = got
        emit("claim", claimed is True, started, "" if claimed else "no valid host")
        if not claimed:
            continue
        if n % 3 == 0:
            migration = str(uuidlib.uuid4())
            got = run("move", lambda: rc.move_allocations(ctx, instance, migration))
            if got is not None:
                started, moved = got
                emit("move", moved is True, started, "" if moved else "move refused")
                if moved:
                    # The conductor's confirm: the source's allocations go with the
                    # migration record; the instance holds none until claimed again.
                    got = run("delete migration", lambda: rc.delete_allocation_for_instance(
                        ctx, migration, consumer_type="migration"))
                    if got is not None:
                        emit("delete migration", got[1] is True, got[0])
            continue
        live.append(instance)
        if len(live) > 2:
            old = live.pop(0)
            got = run("delete", lambda: rc.delete_allocation_for_instance(ctx, old))
            if got is not None:
                emit("delete", got[1] is True, got[0])
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - the run itself broke: say where
        traceback.print_exc()
        sys.exit(2)
