#!/usr/bin/env python3
"""Nova 34's NUMA fit for one host, timed: the host shape of the `headroom/10k-cells` bench
(two cells of 32 CPUs in 16 cores of two threads, 128 GiB with 16 GiB in 1 GiB pages) and
its flavors `nfv.pinned` (4 dedicated vCPUs, 8 GiB) and `nfv.huge` (2 vCPUs, 4 GiB in 1 GiB
pages), through `nova.virt.hardware.numa_fit_instance_to_host` as NUMATopologyFilter calls it
for each candidate host. kubeplace's per-placement figures in docs/performance.md come from
`cargo bench -p kubeplace-policy --bench headroom -- 10k-cells`; this gives Nova's cost of
the same decision per host.

    hack/nova-venv.sh            # the Nova 34 virtualenv, ~/.cache/kubeplace/nova-venv
    ~/.cache/kubeplace/nova-venv/bin/python benches/numa-fit-nova.py
"""

import logging
import timeit

logging.disable(logging.CRITICAL)

from nova import objects  # noqa: E402
from nova.virt import hardware  # noqa: E402

objects.register_all()


def cell(cid, base):
    cpus = set(range(base, base + 32))
    return objects.NUMACell(
        id=cid, cpuset=cpus, pcpuset=cpus, memory=131072, cpu_usage=0, memory_usage=0,
        pinned_cpus=set(), siblings=[{base + c, base + c + 16} for c in range(16)],
        mempages=[
            objects.NUMAPagesTopology(size_kb=4, total=(131072 - 16384) * 256, used=0,
                                      reserved=0),
            objects.NUMAPagesTopology(size_kb=1048576, total=16, used=0, reserved=0),
        ],
        network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False),
        socket=cid)


def main():
    host = objects.NUMATopology(cells=[cell(0, 0), cell(1, 32)])
    limits = objects.NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.5)
    image = objects.ImageMeta.from_dict({'properties': {}})
    for name, vcpus, memory, specs in [
        ('nfv.pinned', 4, 8192, {'hw:cpu_policy': 'dedicated'}),
        ('nfv.huge', 2, 4096, {'hw:mem_page_size': '1GB'}),
    ]:
        flavor = objects.Flavor(vcpus=vcpus, memory_mb=memory, extra_specs=specs, name=name)
        topology = hardware.numa_get_constraints(flavor, image)

        def fit():
            return hardware.numa_fit_instance_to_host(
                host, topology.obj_clone(), provider_mapping=None, limits=limits)

        assert fit() is not None
        n = 500
        seconds = min(timeit.repeat(fit, number=n, repeat=3))
        print('%s: %.1f us per host' % (name, seconds / n * 1e6))


if __name__ == '__main__':
    main()
