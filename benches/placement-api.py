#!/usr/bin/env python3
"""Speed of `kubeplace placement serve` over HTTP (stdlib only).

    benches/placement-api.py --kubeplace target/release/kubeplace -f CLOUD.yaml \
        [--clients 8] [--seconds 10] [--query 'resources=VCPU:1,MEMORY_MB:512&limit=1000']

Prints, one JSON line each: the load (seconds from start to the `listening` line, the
process's RSS then), requests/s of GET /allocation_candidates?QUERY at N concurrent
keep-alive clients (with the p50 latency), and claims/s of sequential
PUT /allocations/{consumer} of 1 VCPU, one new consumer each, spread over the providers of
the first N candidates of resources=VCPU:1. The Python client
is part of what is measured: the figures are lower bounds for the server.
"""
import argparse
import http.client
import json
import statistics
import subprocess
import threading
import time
import uuid

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


def start(binary, files):
    cmd = [binary, "placement", "serve", "--listen", "127.0.0.1:0"]
    for f in files:
        cmd += ["-f", f]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    load = time.time() - t0
    rss_kb = 0
    with open("/proc/%d/status" % proc.pid) as f:
        for l in f:
            if l.startswith("VmRSS:"):
                rss_kb = int(l.split()[1])
    host, port = line.strip().rsplit("http://", 1)[1].split(":")
    return proc, host, int(port), load, rss_kb, line.strip()


def reader(host, port, path, deadline, latencies, counts, i):
    conn = http.client.HTTPConnection(host, port)
    n = 0
    while time.time() < deadline:
        t = time.perf_counter()
        conn.request("GET", path, headers=HEADERS)
        r = conn.getresponse()
        r.read()
        latencies.append(time.perf_counter() - t)
        assert r.status == 200, r.status
        n += 1
    counts[i] = n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeplace", required=True)
    ap.add_argument("-f", action="append", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--claims", type=int, default=500)
    ap.add_argument("--query", default="resources=VCPU:1,MEMORY_MB:512&limit=1000")
    a = ap.parse_args()
    proc, host, port, load, rss, line = start(a.kubeplace, a.f)
    try:
        print(json.dumps({"load_seconds": round(load, 3), "rss_mb": rss // 1024, "line": line}))
        path = "/allocation_candidates?" + a.query
        conn = http.client.HTTPConnection(host, port)
        conn.request("GET", path, headers=HEADERS)
        r = conn.getresponse()
        body = json.loads(r.read())
        print(json.dumps({"query": a.query, "candidates": len(body["allocation_requests"])}))
        latencies, counts = [], [0] * a.clients
        deadline = time.time() + a.seconds
        threads = [threading.Thread(target=reader, args=(host, port, path, deadline, latencies, counts, i))
                   for i in range(a.clients)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        print(json.dumps({"clients": a.clients, "requests_per_s": round(sum(counts) / took, 1),
                          "p50_ms": round(statistics.median(latencies) * 1e3, 2)}))
        # The server closes connections idle for 10 s: take a fresh one.
        conn = http.client.HTTPConnection(host, port)
        conn.request("GET", "/allocation_candidates?resources=VCPU:1&limit=%d" % a.claims,
                     headers=HEADERS)
        requests = json.loads(conn.getresponse().read())["allocation_requests"]
        targets = [next(iter(r["allocations"])) for r in requests]
        ok = refused = 0
        t0 = time.time()
        for i in range(a.claims):
            rp = targets[i % len(targets)]
            body = json.dumps({"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p",
                               "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"})
            conn.request("PUT", "/allocations/%s" % uuid.uuid4(), body=body,
                         headers=dict(HEADERS, **{"Content-Type": "application/json"}))
            r = conn.getresponse()
            r.read()
            ok += r.status == 204
            refused += r.status == 409
        took = time.time() - t0
        print(json.dumps({"claims": a.claims, "claims_per_s": round(a.claims / took, 1),
                          "accepted": ok, "refused_409": refused}))
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
