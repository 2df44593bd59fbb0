#!/usr/bin/env python3
"""Nova's own NUMA fit over generated hosts, flavors and images, as JSON for kubeplace.

Run with the Python of a virtualenv that has nova installed (hack/nova-venv.sh makes one):

    ~/.cache/kubeplace/nova-venv/bin/python hack/numa-differential/nova_numa.py --seed 1 --hosts 400

For each generated host it places a sequence of guests, one after another, each seeing what
the earlier ones left, exactly as Nova's scheduler and compute claim would: the guest's
topology from `hardware.numa_get_constraints(flavor, image)` (or the exception it raises),
then NUMATopologyFilter's verdict (`_satisfies_cpu_policy` and
`hardware.numa_fit_instance_to_host` with the host's allocation ratios), then the host's
cells after `hardware.numa_usage_from_instance_numa`. It prints one JSON object:
`{"steps": [...]}`, each step with the host before, the flavor, the image and Nova's answer;
tests/numa_nova.rs compares kubeplace's answer step by step.
"""
import argparse
import json
import logging
import random
import sys

logging.disable(logging.CRITICAL)

import nova.conf  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402

objects.register_all()
nova.conf.CONF([], project='nova', default_config_files=[])

from nova.scheduler import utils as scheduler_utils  # noqa: E402
from nova.scheduler.filters import numa_topology_filter  # noqa: E402
from nova.virt import hardware  # noqa: E402

PAGE_4K, PAGE_2M, PAGE_1G = 4, 2048, 1048576


