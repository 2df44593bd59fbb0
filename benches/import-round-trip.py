#!/usr/bin/env python3
"""`kubeplace placement import` and `export` on the bench cloud, against real Placement 16.

    hack/placement-venv.sh && hack/build-control-plane.sh && cargo build --release
    nice -n 10 python3 benches/import-round-trip.py [--trees 10000] [--state-dir DIR]

The cloud is benches/placement-vs-real.py's (ten sharing DISK_GB pools; per tree a compute
node, two NUMA cells and one or two SR-IOV physical functions: 4.5 providers a tree) plus
--consumers-per-tree consumers a tree (default 2), of 8 projects and 12 users, INSTANCE and
MIGRATION: VCPU and MEMORY_MB (some PCPU) on a NUMA cell, DISK_GB on the compute node or on
its sharing pool, some SRIOV_NET_VF on a physical function.

1. Source. The providers go into Placement's database through its own table definitions
   (hack/placement-oracle/oracle.py's bulk loader; through the API they would take hours),
   the consumers through Placement's API (`POST /allocations` at 1.38, 500 consumers a
   request). Everything below reads the source through its API only. With --state-dir the
   loaded database is kept and reused by a later run with the same cloud.
2. Every read of the source, once: the provider list; per provider itself, its
   inventories, traits, aggregates, usages and allocations; per consumer its allocations;
   `/usages` per project and per project and user; every resource class and trait; the
   bench's candidate queries (benches/placement-vs-real.py), whole, and with `limit=50`
   (the count only: which candidates a limit keeps follows Python's set order).
3. `import --to-file` (time, requests), `serve -f` of that file, every read compared.
4. A control plane of its own (etcd and kube-apiserver of hack/build-control-plane.sh on
   127.0.0.1, kubeplace's CRDs, `kubeplace run --placement-addr` with its admission webhook):
   `import` into it (time, objects/s, CPU seconds of each process during the import), every
   read compared through the operator's Placement API, then a second import (nothing to
   write).
5. `export` from the cluster into a fresh, empty Placement (time, writes/s), every read of it
   compared.
6. What bounds the writes into the control plane (--study-trees, default 1,000; 0 skips it):
   the study cloud served by `kubeplace placement serve -f` (so that reading costs nothing)
   imported into fresh control planes, without the operator (no webhook) and with it at
   --study-writes writes in flight, with the CPU seconds of each process.

Placement is served by hack/placement-serve.py: one process while it is written, --workers
processes while it is only read. Every figure is printed as a Markdown table; exit 1 when any
read differs.
"""
import argparse
import collections
import hashlib
import http.client
import importlib.util
import json
import multiprocessing
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


vs_real = _load("vs_real", "benches/placement-vs-real.py")
ceiling = _load("ceiling", "benches/status-write-ceiling.py")

PROJECTS, USERS = 8, 12
NS = uuid.uuid5(uuid.NAMESPACE_DNS, "resourceproviders.kubeplace.io")
PLACEMENT_HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39",
                     "Accept": "application/json"}
ANNOTATIONS = ("placement.kubeplace.io/project-id", "placement.kubeplace.io/user-id",
               "placement.kubeplace.io/consumer-type")
ACCESS = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: placement-reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bench-placement-reader}
rules:
- apiGroups: [kubeplace.io]
  resources: [placement]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bench-placement-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bench-placement-reader}
