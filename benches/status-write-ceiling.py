#!/usr/bin/env python3
"""How many ResourceProvider status writes a second this machine's control plane absorbs.

    hack/build-control-plane.sh
    cargo build --release
    python3 benches/status-write-ceiling.py [--providers 3000] [--kubeplace target/release/kubeplace]

The time the operator needs to settle a new cloud is bounded by how fast the API server and
etcd take status writes. This script measures that bound without the operator: it starts
etcd and kube-apiserver on 127.0.0.1 (the binaries of hack/build-control-plane.sh), installs
kubeplace's CRDs, creates --providers ResourceProviders of the cloud of
benches/placement-vs-real.py with kubectl, computes their statuses with `kubeplace apply -o
json`, then writes every status to the `status` subresource over HTTPS from 4, 8 and 16
threads, once with server-side apply (what the operator sends: `application/apply-patch+yaml`,
field manager `kubeplace`, `force=true`) and once with a JSON merge patch, and prints the
writes a second of each round. Each round writes a new `observedGeneration`, so every write
changes the stored object.

The writer is Python on the same cores as the API server and etcd, so the figures are what
the control plane absorbs with a client beside it; the operator's writer is lighter.
"""
import argparse
import http.client
import importlib.util
import json
import os
import pathlib
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("vs_real", ROOT / "benches" / "placement-vs-real.py")
vs_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vs_real)

TOKEN = "kubeplace-bench"


def control_plane_bin():
    out = subprocess.run([str(ROOT / "hack" / "build-control-plane.sh")], check=True,
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True).stdout
    return pathlib.Path(out.strip().splitlines()[-1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(bin_dir, work):
    """etcd and kube-apiserver; returns (processes, port)."""
    def run(*args):
        subprocess.run(args, check=True, cwd=work, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "api.key",
        "-out", "api.crt", "-days", "2", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1")
    run("openssl", "genrsa", "-out", "sa.key", "2048")
    run("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    (work / "tokens.csv").write_text(f"{TOKEN},bench,bench,system:masters\n")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    client, peer = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    log = open(work / "control-plane.log", "w")
    etcd = subprocess.Popen([
        str(bin_dir / "etcd"), "--name=bench", f"--data-dir={work / 'etcd'}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=bench={peer}", "--unsafe-no-fsync", "--log-level=warn",
    ], stdout=log, stderr=log)
    api = subprocess.Popen([
        str(bin_dir / "kube-apiserver"), f"--etcd-servers={client}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}", "--tls-cert-file=api.crt", "--tls-private-key-file=api.key",
        "--token-auth-file=tokens.csv",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-account-key-file=sa.pub", "--service-account-signing-key-file=sa.key",
        "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none", "--profiling=false",
    ], cwd=work, stdout=log, stderr=log)
    (work / "kubeconfig").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{api_port}",
                                                "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }))
    ctx = ssl._create_unverified_context()
    for _ in range(120):
        try:
            c = http.client.HTTPSConnection("127.0.0.1", api_port, context=ctx, timeout=2)
            c.request("GET", "/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
            if c.getresponse().status == 200:
                return [api, etcd], api_port
        except OSError:
            pass
        time.sleep(1)
    sys.exit("kube-apiserver did not become ready (see control-plane.log)")


def write_round(port, statuses, mode, threads, generation):
    ctx = ssl._create_unverified_context()
    todo = list(statuses)
    lock = threading.Lock()
    errors = []

    def worker():
        c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        while True:
            with lock:
                if not todo:
                    return
                name = todo.pop()
            status = dict(statuses[name], observedGeneration=generation)
            path = f"/apis/kubeplace.io/v1alpha1/resourceproviders/{name}/status"
            headers = {"Authorization": f"Bearer {TOKEN}"}
            if mode == "server-side apply":
                body = {"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
                        "status": status}
                headers["Content-Type"] = "application/apply-patch+yaml"
                path += "?fieldManager=kubeplace&force=true"
            else:
                body = {"status": status}
                headers["Content-Type"] = "application/merge-patch+json"
                path += "?fieldManager=kubeplace"
            c.request("PATCH", path, body=json.dumps(body), headers=headers)
            r = c.getresponse()
            r.read()
            if r.status != 200:
                with lock:
                    errors.append(r.status)

    t0 = time.perf_counter()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0, len(errors)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--providers", type=int, default=3000)
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    args = ap.parse_args()
    bin_dir = control_plane_bin()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kubeplace-status-writes."))
    procs = []
    try:
        procs, port = start(bin_dir, work)
        kubectl = [str(bin_dir / "kubectl"), "--kubeconfig", str(work / "kubeconfig")]
        crds = subprocess.run([args.kubeplace, "crds"], check=True, stdout=subprocess.PIPE).stdout
        subprocess.run(kubectl + ["apply", "-f", "-"], input=crds, check=True,
                       stdout=subprocess.DEVNULL)
        trees = args.providers // 4 + 1  # about 4.5 providers a tree
        items = vs_real.cloud(trees)
        items = items[:args.providers]
        cloud = work / "providers.json"
        cloud.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        for _ in range(30):
            if subprocess.run(kubectl + ["get", "resourceproviders"], capture_output=True).returncode == 0:
                break
            time.sleep(1)
        t0 = time.perf_counter()
        subprocess.run(kubectl + ["create", "-f", str(cloud)], check=True,
                       stdout=subprocess.DEVNULL)
        created = time.perf_counter() - t0
        report = json.loads(subprocess.run([args.kubeplace, "apply", "-o", "json", "-f", str(cloud)],
                                           check=True, stdout=subprocess.PIPE).stdout)
        statuses = {i["name"]: i["status"] for i in report["items"]}
        print(f"{len(items)} ResourceProviders created with kubectl in {created:.1f} s; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
        print("| status writes | in flight | seconds | writes/s | errors |")
        print("| --- | --- | --- | --- | --- |")
        generation = 1
        for threads in (4, 8, 16):
            for mode in ("server-side apply", "merge patch"):
                generation += 1
                took, errors = write_round(port, statuses, mode, threads, generation)
                print(f"| {mode} | {threads} | {took:.2f} | {len(statuses) / took:.0f} | {errors} |",
                      flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
