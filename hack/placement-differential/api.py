#!/usr/bin/env python3
"""The same REST calls to real Placement 16 and to `kubeplace placement serve`, answers compared.

    api.py [--kubeplace PATH] [--placement URL] [--kubeplace-url URL]

Starts both servers itself (real Placement through ../placement-oracle/oracle.py, seeded
with api-seed.yaml, and `kubeplace placement serve -f api-seed.yaml`) unless given their
URLs, then sends every call of STEPS below to each, in order, and prints one line per call:
`same` or `DIFF`, the method, path, microversion and both statuses, and for a DIFF both
bodies. `request_id` and `detail` are not compared (details are worded differently on
purpose: docs/placement-api.md). Exit status 1 when any call differs. Both servers must start
fresh: the calls create fixed uuids. stdlib only.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = os.path.join(HERE, "api-seed.yaml")


def call(base, method, path, version, body=None):
    headers = {"OpenStack-API-Version": "placement " + version, "X-Auth-Token": "admin"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        r = urllib.request.urlopen(req)
        status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode(errors="replace")
    return status, parsed


def normalized(value):
    if isinstance(value, dict):
        out = {k: ("..." if k in ("request_id", "detail") else normalized(v))
               for k, v in value.items()}
        # Placement lists providers in creation order, kubeplace by name
        # (docs/placement-api.md): compare the sets.
        if isinstance(out.get("resource_providers"), list):
            out["resource_providers"].sort(key=lambda p: p.get("uuid", ""))
        return out
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


U1='a1111111-1111-4111-8111-111111111111'; U2='a2222222-2222-4222-8222-222222222222'; C='c3333333-3333-4333-8333-333333333333'
U3='a3333333-1111-4111-8111-111111111111'; U4='a4444444-1111-4111-8111-111111111111'
U5='a5555555-1111-4111-8111-111111111111'
C8='c8888888-3333-4333-8333-333333333333'
C5='c5555555-3333-4333-8333-333333333333'; C6='c6666666-3333-4333-8333-333333333333'; C7='c7777777-3333-4333-8333-333333333333'
STEPS = [
 ('POST','/resource_providers','1.39',{'name':'d1','uuid':U1}),
 ('POST','/resource_providers','1.39',{'name':'d2','uuid':U2,'parent_provider_uuid':U1}),
 # Creating again (two Nova workers racing), and a taken uuid with a free name.
 ('POST','/resource_providers','1.39',{'name':'d1','uuid':U1}),
 ('POST','/resource_providers','1.39',{'name':'d1-other','uuid':U1}),
 ('GET','/resource_providers/'+U2,'1.0',None),
 ('GET','/resource_providers/'+U2,'1.14',None),
 ('PUT','/resource_providers/'+U1+'/inventories','1.39',{'resource_provider_generation':0,'inventories':{'VCPU':{'total':4,'allocation_ratio':2.0},'DISK_GB':{'total':10}}}),
 ('PUT','/resource_providers/'+U1+'/inventories','1.39',{'resource_provider_generation':0,'inventories':{}}),
 ('GET','/resource_providers/'+U1+'/inventories/VCPU','1.39',None),
 ('POST','/resource_providers/'+U1+'/inventories','1.39',{'resource_provider_generation':1,'resource_class':'MEMORY_MB','total':100}),
 ('PUT','/traits/CUSTOM_DIFF','1.39',None),
 ('PUT','/resource_providers/'+U1+'/traits','1.39',{'resource_provider_generation':2,'traits':['CUSTOM_DIFF']}),
 ('GET','/resource_providers/'+U1+'/traits','1.39',None),
 ('PUT','/resource_providers/'+U1+'/aggregates','1.39',{'resource_provider_generation':3,'aggregates':['a9999999-1111-4111-8111-111111111111']}),
 ('GET','/resource_providers/'+U1+'/aggregates','1.5',None),
 ('PUT','/allocations/'+C,'1.39',{'allocations':{U1:{'resources':{'VCPU':8}}},'project_id':'p','user_id':'u','consumer_generation':None,'consumer_type':'INSTANCE'}),
 ('PUT','/allocations/'+C,'1.39',{'allocations':{U1:{'resources':{'VCPU':9}}},'project_id':'p','user_id':'u','consumer_generation':1,'consumer_type':'INSTANCE'}),
 ('GET','/allocations/'+C,'1.39',None),
 ('GET','/allocations/'+C,'1.12',None),
 ('GET','/allocations/'+C,'1.27',None),
 ('GET','/resource_providers/'+U1+'/allocations','1.39',None),
 ('GET','/resource_providers/'+U1+'/allocations','1.27',None),
 ('GET','/resource_providers/'+U1+'/usages','1.39',None),
 ('GET','/resource_providers?required=CUSTOM_DIFF','1.39',None),
 ('GET','/resource_providers?member_of=a9999999-1111-4111-8111-111111111111','1.39',None),
 ('GET','/resource_providers?resources=VCPU:1','1.39',None),
 ('GET','/allocation_candidates?resources=DISK_GB:1&required=CUSTOM_DIFF','1.39',None),
 ('GET','/allocation_candidates?resources=DISK_GB:1','1.20',None),
 ('DELETE','/resource_providers/'+U1,'1.39',None),
 ('DELETE','/resource_providers/'+U1+'/inventories/VCPU','1.39',None),
 ('DELETE','/allocations/'+C,'1.39',None),
 ('GET','/allocations/'+C,'1.39',None),
 ('PUT','/resource_providers/'+U2,'1.39',{'name':'d2-renamed'}),
 ('PUT','/resource_providers/'+U2,'1.36',{'name':'d2-renamed','parent_provider_uuid':None}),
 ('DELETE','/resource_providers/'+U2,'1.39',None),
 ('GET','/resource_providers/'+U2,'1.39',None),
 ('DELETE','/traits/CUSTOM_DIFF','1.39',None),
 ('GET','/traits?name=startswith:CUSTOM_D','1.39',None),
 ('PUT','/resource_classes/CUSTOM_DIFF','1.39',None),
 ('GET','/resource_classes/CUSTOM_DIFF','1.39',None),
 ('DELETE','/resource_classes/CUSTOM_DIFF','1.39',None),
 ('GET','/resource_providers/'+U1+'/inventories','1.39',None),
 ('POST','/allocations','1.12',{C5:{'allocations':{U1:{'resources':{'DISK_GB':1}}},'project_id':'p','user_id':'u'}}),
 ('POST','/allocations','1.39',{C5:{'allocations':{U1:{'resources':{'DISK_GB':1}}},'project_id':'p','user_id':'u','consumer_generation':None,'consumer_type':'INSTANCE'}}),
 ('GET','/allocations/'+C5,'1.39',None),
 ('POST','/allocations','1.39',{C5:{'allocations':{},'project_id':'p','user_id':'u','consumer_generation':1,'consumer_type':'INSTANCE'},
                                C6:{'allocations':{U1:{'resources':{'DISK_GB':20}}},'project_id':'p','user_id':'u','consumer_generation':None,'consumer_type':'INSTANCE'}}),
 ('GET','/allocations/'+C5,'1.39',None),
 ('POST','/allocations','1.39',{C5:{'allocations':{},'project_id':'p','user_id':'u','consumer_generation':1,'consumer_type':'INSTANCE'},
                                C6:{'allocations':{U1:{'resources':{'DISK_GB':10}}},'project_id':'p','user_id':'u','consumer_generation':None,'consumer_type':'INSTANCE'}}),
 ('GET','/allocations/'+C6,'1.39',None),
 ('GET','/resource_providers/'+U1+'/usages','1.39',None),
 ('PUT','/allocations/'+C7,'1.39',{'allocations':{U1:{'resources':{'MEMORY_MB':5}}},'project_id':'p','user_id':'u2','consumer_generation':None,'consumer_type':'MIGRATION'}),
 ('GET','/usages?project_id=p','1.9',None),
 ('GET','/usages?project_id=p&user_id=u2','1.9',None),
 ('GET','/usages?project_id=p','1.38',None),
 ('GET','/usages?project_id=p&consumer_type=all','1.38',None),
 ('GET','/usages?project_id=p&consumer_type=MIGRATION','1.38',None),
 ('GET','/usages?project_id=nobody','1.38',None),
 ('GET','/usages?user_id=u','1.38',None),
 ('GET','/usages?project_id=p&consumer_type=all','1.37',None),
 ('GET','/usages?project_id=p','1.8',None),
 # Names that are not Kubernetes object names (Nova's and Neutron's nested providers).
 ('POST','/resource_providers','1.39',{'name':'cn9:Open vSwitch agent:br-ex','uuid':U3}),
 ('POST','/resource_providers','1.39',{'name':'cn9_NUMA0','uuid':U4,'parent_provider_uuid':U3}),
 ('GET','/resource_providers/'+U4,'1.39',None),
 ('GET','/resource_providers?name=cn9:Open%20vSwitch%20agent:br-ex','1.39',None),
 ('POST','/resource_providers','1.39',{'name':'cn9_NUMA0'}),
 ('PUT','/resource_providers/'+U4,'1.39',{'name':'CN9_numa_0'}),
 ('GET','/resource_providers?name=CN9_numa_0','1.39',None),
 ('GET','/resource_providers?name=cn9_NUMA0','1.39',None),
 ('GET','/resource_providers?in_tree='+U3,'1.39',None),
 # Reshaper (1.30): VGPU moves from U3 to its child U4 with the consumer's allocation.
 ('PUT','/resource_providers/'+U3+'/inventories','1.39',{'resource_provider_generation':0,'inventories':{'VCPU':{'total':8},'VGPU':{'total':4}}}),
 ('PUT','/allocations/'+C8,'1.39',{'allocations':{U3:{'resources':{'VCPU':2,'VGPU':1}}},'project_id':'p','user_id':'u','consumer_generation':None,'consumer_type':'INSTANCE'}),
 ('POST','/reshaper','1.29',{'inventories':{},'allocations':{}}),
 ('GET','/reshaper','1.39',None),
 ('POST','/reshaper','1.39',{'inventories':{}}),
 ('POST','/reshaper','1.39',{'inventories':{U3:{'resource_provider_generation':9,'inventories':{'VCPU':{'total':8}}}},'allocations':{}}),
 ('POST','/reshaper','1.39',{'inventories':{U3:{'resource_provider_generation':2,'inventories':{'VCPU':{'total':8}}}},'allocations':{}}),
 ('POST','/reshaper','1.39',{'inventories':{U3:{'resource_provider_generation':2,'inventories':{'VCPU':{'total':8}}},
                                            U4:{'resource_provider_generation':0,'inventories':{'VGPU':{'total':4}}}},
                             'allocations':{C8:{'allocations':{U3:{'resources':{'VCPU':2}},U4:{'resources':{'VGPU':1}}},'project_id':'p','user_id':'u','consumer_generation':1,'consumer_type':'INSTANCE'}}}),
 ('GET','/allocations/'+C8,'1.39',None),
 ('GET','/resource_providers/'+U3+'/inventories','1.39',None),
 ('GET','/resource_providers/'+U4+'/inventories','1.39',None),
 ('GET','/resource_providers/'+U4+'/usages','1.39',None),
 ('GET','/resource_providers/'+U3,'1.39',None),
 ('GET','/resource_providers/'+U4,'1.39',None),
 # Allocation candidates before 1.16: from 1.10, the list form of requests before 1.12.
 ('GET','/allocation_candidates?resources=VGPU:1','1.9',None),
 ('GET','/allocation_candidates?resources=VGPU:1','1.10',None),
 ('GET','/allocation_candidates?resources=VCPU:1,VGPU:1','1.11',None),
 ('GET','/allocation_candidates?resources=VGPU:1','1.12',None),
 ('GET','/allocation_candidates?resources=VGPU:1&limit=1','1.15',None),
 ('GET','/allocation_candidates?resources=VGPU:1&required=CUSTOM_X','1.14',None),
 ('GET','/allocation_candidates?resources=VCPU:1','1.14',None),
 # Re-parenting and un-parenting from 1.37; a cycle is refused.
 ('POST','/resource_providers','1.39',{'name':'rp-top','uuid':U5}),
 ('PUT','/resource_providers/'+U4,'1.36',{'name':'CN9_numa_0','parent_provider_uuid':U5}),
 ('PUT','/resource_providers/'+U4,'1.37',{'name':'CN9_numa_0','parent_provider_uuid':U5}),
 ('GET','/resource_providers?in_tree='+U5,'1.39',None),
 ('GET','/resource_providers?in_tree='+U3,'1.39',None),
 ('GET','/allocation_candidates?resources=VGPU:1','1.39',None),
 ('PUT','/resource_providers/'+U5,'1.37',{'name':'rp-top','parent_provider_uuid':U4}),
 ('PUT','/resource_providers/'+U4,'1.37',{'name':'CN9_numa_0','parent_provider_uuid':None}),
 ('GET','/resource_providers/'+U4,'1.39',None),
 ('GET','/allocation_candidates?resources=VGPU:1','1.39',None),
]


def start(cmd, wait_for, timeout):
    """Starts a server and returns (process, url) once it prints its URL."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if wait_for in line:
            return proc, "http://" + line.strip().rsplit("http://", 1)[1]
    proc.kill()
    sys.exit("api.py: %s did not start" % cmd[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeplace", default=os.path.join(HERE, "../../target/release/kubeplace"))
    ap.add_argument("--placement", help="URL of a fresh Placement seeded with api-seed.yaml")
    ap.add_argument("--kubeplace-url", help="URL of a fresh `kubeplace placement serve -f api-seed.yaml`")
    a = ap.parse_args()
    procs = []
    try:
        placement = a.placement
        if not placement:
            p, placement = start([sys.executable, os.path.join(HERE, "../placement-oracle/oracle.py"),
                                  "serve", "-f", SEED], "http://", 300)
            procs.append(p)
        kubeplace = a.kubeplace_url
        if not kubeplace:
            p, kubeplace = start([a.kubeplace, "placement", "serve", "-f", SEED,
                                  "--listen", "127.0.0.1:0"], "listening on", 60)
            procs.append(p)
        differ = 0
        for step in STEPS:
            pa, ka = call(placement, *step), call(kubeplace, *step)
            same = (pa[0], normalized(pa[1])) == (ka[0], normalized(ka[1]))
            differ += not same
            print("same" if same else "DIFF", step[0], step[1], step[2], pa[0], ka[0])
            if not same:
                print("   placement:", json.dumps(normalized(pa[1]), sort_keys=True)[:600])
                print("   kubeplace:", json.dumps(normalized(ka[1]), sort_keys=True)[:600])
        print("%d calls, %d differ" % (len(STEPS), differ))
        return 1 if differ else 0
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    sys.exit(main())