subjects: [{kind: ServiceAccount, name: placement-reader, namespace: default}]
"""


def say(what):
    print("import-round-trip: " + what, file=sys.stderr, flush=True)


def provider_uuid(name):
    return str(uuid.uuid5(NS, name))


def consumer_uuid(n):
    return "c0c0c0c0-0000-4000-8000-%012x" % n


# ---------------------------------------------------------------------------
# The cloud


def consumers(trees, per_tree):
    """(uuid, project, user, type, {provider name: {class: amount}}) of every consumer."""
    out = []
    for i in range(trees):
        cn = "cn%06d" % i
        for k in range(per_tree):
            n = i * per_tree + k
            numa = "%s-numa%d" % (cn, k % 2)
            on = {numa: {"VCPU": 1 + n % 4, "MEMORY_MB": 1024 * (1 + n % 4)}}
            if n % 5 == 2:
                on[numa]["PCPU"] = 2
            disk = 10 * (1 + n % 3)
            # Roots without DISK_GB (every fifth) take it from their aggregate's pool.
            on[cn if i % 5 else "pool-%d" % (i % 10)] = {"DISK_GB": disk}
            if k % 2 == 0 and i % 3 == 0:
                on["%s-numa0-pf0" % cn] = {"SRIOV_NET_VF": 1}
            out.append((consumer_uuid(n), "project-%d" % (n % PROJECTS), "user-%d" % (n % USERS),
                        "MIGRATION" if n % 7 == 3 else "INSTANCE", on))
    return out


def provider_files(trees, directory):
    files = []
    for first in range(0, max(trees, 1), vs_real.TREES_PER_FILE):
        path = directory / ("cloud-%03d.json" % (first // vs_real.TREES_PER_FILE))
        items = vs_real.cloud(min(trees, first + vs_real.TREES_PER_FILE), first)
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        files.append(path)
    return files


def kubeplace_manifest(trees, per_tree, path):
    """The cloud and its consumers as kubeplace's objects (for the study)."""
    items = vs_real.cloud(trees)
    for c, project, user, ctype, on in consumers(trees, per_tree):
        items.append({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Allocation",
                      "metadata": {"name": c, "annotations": dict(zip(ANNOTATIONS, (project, user, ctype)))},
                      "spec": {"consumer": c, "allocations": [
                          {"provider": p, "resources": r} for p, r in sorted(on.items())]}})
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return len(items)


# ---------------------------------------------------------------------------
# Servers