def make_host(rng):
    """A host of 1 to 4 cells, with or without SMT, in one of Nova's CPU set layouts."""
    ncells = rng.choice([1, 1, 2, 2, 2, 3, 4])
    threads = rng.choice([1, 2, 2])
    cores = rng.choice([1, 2, 3, 4, 4, 6, 8, 8, 12])
    layout = rng.choice(['legacy', 'legacy', 'split', 'dedicated', 'shared'])
    with_2m = rng.random() < 0.5
    with_1g = rng.random() < 0.4
    cells = []
    cpu = 0
    for cid in range(ncells):
        ncpus = cores * threads
        cell_cpus = list(range(cpu, cpu + ncpus))
        cpu += ncpus
        # Siblings: thread t of core c is cell_cpus[c + t * cores] (Linux numbering).
        siblings = [sorted(cell_cpus[c + t * cores] for t in range(threads))
                    for c in range(cores)]
        if layout == 'legacy':
            shared, dedicated = cell_cpus, cell_cpus
        elif layout == 'dedicated':
            shared, dedicated = [], cell_cpus
        elif layout == 'shared':
            shared, dedicated = cell_cpus, []
        else:
            # Whole cores to each side, so that siblings stay on one side.
            cut = rng.randint(0, cores)
            ded_cores = siblings[:cut]
            dedicated = sorted(c for core in ded_cores for c in core)
            shared = sorted(set(cell_cpus) - set(dedicated))
        memory = rng.choice([1024, 2048, 4096, 8192, 16384, 16384, 32768])
        pages = []
        left_kb = memory * 1024
        big = []
        if with_1g and memory >= 4096:
            n1g = rng.randint(1, memory // 1024 - 1)
            big.append((PAGE_1G, n1g))
            left_kb -= n1g * PAGE_1G
        if with_2m:
            n2m = rng.randint(1, max(1, (left_kb // PAGE_2M) // 2))
            big.append((PAGE_2M, n2m))
            left_kb -= n2m * PAGE_2M
        pages.append({'size_kib': PAGE_4K, 'total': left_kb // PAGE_4K,
                      'used': 0, 'reserved': 0})
        for size, total in big:
            reserved = rng.choice([0, 0, 0, 1]) if total > 1 else 0
            pages.append({'size_kib': size, 'total': total, 'used': 0,
                          'reserved': reserved})
        cells.append({
            'id': cid,
            'cpuset': sorted(shared),
            'pcpuset': sorted(dedicated),
            'siblings': siblings,
            'memory_mib': memory,
            'pages': pages,
            'pinned': [],
            'cpu_usage': 0,
            'memory_usage_mib': 0,
            'socket': cid // 2,
        })
    limits = {
        'cpu_allocation_ratio': rng.choice([1.0, 2.0, 4.0, 16.0]),
        'ram_allocation_ratio': rng.choice([1.0, 1.0, 1.5]),
    }
    return {'cells': cells}, limits


def to_nova_host(host):
    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=c['id'],
            cpuset=set(c['cpuset']),
            pcpuset=set(c['pcpuset']),
            siblings=[set(s) for s in c['siblings']],
            memory=c['memory_mib'],
            mempages=[objects.NUMAPagesTopology(
                size_kb=p['size_kib'], total=p['total'], used=p['used'],
                reserved=p['reserved']) for p in c['pages']],
            pinned_cpus=set(c['pinned']),
            cpu_usage=c['cpu_usage'],
            memory_usage=c['memory_usage_mib'],
            socket=c['socket'],
        ) for c in host['cells']])


def from_nova_host(topology):
    cells = []
    for c in topology.cells:
        cells.append({
            'id': c.id,
            'cpuset': sorted(c.cpuset),
            'pcpuset': sorted(c.pcpuset),
            'siblings': [sorted(s) for s in c.siblings],
            'memory_mib': c.memory,
            'pages': [{'size_kib': p.size_kb, 'total': p.total,
                       'used': int(p.used), 'reserved': p.reserved}
                      for p in c.mempages],
            'pinned': sorted(c.pinned_cpus),
            'cpu_usage': c.cpu_usage,
            'memory_usage_mib': c.memory_usage,
            'socket': c.socket,
        })
    return {'cells': cells}


def cpu_mask(rng, vcpus):
    """A mask over the guest's vCPUs: a few picked, a range, or an exclusion."""
    kind = rng.choice(['pick', 'pick', 'range', 'range', 'exclude', 'exclude', 'exclude',
                       'all', 'bad', 'out'])
    if kind == 'pick':
        n = rng.randint(1, vcpus)
        return ','.join(str(c) for c in sorted(rng.sample(range(vcpus), n)))
    if kind == 'range':
        a = rng.randint(0, vcpus - 1)
        b = rng.randint(a, vcpus - 1)
        return '%d-%d' % (a, b)
    if kind == 'exclude':
        return '^%d' % rng.randint(0, vcpus - 1)
    if kind == 'all':
        return '0-%d' % (vcpus - 1)
    if kind == 'out':
        return '%d' % (vcpus + rng.randint(0, 3))
    return rng.choice(['3-1', 'x', '^', '1,,2'])


def make_flavor(rng, host):
    vcpus = rng.choice([1, 2, 2, 2, 3, 4, 4, 4, 6, 8, 12, 16])
    memory = rng.choice([256, 512, 512, 1024, 1024, 2048, 2048, 3072, 4096, 6144, 8192])
    specs = {}
    policy = rng.choice([None, None, 'shared', 'dedicated', 'dedicated', 'dedicated',
                         'mixed'])
    if policy:
        specs['hw:cpu_policy'] = policy
    if rng.random() < (0.4 if policy in ('dedicated', 'mixed') else 0.05):
        specs['hw:cpu_thread_policy'] = rng.choice(['prefer', 'isolate', 'require'])
    if rng.random() < 0.35:
        nodes = rng.choice([1, 2, 2, 3, 4])
        specs['hw:numa_nodes'] = str(nodes)
        if rng.random() < 0.3:
            # Explicit cells: usually consistent, sometimes not.
            order = list(range(vcpus))
            rng.shuffle(order)
            cuts = sorted(rng.sample(range(1, vcpus), min(nodes - 1, vcpus - 1))) \
                if vcpus > 1 else []
            groups, prev = [], 0
            for c in cuts + [vcpus]:
                groups.append(sorted(order[prev:c]))
                prev = c
            mems, left = [], memory
            for i in range(len(groups)):
                m = left if i == len(groups) - 1 else rng.randint(0, left) // 256 * 256
                mems.append(m)
                left -= m
            if rng.random() < 0.15 and mems:
                mems[0] += 256
            for i, (g, m) in enumerate(zip(groups, mems)):
                specs['hw:numa_cpus.%d' % i] = ','.join(str(c) for c in g) or '0'
                specs['hw:numa_mem.%d' % i] = str(m)
    if rng.random() < 0.4:
        specs['hw:mem_page_size'] = rng.choice([
            'small', 'small', 'large', 'large', 'any', 'any', '2048', '1048576', '2MB',
            '1GB', '4', '2MiB', '4KB', '2Mb', '0', '2M', '1G'])
    if rng.random() < 0.15:
        specs['hw:emulator_threads_policy'] = rng.choice(['share', 'isolate'])
    if policy == 'mixed' or rng.random() < 0.05:
        if rng.random() < 0.6:
            specs['hw:cpu_dedicated_mask'] = cpu_mask(rng, vcpus)
        else:
            specs['hw:cpu_realtime'] = 'yes'
            if rng.random() < 0.8:
                specs['hw:cpu_realtime_mask'] = cpu_mask(rng, vcpus)
    elif policy == 'dedicated' and rng.random() < 0.1:
        specs['hw:cpu_realtime'] = 'true'
        specs['hw:cpu_realtime_mask'] = cpu_mask(rng, vcpus)
    if rng.random() < 0.06:
        specs[rng.choice(['resources:PCPU', 'resources:VCPU', 'resources1:PCPU'])] = \
            str(vcpus + rng.choice([0, 0, 0, 1]))
    if rng.random() < 0.06:
        specs['trait:HW_CPU_HYPERTHREADING'] = rng.choice(['required', 'forbidden'])
    if rng.random() < 0.04:
        specs['hw:locked_memory'] = rng.choice(['true', 'false'])
    return {'vcpus': vcpus, 'memory_mib': memory, 'extra_specs': specs}


def make_image(rng):
    props = {}
    if rng.random() < 0.1:
        props['hw_cpu_policy'] = rng.choice(['shared', 'dedicated', 'mixed'])
    if rng.random() < 0.08:
        props['hw_cpu_thread_policy'] = rng.choice(['prefer', 'isolate', 'require'])
    if rng.random() < 0.08:
        props['hw_mem_page_size'] = rng.choice(['small', 'large', '2048', '1GB', 'any'])
    if rng.random() < 0.05:
        props['hw_numa_nodes'] = str(rng.choice([1, 2]))
    if rng.random() < 0.03:
        props['hw_locked_memory'] = rng.choice(['true', 'false'])
    if rng.random() < 0.03:
        props['trait:HW_CPU_HYPERTHREADING'] = 'required'
    return props


def nova_placement(flavor, image):
    """What Nova's scheduler asks of Placement's unnumbered group for the pair: its VCPU
    and PCPU, and the HW_CPU_HYPERTHREADING trait (ResourceRequest.from_request_spec)."""
    fl = objects.Flavor(vcpus=flavor['vcpus'], memory_mb=flavor['memory_mib'], root_gb=0,
                        ephemeral_gb=0, swap=0, extra_specs=dict(flavor['extra_specs']),
                        name='f')
    im = objects.ImageMeta.from_dict({'name': 'img', 'properties': dict(image)})
    spec = objects.RequestSpec(flavor=fl, image=im, is_bfv=False)
    try:
        group = scheduler_utils.ResourceRequest.from_request_spec(spec).get_request_group(None)
    except (exception.NovaException, ValueError) as e:
        return {'error': type(e).__name__}
    ht = 'HW_CPU_HYPERTHREADING'
    return {'VCPU': group.resources.get('VCPU', 0), 'PCPU': group.resources.get('PCPU', 0),
            'hyperthreading': 'required' if ht in group.required_traits
            else 'forbidden' if ht in group.forbidden_traits else None}


def nova_verdict(host, limits, flavor, image):
    verdict, after, fitted = numa_verdict(host, limits, flavor, image)
    if 'error' not in verdict:
        verdict['placement'] = nova_placement(flavor, image)
    return verdict, after, fitted


def numa_verdict(host, limits, flavor, image):
    fl = objects.Flavor(vcpus=flavor['vcpus'], memory_mb=flavor['memory_mib'],
                        extra_specs=dict(flavor['extra_specs']), name='f')
    im = objects.ImageMeta.from_dict({'name': 'img', 'properties': dict(image)})
    try:
        topology = hardware.numa_get_constraints(fl, im)
    except (exception.NovaException, ValueError) as e:
        return {'error': type(e).__name__}, None, None
    if topology is None:
        return {'topology': None}, None, None
    cells = [{'cpuset': sorted(c.cpuset), 'pcpuset': sorted(c.pcpuset),
              'memory_mib': c.memory} for c in topology.cells]
    nova_host = to_nova_host(host)
    filt = numa_topology_filter.NUMATopologyFilter()

    class HostState:
        numa_topology = nova_host
    if not filt._satisfies_cpu_policy(HostState, fl.extra_specs, im.properties):
        return {'topology': cells, 'fit': None, 'cpu_policy_refused': True}, None, None
    nova_limits = objects.NUMATopologyLimits(**limits)
    fitted = hardware.numa_fit_instance_to_host(
        nova_host, topology.obj_clone(), provider_mapping=None, limits=nova_limits)
    if fitted is None:
        return {'topology': cells, 'fit': None}, None, None
    out = []
    for c in fitted.cells:
        # cpu_pinning is a property over the cell's raw field, unset for unpinned cells.
        pinning = c.cpu_pinning if c.obj_attr_is_set('cpu_pinning_raw') and \
            c.cpu_pinning_raw else {}
        reserved = c.cpuset_reserved if 'cpuset_reserved' in c and c.cpuset_reserved \
            else set()
        out.append({
            'host_cell': c.id,
            'pinning': {str(k): v for k, v in sorted(pinning.items())},
            'emulator_cpus': sorted(reserved),
            'page_size_kib': c.pagesize if 'pagesize' in c and c.pagesize else None,
        })
    try:
        after = hardware.numa_usage_from_instance_numa(nova_host, fitted)
    except exception.NovaException as e:
        # The filter passed the host and the claim on it fails: Nova's fit chose CPUs that
        # are not free. Recorded as such; the host stays as it was.
        return {'topology': cells, 'fit': out, 'claim_failed': type(e).__name__}, None, None
    return {'topology': cells, 'fit': out}, from_nova_host(after), fitted


def cell(cid, cpus, siblings, memory, pages, shared=None, dedicated=None):
    return {'id': cid, 'cpuset': sorted(cpus if shared is None else shared),
            'pcpuset': sorted(cpus if dedicated is None else dedicated),
            'siblings': siblings, 'memory_mib': memory, 'pages': pages, 'pinned': [],
            'cpu_usage': 0, 'memory_usage_mib': 0, 'socket': cid // 2}


def edges():
    """Hosts and guest sequences at the edges: a 1G page that just fits and one that just
    does not, isolate on SMT hosts with and without a dedicated set, emulator threads with
    exactly one CPU to spare, asymmetric cells, a guest split over every cell."""
    smt = [[c, c + 4] for c in range(4)]
    one_g = [{'size_kib': PAGE_4K, 'total': 4 * 262144, 'used': 0, 'reserved': 0},
             {'size_kib': PAGE_1G, 'total': 4, 'used': 0, 'reserved': 1}]
    ll = {'cpu_allocation_ratio': 1.0, 'ram_allocation_ratio': 1.0}
    hosts = [
        # 3 free 1G pages: 3 GiB fits, then nothing more; 4 GiB never.
        ({'cells': [cell(0, range(8), smt, 8192, one_g)]}, ll, [
            {'vcpus': 2, 'memory_mib': 4096, 'extra_specs': {'hw:mem_page_size': '1GB'}},
            {'vcpus': 2, 'memory_mib': 3072, 'extra_specs': {'hw:mem_page_size': '1GB'}},
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {'hw:mem_page_size': 'large'}},
        ]),
        # isolate: SMT with the same CPUs shared and dedicated takes whole cores...
        ({'cells': [cell(0, range(8), smt, 8192, one_g)]}, ll, [
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}},
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}},
            {'vcpus': 1, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}},
        ]),
        # ...and with a dedicated set of its own never does.
        ({'cells': [cell(0, range(8), smt, 8192, one_g, shared=[0, 4],
                         dedicated=[1, 2, 3, 5, 6, 7])]}, ll, [
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}},
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require'}},
        ]),
        # Without threads, isolate with a dedicated set fits.
        ({'cells': [cell(0, range(4), [[c] for c in range(4)], 4096, one_g[:1],
                         shared=[0], dedicated=[1, 2, 3])]}, ll, [
            {'vcpus': 2, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate',
                'hw:emulator_threads_policy': 'isolate'}},
            {'vcpus': 1, 'memory_mib': 1024, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:emulator_threads_policy': 'isolate'}},
        ]),
        # Two cells: a guest split over both, asymmetric cells, then one too big for either.
        ({'cells': [cell(0, range(4), [[c] for c in range(4)], 4096, one_g[:1]),
                    cell(1, range(4, 8), [[c] for c in range(4, 8)], 4096, one_g[:1])]},
         ll, [
            {'vcpus': 4, 'memory_mib': 2048, 'extra_specs': {
                'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2'}},
            {'vcpus': 3, 'memory_mib': 3072, 'extra_specs': {
                'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0', 'hw:numa_cpus.1': '1,2',
                'hw:numa_mem.0': '1024', 'hw:numa_mem.1': '2048'}},
            {'vcpus': 3, 'memory_mib': 3072, 'extra_specs': {'hw:numa_nodes': '2'}},
            {'vcpus': 3, 'memory_mib': 1024, 'extra_specs': {'hw:cpu_policy': 'dedicated'}},
        ]),
    ]
    return hosts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--hosts', type=int, default=400)
    parser.add_argument('--guests', type=int, default=8,
                        help='guests placed one after another on each host')
    parser.add_argument('--edges', action='store_true',
                        help='also the hand-made hosts and guests at the edges')
    args = parser.parse_args()
    rng = random.Random(args.seed)
    steps = []
    if args.edges:
        for h, (host, limits, flavors) in enumerate(edges()):
            for flavor in flavors:
                verdict, after, _ = nova_verdict(host, limits, flavor, {})
                steps.append({'host_number': -1 - h, 'host': host, 'limits': limits,
                              'flavor': flavor, 'image': {}, 'nova': verdict,
                              'host_after': after})
                if after is not None:
                    host = after
    for h in range(args.hosts):
        host, limits = make_host(rng)
        for g in range(args.guests):
            flavor = make_flavor(rng, host)
            image = make_image(rng) if rng.random() < 0.3 else {}
            try:
                verdict, after, _ = nova_verdict(host, limits, flavor, image)
            except Exception as e:  # a crash of Nova's on this input is a finding too
                verdict, after = {'crash': '%s: %s' % (type(e).__name__, e)}, None
            steps.append({'host_number': h, 'host': host, 'limits': limits,
                          'flavor': flavor, 'image': image, 'nova': verdict,
                          'host_after': after})
            if after is not None:
                host = after
    json.dump({'seed': args.seed, 'steps': steps}, sys.stdout)


if __name__ == '__main__':
    main()
