#!/usr/bin/env python3
"""Hostile clients against `kubeplace placement serve`: what each costs the server.

Each probe starts the given binary's `placement serve` afresh, does what a hostile client
would, and prints one line: the server's peak resident memory (VmHWM) before and after, and
what the clients saw. Give two binaries to see a change side by side:

    python3 hack/exposure-probe.py --bin OLD --bin target/debug/kubeplace [--probe NAME]...

Probes:
- search-spelling: 8 concurrent unlimited candidates searches over a cloud of --trees trees
  (benches/placement-vs-real.py's), spelled /allocation_candidates and //allocation_candidates.
- drip: 15 connections send chunked bodies one byte a frame for 10 s, as an admin and as a
  reader (`--test-roles-from-headers`).
- idle: 1,024 keep-alive connections from 4 peers (then from one), each answered once and
  sent a request every 4 s; how long a new client waits for `GET /`.
- tokens: with a real Keystone (hack/keystone-serve.py in the venv of hack/keystone-venv.sh),
  --tokens distinct tokens of 60,000 bytes, then of 8,000 bytes, each sent once by 16
  clients at a time.
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def vmhwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Serve:
    """`placement serve` on a free port; its address and process."""

    def __init__(self, binary, args):
        self.proc = subprocess.Popen(
            [binary, "placement", "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        self.addr = line.strip().rsplit("http://", 1)[-1]
        self.host, port = self.addr.split(":")
        self.port = int(port)

    def mib(self):
        return vmhwm_kib(self.proc.pid) / 1024

    def close(self):
        self.proc.kill()
        self.proc.wait()


def request(addr, method, path, headers=(), body=b"", source=None, timeout=120):
    host, port = addr.split(":")
    s = socket.create_connection((host, int(port)), timeout=timeout,
                                 source_address=(source, 0) if source else None)
    head = f"{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n"
    for k, v in headers:
        head += f"{k}: {v}\r\n"
    s.sendall(head.encode() + b"\r\n" + body)
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    status = int(got.split(b" ", 2)[1]) if got else 0
    return status, len(got)


ADMIN = [("X-Auth-Token", "admin"), ("OpenStack-API-Version", "placement 1.39")]


def probe_search_spelling(binary, args):
    spec = importlib.util.spec_from_file_location("pvr", ROOT / "benches/placement-vs-real.py")
    pvr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pvr)
    d = pathlib.Path(tempfile.mkdtemp(prefix="kubeplace-probe-"))
    files = []
    for first in range(0, args.trees, pvr.TREES_PER_FILE):
        docs = pvr.cloud(min(pvr.TREES_PER_FILE, args.trees - first), first)
        path = d / f"cloud-{first}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        files.append(str(path))
    out = []
    for spelling in ["/allocation_candidates", "//allocation_candidates"]:
        s = Serve(binary, [a for f in files for a in ("-f", f)])
        request(s.addr, "GET", "/resource_providers?name=none", ADMIN)
        before = s.mib()
        query = f"{spelling}?resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: request(s.addr, "GET", query, ADMIN), range(8)))
        statuses = sorted(a[0] for a in answers)
        out.append(f"8 unlimited searches via {spelling}: peak {before:.0f} -> {s.mib():.0f} MiB; statuses {statuses}")
        s.close()
    return out


def drip(addr, headers, connections, seconds):
    socks = []
    for _ in range(connections):
        c = socket.create_connection(addr.split(":") and (addr.split(":")[0], int(addr.split(":")[1])))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = "PUT /resource_providers/c0a80001-0000-4000-8000-000000000001/traits HTTP/1.1\r\n"
        head += f"Host: {addr}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        for k, v in headers:
            head += f"{k}: {v}\r\n"
        c.sendall(head.encode() + b"\r\n")
        socks.append(c)
    end = time.time() + seconds
    frames = 0
    while time.time() < end:
        for c in socks:
            try:
                c.send(b"1\r\n \r\n")
            except OSError:
                pass
        frames += 1
        time.sleep(0.0005)
    statuses = []
    for c in socks:
        c.settimeout(15)
        try:
            got = c.recv(100)
            statuses.append(int(got.split(b" ", 2)[1]) if got else 0)
        except OSError:
            statuses.append(0)
        c.close()
    return frames, statuses


def probe_drip(binary, args):
    out = []
    cloud = str(ROOT / "tests/data/placement-api/cloud.yaml")
    for who, headers in [
        ("admin", [("X-Auth-Token", "admin"), ("OpenStack-API-Version", "placement 1.39")]),
        ("reader", [("X-Auth-Token", "reader:demo"), ("X-Roles", "reader"),
                    ("OpenStack-API-Version", "placement 1.39")]),
    ]:
        s = Serve(binary, ["-f", cloud, "--test-roles-from-headers"])
        request(s.addr, "GET", "/resource_providers", ADMIN)
        before = s.mib()
        frames, statuses = drip(s.addr, headers, 15, 10)
        out.append(f"15 {who} bodies, {frames} one-byte frames each over 10 s: peak {before:.0f} -> {s.mib():.0f} MiB; answers {sorted(set(statuses))}")
        s.close()
    return out


def keepalive(addr, source):
    host, port = addr.split(":")
    c = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    return c


def discover(c):
    c.sendall(b"GET / HTTP/1.1\r\nHost: kubeplace\r\n\r\n")
    got = b""
    while not got.endswith(b"}]}"):
        chunk = c.recv(4096)
        if not chunk:
            return False
        got += chunk
    return True


def probe_idle(binary, args):
    out = []
    for peers in [["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], ["127.0.0.6"]]:
        s = Serve(binary, [])
        held = []
        for i in range(1024):
            try:
                c = keepalive(s.addr, peers[i % len(peers)])
                if discover(c):
                    held.append(c)
            except OSError:
                pass
        stop = threading.Event()

        def ping():
            while not stop.wait(4):
                for c in list(held):
                    try:
                        discover(c)
                    except OSError:
                        held.remove(c)

        pinger = threading.Thread(target=ping, daemon=True)
        pinger.start()
        time.sleep(1)
        started = time.time()
        try:
            c = socket.create_connection((s.host, s.port), timeout=30, source_address=("127.0.0.9", 0))
            ok = discover(c)
            c.close()
        except OSError:
            ok = False
        waited = time.time() - started
        stop.set()
        out.append(f"1,024 keep-alive connections from {len(peers)} peer(s), pinged every 4 s: a new client {'answered' if ok else 'NOT answered'} after {waited:.2f} s")
        for c in held:
            c.close()
        s.close()
    return out


def probe_tokens(binary, args):
    venv = subprocess.run([str(ROOT / "hack/keystone-venv.sh")], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]
    d = tempfile.mkdtemp(prefix="kubeplace-probe-ks-")
    ks = subprocess.Popen([f"{venv}/bin/python", str(ROOT / "hack/keystone-serve.py"), f"{d}/keystone"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info = json.loads(ks.stdout.readline())
    ini = pathlib.Path(d) / "authtoken.ini"
    ini.write_text(
        f"[keystone_authtoken]\nauth_url = {info['url']}\nwww_authenticate_uri = {info['url']}\n"
        f"auth_type = password\nusername = placement\npassword = {info['password']}\n"
        "project_name = service\nuser_domain_name = Default\nproject_domain_name = Default\n")
    out = []
    try:
        for size in [60000, 8000]:
            s = Serve(binary, ["--keystone-authtoken", str(ini)])
            request(s.addr, "GET", "/", [])
            before = s.mib()
            started = time.time()

            def send(i):
                token = ("%010d" % i) + "x" * (size - 10)
                return request(s.addr, "GET", "/resource_providers",
                               [("X-Auth-Token", token)], timeout=60)[0]

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                statuses = list(pool.map(send, range(args.tokens)))
            took = time.time() - started
            counts = {st: statuses.count(st) for st in sorted(set(statuses))}
            out.append(f"{args.tokens} distinct {size}-byte tokens: peak {before:.0f} -> {s.mib():.0f} MiB in {took:.0f} s; answers {counts}")
            s.close()
    finally:
        ks.kill()
        ks.wait()
    return out


PROBES = {
    "search-spelling": probe_search_spelling,
    "drip": probe_drip,
    "idle": probe_idle,
    "tokens": probe_tokens,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="a kubeplace binary (repeat to compare)")
    ap.add_argument("--probe", action="append", choices=sorted(PROBES), help="which (default: all)")
    ap.add_argument("--trees", type=int, default=10000)
    ap.add_argument("--tokens", type=int, default=12000)
    args = ap.parse_args()
    for name in args.probe or list(PROBES):
        for binary in args.bin:
            for line in PROBES[name](binary, args):
                print(f"{name} | {binary} | {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