class Server:
    """A child process that prints its URL first; stopped with SIGTERM."""

    def __init__(self, cmd, what, env=None, url=lambda line: line.strip()):
        self.what = what
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("%s did not start" % what)
        self.url = url(line)

    def address(self):
        host, port = self.url.split("//", 1)[1].rstrip("/").split(":")
        return host, int(port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def venv_python():
    venv = subprocess.run([str(ROOT / "hack" / "placement-venv.sh")], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    return pathlib.Path(venv) / "bin" / "python"


def placement(directory, workers=1):
    env = dict(os.environ, PYTHONHASHSEED="0")
    return Server([venv_python(), ROOT / "hack" / "placement-serve.py", directory,
                   "--workers", workers], "Placement", env=env,
                  url=lambda line: line.strip().removeprefix("listening on "))


def kubeplace_serve(binary, path):
    env = {k: v for k, v in os.environ.items() if k != "KUBEPLACE_PLACEMENT_TOKEN"}
    return Server([binary, "placement", "serve", "--listen", "127.0.0.1:0", "-f", path],
                  "kubeplace placement serve", env=env,
                  url=lambda line: "http://" + line.strip().rsplit("http://", 1)[1])


def request(conn, method, path, headers, body=None):
    data = None if body is None else json.dumps(body)
    h = dict(headers)
    if data is not None:
        h["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    raw = r.read()
    return r.status, (json.loads(raw) if raw else None)


def load_source(args, work):
    """Real Placement holding the cloud and its consumers; served read-only by --workers."""
    state = pathlib.Path(os.path.expanduser(args.state_dir)) / ("source-%d" % args.trees) \
        if args.state_dir else work / "source"
    state.mkdir(parents=True, exist_ok=True)
    files = provider_files(args.trees, work)
    t0 = time.perf_counter()
    env = dict(os.environ, PLACEMENT_VENV=str(venv_python().parent.parent))
    oracle = Server([sys.executable, ROOT / "hack" / "placement-oracle" / "oracle.py", "serve",
                     "--state-dir", state] + [x for f in files for x in ("-f", f)],
                    "oracle.py", env=env)
    providers_loaded = time.perf_counter() - t0
    everyone = consumers(args.trees, args.consumers_per_tree)
    conn = http.client.HTTPConnection(*oracle.address(), timeout=3600)
    headers = dict(PLACEMENT_HEADERS, **{"OpenStack-API-Version": "placement 1.38"})
    t1 = time.perf_counter()
    posted = 0
    for first in range(0, len(everyone), 500):
        batch = everyone[first:first + 500]
        status, there = request(conn, "GET", "/allocations/" + batch[0][0], headers)
        if status == 200 and there["allocations"]:
            continue  # loaded by an earlier run (each POST is all or nothing)
        body = {c: {"allocations": {provider_uuid(p): {"resources": r} for p, r in on.items()},
                    "project_id": project, "user_id": user, "consumer_generation": None,
                    "consumer_type": ctype}
                for c, project, user, ctype, on in batch}
        status, answer = request(conn, "POST", "/allocations", headers, body)
        if status != 204:
            sys.exit("POST /allocations: %d %s" % (status, answer))
        posted += len(batch)
    consumers_loaded = time.perf_counter() - t1
    oracle.stop()
    say("source: providers ready in %.0f s (bulk loader, or reused), %d consumers posted in %.0f s"
        % (providers_loaded, posted, consumers_loaded))
    return placement(state, args.workers), everyone, providers_loaded, consumers_loaded, posted


# ---------------------------------------------------------------------------
# Reads


DROP = {"generation", "resource_provider_generation", "consumer_generation", "links"}


def normal(v):
    """Generations and links out, every list in one order (the documented differences)."""
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return sorted((normal(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v


def digest(status, body):
    return hashlib.sha1(json.dumps([status, normal(body)], sort_keys=True).encode()).hexdigest()


def read_paths(task):
    """GETs `paths` over one kept connection: {path: digest}, and {path: candidate count}."""
    address, headers, paths = task
    conn = http.client.HTTPConnection(*address, timeout=3600)
    out, counts = {}, {}
    for path in paths:
        for attempt in range(3):
            try:
                status, body = request(conn, "GET", path, headers)
                break
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(*address, timeout=3600)
                if attempt == 2:
                    raise
        if "limit=" in path:
            # Which candidates a limit keeps follows Python's set order: the count only.
            counts[path] = len((body or {}).get("allocation_requests", []))
            out[path] = digest(status, counts[path])
        else:
            out[path] = digest(status, body)
    return out, counts


def read_kind(path):
    if path.startswith("/allocation_candidates"):
        return "candidates, limit=50 (count)" if "limit=" in path else "candidates"
    if path.startswith("/allocations/"):
        return "consumer allocations"
    if path.startswith("/usages"):
        return "usages per project and user" if "user_id" in path else "usages per project"
    if path in ("/resource_classes", "/traits"):
        return "resource classes and traits (lists)"
    m = re.match(r"/resource_providers/[^/]+(/\w+)?$", path)
    if m:
        return {None: "provider", "/allocations": "provider allocations"}.get(m.group(1), (m.group(1) or "")[1:])
    return path


def custom_names(address, headers):
    conn = http.client.HTTPConnection(*address, timeout=600)
    _, traits = request(conn, "GET", "/traits?name=startswith:CUSTOM_", headers)
    _, classes = request(conn, "GET", "/resource_classes", headers)
    return (sorted(traits["traits"]),
            sorted(c["name"] for c in classes["resource_classes"] if c["name"].startswith("CUSTOM_")))


def every_read(address, headers, providers, consumer_ids, readers):
    """Every read of one server: {path: digest}; the provider list's entries as
    `/resource_providers#UUID`."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(*address, timeout=3600)
    status, listing = request(conn, "GET", "/resource_providers", headers)
    out = {"/resource_providers#" + p["uuid"]: digest(status, p)
           for p in listing["resource_providers"]}
    paths = []
    for u in providers:
        paths.append("/resource_providers/" + u)
        for what in ("inventories", "traits", "aggregates", "usages", "allocations"):
            paths.append("/resource_providers/%s/%s" % (u, what))
    paths += ["/allocations/" + c for c in consumer_ids]
    for p in range(PROJECTS):
        paths.append("/usages?project_id=project-%d" % p)
        paths += ["/usages?project_id=project-%d&user_id=user-%d" % (p, u) for u in range(USERS)]
    paths += ["/resource_classes", "/traits"]
    for _, q in vs_real.QUERIES:
        paths += ["/allocation_candidates?" + q, "/allocation_candidates?%s&limit=50" % q]
    chunks = [(address, headers, paths[i::readers]) for i in range(readers)]
    counts = {}
    # Spawned, not forked: a fork beside the pool's own threads can inherit a held lock.
    with multiprocessing.get_context("spawn").Pool(readers) as pool:
        for part, c in pool.imap_unordered(read_paths, chunks):
            out.update(part)
            counts.update(c)
    return out, counts, time.perf_counter() - t0, len(paths) + 1


def compare(want, got):
    """Per read type: (compared, differing, an example)."""
    table = collections.OrderedDict()
    for path in sorted(set(want) | set(got)):
        kind = "provider list entries" if "#" in path else read_kind(path)
        row = table.setdefault(kind, [0, 0, None])
        row[0] += 1
        if want.get(path) != got.get(path):
            row[1] += 1
            row[2] = row[2] or path.replace("#", " entry ")
    return table


def print_comparison(title, table):
    print("\n%s\n\n| read | compared | differing | e.g. |\n| --- | ---: | ---: | --- |" % title)
    for kind, (n, bad, example) in table.items():
        print("| %s | %d | %d | %s |" % (kind, n, bad, example or ""))
    total, bad = sum(r[0] for r in table.values()), sum(r[1] for r in table.values())
    print("| **all** | **%d** | **%d** | |" % (total, bad), flush=True)
    return bad


def show_difference(path, sides):
    """Both answers of a differing read, for the record."""
    for name, address, headers in sides:
        conn = http.client.HTTPConnection(*address, timeout=600)
        p = path.split("#")[0]
        status, body = request(conn, "GET", p, headers)
        if "#" in path:
            body = [x for x in body["resource_providers"] if x["uuid"] == path.split("#")[1]]
        say("  %s: %d %s" % (name, status, json.dumps(normal(body), sort_keys=True)[:600]))


# ---------------------------------------------------------------------------
# The control plane


def cpu_seconds(pid):
    try:
        fields = pathlib.Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ControlPlane:
    def __init__(self, binary, work, operator=True):
        self.work = work
        work.mkdir(parents=True)
        self.bin = ceiling.control_plane_bin()
        self.procs, self.port = ceiling.start(self.bin, work)
        self.kubeconfig = work / "kubeconfig"
        crds = subprocess.run([binary, "crds"], check=True, stdout=subprocess.PIPE).stdout
        self.kubectl(["apply", "-f", "-"], crds)
        for _ in range(60):
            if self.kubectl(["get", "resourceproviders,allocations"], check=False).returncode == 0:
                break
            time.sleep(1)
        self.kubectl(["apply", "-f", "-"], ACCESS.encode())
        self.operator = None
        self.api_port = ceiling.free_port()
        if operator:
            log = open(work / "operator.log", "w")
            self.operator = subprocess.Popen([
                binary, "run", "--kubeconfig", self.kubeconfig, "--self-signed",
                "--webhook-host", "127.0.0.1", "--webhook-config-name", "kubeplace-bench",
                "--namespace", "default", "--leader-elect=false", "--drain-seconds=0",
                "--webhook-addr=127.0.0.1:%d" % ceiling.free_port(),
                "--metrics-addr=127.0.0.1:%d" % ceiling.free_port(),
                "--placement-addr=127.0.0.1:%d" % self.api_port,
            ], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            for _ in range(240):
                ready = self.kubectl(["get", "validatingwebhookconfiguration", "kubeplace-bench"],
                                     check=False).returncode == 0
                if ready and self.api_answers():
                    break
                if self.operator.poll() is not None:
                    sys.exit("the operator exited (see %s)" % (work / "operator.log"))
                time.sleep(0.5)
            else:
                sys.exit("the operator never served (see %s)" % (work / "operator.log"))
            token = self.kubectl(["create", "token", "placement-reader", "-n", "default",
                                  "--audience", "kubeplace-placement", "--duration", "12h"])
            self.headers = dict(PLACEMENT_HEADERS, **{"X-Auth-Token": token.stdout.decode().strip()})

    def api_answers(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=5)
            conn.request("GET", "/")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def kubectl(self, args, stdin=None, check=True):
        return subprocess.run([self.bin / "kubectl", "--kubeconfig", self.kubeconfig] + args,
                              input=stdin, check=check, capture_output=True)

    def pids(self):
        out = {"kube-apiserver": self.procs[0].pid, "etcd": self.procs[1].pid}
        if self.operator:
            out["operator"] = self.operator.pid
        return out

    def stop(self):
        for p in ([self.operator] if self.operator else []) + self.procs:
            p.terminate()
        for p in ([self.operator] if self.operator else []) + self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_kubeplace(cmd, cp=None):
    """Runs a kubeplace command: (wall seconds, stderr, CPU seconds by process)."""
    before = {k: cpu_seconds(v) for k, v in (cp.pids() if cp else {}).items()}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {k: cpu_seconds(v) - before[k] for k, v in (cp.pids() if cp else {}).items()}
    cpu["kubeplace " + cmd[2]] = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(map(str, cmd[1:3])), r.stderr))
    return took, r.stderr, cpu


def figures(stderr):
    """Read and write figures from import's or export's progress lines."""
    f = {}
    m = re.search(r"read (\d+) providers and (\d+) consumers in (\d+) requests \(([\d.]+) s\)", stderr)
    if m:
        f.update(providers=int(m[1]), consumers=int(m[2]), requests=int(m[3]), read_s=float(m[4]))
    m = re.search(r"wrote (\d+) objects in ([\d.]+) s", stderr)
    if m:
        f.update(written=int(m[1]), write_s=float(m[2]))
    m = re.search(r"(\d+) ResourceProviders in ([\d.]+) s .*, (\d+) Allocations in ([\d.]+) s", stderr)
    if m:
        f.update(by_kind="ResourceProviders %.0f/s, Allocations %.0f/s"
                 % (int(m[1]) / max(float(m[2]), 1e-3), int(m[3]) / max(float(m[4]), 1e-3)))
    m = re.search(r"done: (\d+) writes in ([\d.]+) s", stderr)
    if m:
        f.update(written=int(m[1]), write_s=float(m[2]))
    return f


def cpu_text(cpu, wall):
    return ", ".join("%s %.0f s (%.2f cores)" % (k, v, v / max(wall, 1e-6))
                     for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------


def study(args, work):
    """Writes into fresh control planes from a source that costs nothing to read."""
    manifest = work / "study.json"
    objects = kubeplace_manifest(args.study_trees, args.consumers_per_tree, manifest)
    source = kubeplace_serve(args.kubeplace, manifest)
    rows = []
    try:
        settings = [(False, 16)] + [(True, int(w)) for w in args.study_writes.split(",")]
        for n, (operator, writes) in enumerate(settings):
            cp = ControlPlane(args.kubeplace, work / ("study-%d" % n), operator)
            try:
                took, err, cpu = run_kubeplace(
                    [args.kubeplace, "placement", "import", "--from", source.url, "--kubeconfig",
                     cp.kubeconfig, "--namespace", "default", "--writes", writes], cp)
            finally:
                cp.stop()
            f = figures(err)
            rows.append((operator, writes, f, took, cpu))
            say("study: operator %s, %d writes in flight: %s" % (operator, writes, f))
    finally:
        source.stop()
    print("\nWrites into the control plane: %d trees, %d objects, from `serve -f`\n" % (args.study_trees, objects))
    print("| operator (webhook) | writes in flight | write s | objects/s | by kind | CPU during the import |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for operator, writes, f, took, cpu in rows:
        print("| %s | %d | %.1f | %.0f | %s | %s |" % ("yes" if operator else "no", writes, f["write_s"],
                                                      f["written"] / f["write_s"], f.get("by_kind", ""),
                                                      cpu_text(cpu, took)))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=10000)
    ap.add_argument("--consumers-per-tree", type=int, default=2)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--workers", type=int, default=2, help="Placement processes while it is read")
    ap.add_argument("--connections", type=int, default=4, help="import's and export's --connections")
    ap.add_argument("--writes", type=int, default=16, help="import's --writes")
    ap.add_argument("--readers", type=int, default=4, help="client processes comparing reads")
    ap.add_argument("--state-dir", help="keep the loaded source Placement here (see above)")
    ap.add_argument("--study-trees", type=int, default=1000)
    ap.add_argument("--study-writes", default="1,4,16,64")
    ap.add_argument("--study-only", action="store_true")
    ap.add_argument("--skip-again", action="store_true", help="no second import into the cluster")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kubeplace-round-trip."))
    servers = []
    failed = 0
    try:
        print("# import and export round trip, %s\n\n%d cores; load average at start %s; "
              "kubeplace %s" % (time.strftime("%d %b %Y %H:%M"), os.cpu_count(),
                                "/".join("%.2f" % x for x in os.getloadavg()), args.kubeplace))
        if args.study_trees:
            study(args, work)
        if args.study_only:
            return
        source, everyone, p_s, c_s, posted = load_source(args, work)
        servers.append(source)
        trees = args.trees
        providers = 10 + sum(1 + 2 + (1 if i % 2 == 0 else 2) for i in range(trees))
        consumer_ids = [c[0] for c in everyone]
        # Every provider of the source, by uuid, from its list.
        conn = http.client.HTTPConnection(*source.address(), timeout=3600)
        _, listing = request(conn, "GET", "/resource_providers", PLACEMENT_HEADERS)
        uuids = sorted(p["uuid"] for p in listing["resource_providers"])
        assert len(uuids) == providers, (len(uuids), providers)
        allocation_entries = sum(len(c[4]) for c in everyone)
        print("\nLoad: %d trees, %d providers, %d consumers (%d allocations, provider by consumer), "
              "%d Kubernetes objects\n" % (trees, providers, len(everyone), allocation_entries,
                                            providers + len(everyone)))
        stages = []

        def stage(what, took, text):
            stages.append((what, took, text))
            say("%s: %.1f s; %s" % (what, took, text))

        names = custom_names(source.address(), PLACEMENT_HEADERS)
        want, want_counts, took, n = every_read(source.address(), PLACEMENT_HEADERS, uuids,
                                                consumer_ids, args.readers)
        stage("every read of the source Placement (%d workers, %d clients)"
                       % (args.workers, args.readers), took, "%d reads, %.0f/s" % (n, n / took))

        def check(title, side, address, headers):
            got, counts, took, n = every_read(address, headers, uuids, consumer_ids, args.readers)
            table = compare(want, got)
            bad = print_comparison(title, table)
            for kind, (_, b, example) in table.items():
                if b:
                    say("%s: %s differs, e.g. %s" % (title, kind, example))
                    show_difference(example.replace(" entry ", "#"),
                                    [("Placement", source.address(), PLACEMENT_HEADERS),
                                     (side, address, headers)])
            if counts != want_counts:
                say("limit=50 counts: Placement %s, %s %s" % (want_counts, side, counts))
            return bad, took, n

        # Into a file, served by `serve -f`.
        manifest = work / "imported.yaml"
        took, err, cpu = run_kubeplace([args.kubeplace, "placement", "import", "--from", source.url,
                                        "--connections", args.connections, "--to-file", manifest])
        f = figures(err)
        stage("import into a file", took, "read %d requests in %.1f s (%.0f/s); %d objects, "
                       "%.0f objects/s in all; %.1f MB; CPU: %s"
                       % (f["requests"], f["read_s"], f["requests"] / f["read_s"],
                          providers + len(everyone), (providers + len(everyone)) / took,
                          manifest.stat().st_size / 1e6, cpu_text(cpu, took)))
        t0 = time.perf_counter()
        served = kubeplace_serve(args.kubeplace, manifest)
        servers.append(served)
        stage("`serve -f` of the file, to listening", time.perf_counter() - t0, "")
        bad, took, n = check("Placement against `kubeplace placement serve -f` of the import",
                             "serve -f", served.address(), PLACEMENT_HEADERS)
        failed += bad
        stage("every read of `serve -f`", took, "%d reads, %.0f/s" % (n, n / took))
        served.stop()

        # Into the control plane.
        cp = ControlPlane(args.kubeplace, work / "cluster")
        try:
            took, err, cpu = run_kubeplace(
                [args.kubeplace, "placement", "import", "--from", source.url, "--kubeconfig",
                 cp.kubeconfig, "--namespace", "default", "--connections", args.connections,
                 "--writes", args.writes], cp)
            f = figures(err)
            stage("import into the control plane", took,
                           "read %d requests in %.1f s; wrote %d objects in %.1f s, **%.0f objects/s** "
                           "(%d in flight; %s); %.0f objects/s in all; CPU: %s"
                           % (f["requests"], f["read_s"], f["written"], f["write_s"],
                              f["written"] / f["write_s"], args.writes, f.get("by_kind", ""),
                              f["written"] / took, cpu_text(cpu, took)))
            # The operator's store follows the API server's watch: wait until it lists them all.
            t0 = time.perf_counter()
            address = ("127.0.0.1", cp.api_port)
            # Custom names come from the registry ConfigMap, which the API watches, and from
            # the objects.
            for _ in range(600):
                conn = http.client.HTTPConnection(*address, timeout=600)
                status, body = request(conn, "GET", "/resource_providers", cp.headers)
                last = consumer_ids[-1]
                _, alloc = request(conn, "GET", "/allocations/" + last, cp.headers)
                if (status == 200 and len(body["resource_providers"]) == providers
                        and alloc["allocations"] and custom_names(address, cp.headers) == names):
                    break
                time.sleep(1)
            stage("the operator's API lists every provider, consumer and custom name after the import",
                  time.perf_counter() - t0, "")
            bad, took, n = check("Placement against the operator's Placement API over the cluster",
                                 "cluster", address, cp.headers)
            failed += bad
            stage("every read of the operator's API", took, "%d reads, %.0f/s" % (n, n / took))
            # Back out into a fresh Placement.
            target_dir = work / "target"
            target = placement(target_dir, 1)
            servers.append(target)
            took, err, cpu = run_kubeplace(
                [args.kubeplace, "placement", "export", "--to", target.url, "--kubeconfig",
                 cp.kubeconfig, "--namespace", "default"], cp)
            f = figures(err)
            stage("export from the cluster into an empty Placement", took,
                           "%d writes in %.1f s, **%.0f writes/s**; CPU: %s"
                           % (f["written"], f["write_s"], f["written"] / f["write_s"], cpu_text(cpu, took)))
            # Read while only read: served by --workers processes.
            target.stop()
            target = placement(target_dir, args.workers)
            servers.append(target)
            bad, took, n = check("Placement against the Placement exported into", "exported",
                                 target.address(), PLACEMENT_HEADERS)
            failed += bad
            stage("every read of the Placement exported into", took, "%d reads, %.0f/s" % (n, n / took))
            if not args.skip_again:
                took, err, cpu = run_kubeplace(
                    [args.kubeplace, "placement", "import", "--from", source.url, "--kubeconfig",
                     cp.kubeconfig, "--namespace", "default", "--connections", args.connections], cp)
                m = re.search(r"providers: \d+ to create.*", err)
                stage("import again (idempotent)", took, m[0] if m else err.strip()[-300:])
        finally:
            cp.stop()

        print("\n| stage | seconds | figures |\n| --- | ---: | --- |")
        print("| load the source: providers (bulk loader, or reused) | %.0f | |" % p_s)
        print("| load the source: consumers (`POST /allocations`, 500 a request) | %.0f | %d posted |"
              % (c_s, posted))
        for what, took, text in stages:
            print("| %s | %.1f | %s |" % (what, took, text))
        print("\nload average at end %s" % "/".join("%.2f" % x for x in os.getloadavg()))
    finally:
        for s in servers:
            s.stop()
        if args.keep:
            say("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
