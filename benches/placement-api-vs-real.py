#!/usr/bin/env python3
"""Placement's REST API served by kubeplace, side by side with real Placement, over HTTP.

    python3 -m venv V && V/bin/pip install 'openstack-placement>=16,<17'
    cargo build --release
    PLACEMENT_VENV=V python3 benches/placement-api-vs-real.py --trees 10000 \
        --state-dir ~/.cache/kubeplace/placement-10k

Writes the cloud of benches/placement-vs-real.py (the same files, so a database that script
loaded is reused), starts Placement 16 on it (hack/placement-oracle/oracle.py serve: SQLite,
Python's WSGI server, one process) and `kubeplace placement serve -f …`, then in one run:

1. times every query of benches/placement-vs-real.py, with and without `limit=50`, and the
   `GET /resource_providers` queries of PROVIDER_QUERIES, on both servers with the same
   client (Python's http.client, keep-alive, the whole body read into one buffer, see Sink):
   median of --repeat reads (Placement) and of 5x as many (kubeplace), each read again until
   two seconds of reads are timed (at most 101), and their ratio;
   beside them, for each answer of 100 kB or more, the same client reading kubeplace's
   answer from a server that only writes those bytes from a buffer prepared beforehand (a
   process of its own, a mebibyte a write), and Placement's time over that: about the most
   any server could be faster than Placement for that answer with this client on this
   machine (loopback and the client's copy of the bytes);
2. requests/s of `GET /allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=1000` at
   --clients concurrent clients (one process each) for --seconds, on each server;
3. claims/s: `PUT /allocations/{new consumer}` of 1 VCPU, spread over the first providers
   of `resources=VCPU:1`, one client and --clients clients, on each server.

With --kubeplace-url URL (and --token TOKEN), the queries are also timed on a kubeplace
already serving the same cloud there, e.g. `kubeplace run --placement-addr` over a cluster
holding it (benches/placement_api_cluster.rs starts one): its column is added to the table,
its answers checked against `kubeplace placement serve`'s (byte for byte, but for the
providers' generations, which a cluster's writes of their statuses do not change).

The client is part of what is measured: the figures are lower bounds for both servers, and
the ratios understate kubeplace's where its answers are fast.

The oracle writes the cloud straight into Placement's SQLite database with Placement's own
table definitions (its bulk loader: the same rows, ids and generations as loading through the
REST API; hack/placement-oracle/bulk-check.py compares the two), so 10,000 trees (45,010
providers) load in about 40 s (12 s of it writing the database; the rest reading the
manifests) instead of hours. --state-dir keeps the database: a later
run with the same --trees reuses it when the oracle's loader and Placement's version are the
same. Step 3 writes allocations into Placement's database, so a kept database carries the
claims of earlier runs.
"""
import argparse
import http.client
import importlib.util
import json
import multiprocessing
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
LIMITED = "resources=VCPU:1,MEMORY_MB:512&limit=1000"
# `GET /resource_providers` queries: every provider (45,010 at 10k trees), the NUMA cells
# (20,000), the compute nodes with a trait (5,000), one aggregate's members, one tree.
PROVIDER_QUERIES = [
    ("providers: all", ""),
    ("providers: VCPU:2, !CUSTOM_GOLD", "resources=VCPU:2&required=!CUSTOM_GOLD"),
    ("providers: HW_CPU_X86_AVX2", "required=HW_CPU_X86_AVX2"),
    ("providers: member_of", "member_of=00000000-0000-4000-8000-000000000003"),
]
# A prepared answer is served for the limit column only from this size on.
PREPARED_FROM = 100_000

spec = importlib.util.spec_from_file_location("vs_real", ROOT / "benches" / "placement-vs-real.py")
vs_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vs_real)


def write_cloud(trees, tmp):
    files = []
    for first in range(0, max(trees, 1), vs_real.TREES_PER_FILE):
        path = pathlib.Path(tmp) / ("cloud-%03d.json" % (first // vs_real.TREES_PER_FILE))
        items = vs_real.cloud(min(trees, first + vs_real.TREES_PER_FILE), first)
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        files.append(str(path))
    return files


def url_of(line):
    host, port = line.strip().rsplit("http://", 1)[1].rstrip("/").split(":")
    return host, int(port)


# With --cpus-apart, the CPUs every server this script starts runs on (the client keeps the
# others): set in main.
SERVER_CPUS = None


def on_server_cpus():
    if SERVER_CPUS is not None:
        os.sched_setaffinity(0, SERVER_CPUS)


def start_kubeplace(binary, files):
    cmd = [binary, "placement", "serve", "--listen", "127.0.0.1:0"]
    for f in files:
        cmd += ["-f", f]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=on_server_cpus)
    line = proc.stdout.readline()
    return proc, url_of(line), time.perf_counter() - t0


def start_placement(files, state_dir):
    cmd = [sys.executable, str(ROOT / "hack" / "placement-oracle" / "oracle.py"), "serve"]
    for f in files:
        cmd += ["-f", f]
    if state_dir:
        cmd += ["--state-dir", os.path.expanduser(state_dir)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=on_server_cpus)
    line = proc.stdout.readline()
    if not line:
        sys.exit("Placement did not start (see the oracle's messages above)")
    return proc, url_of(line), time.perf_counter() - t0


def get(conn, path, headers=HEADERS):
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    return r.status, body


class Sink:
    """Where a timed answer's body is read to: one buffer, allocated once and grown when an
    answer is larger, read into straight from the socket (`readinto`), so that the client
    copies each byte once, as a client in a compiled language would. `read()` makes a new
    bytes object of every part it reads and joins them, which made the client, not the
    server, the bound on large answers (1.4 GB/s against about 4 GB/s here)."""

    def __init__(self):
        self.buf = bytearray(1 << 20)

    def get(self, conn, path, headers=HEADERS):
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        length = r.getheader("Content-Length")
        if length is not None and int(length) >= len(self.buf):
            # One byte more, so that the end is seen without growing.
            self.buf = bytearray(int(length) + 1)
        view = memoryview(self.buf)
        n = 0
        while True:
            if n == len(self.buf):
                # Longer than said, or no length given: grow and go on reading.
                self.buf.extend(bytes(len(self.buf)))
                view = memoryview(self.buf)
            k = r.readinto(view[n:])
            if not k:
                break
            n += k
        return r.status, n


# Reads of one query go on past --repeat until this many seconds of them are timed (and at
# most MOST_READS): a median of 3 reads of an answer of tens of milliseconds moved by half
# from one run of the bench to the next (Placement's one aggregate: medians of 3 of one
# process from 35 to 72 ms, of 30 reads 57 ms). Slow queries still take --repeat reads.
TIMED_SECONDS = 2.0
MOST_READS = 101


def time_query(addr, path, runs, headers=HEADERS):
    """The status and body of a first, untimed read, and the median ms of at least `runs`
    reads, and more until TIMED_SECONDS of reads (at most MOST_READS)."""
    conn = http.client.HTTPConnection(*addr, timeout=600)
    status, body = get(conn, path, headers)
    sink = Sink()
    times = []
    while len(times) < runs or (sum(times) < TIMED_SECONDS * 1e3 and len(times) < MOST_READS):
        t0 = time.perf_counter()
        _, n = sink.get(conn, path, headers)
        times.append((time.perf_counter() - t0) * 1e3)
        assert n == len(body), (path, n, len(body))
    return status, body, statistics.median(times)


# A server on 127.0.0.1 that answers every request with the bytes of the file it is given,
# read into memory first, written a mebibyte at a time (as kubeplace writes large answers;
# on this kind of machine one write of tens of megabytes reaches the client later).
PREPARED_SERVER = r"""
import socket, sys
body = open(sys.argv[1], "rb").read()
head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        % len(body))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print(listener.getsockname()[1], flush=True)
view = memoryview(body)
while True:
    conn, _ = listener.accept()
    f = conn.makefile("rb")
    while f.readline():
        while f.readline() not in (b"\r\n", b""):
            pass
        conn.sendall(head)
        for at in range(0, len(body), 1 << 20):
            conn.sendall(view[at:at + (1 << 20)])
    conn.close()
"""


def limit_ms(body, runs, servers=3):
    """The same client reading `body` from a server that only writes it from a buffer
    prepared beforehand, in a process of its own: what sending those bytes costs without
    making them. The least of the medians of `runs` reads from each of `servers` such
    processes started in turn: on two cores the time depends on where the scheduler
    places the server beside the client (8 or 15 ms for 35 MB here), for the life of the
    process."""
    if len(body) < PREPARED_FROM:
        return None
    medians = []
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(body)
        f.flush()
        for _ in range(servers):
            server = subprocess.Popen([sys.executable, "-c", PREPARED_SERVER, f.name],
                                      preexec_fn=on_server_cpus,
                                      stdout=subprocess.PIPE, text=True)
            try:
                port = int(server.stdout.readline())
                medians.append(time_query(("127.0.0.1", port), "/", runs)[2])
            finally:
                server.kill()
                server.wait()
    return min(medians)


def reader(args):
    addr, path, seconds = args
    conn = http.client.HTTPConnection(*addr, timeout=600)
    deadline = time.time() + seconds
    latencies = []
    while time.time() < deadline:
        t0 = time.perf_counter()
        status, _ = get(conn, path)
        assert status == 200, status
        latencies.append(time.perf_counter() - t0)
    return latencies


def throughput(addr, clients, seconds):
    path = "/allocation_candidates?" + LIMITED
    t0 = time.time()
    with multiprocessing.Pool(clients) as pool:
        results = pool.map(reader, [(addr, path, seconds)] * clients)
    took = time.time() - t0
    latencies = [x for r in results for x in r]
    return len(latencies) / took, statistics.median(latencies) * 1e3


def claimer(args):
    addr, targets, count, offset = args
    conn = http.client.HTTPConnection(*addr, timeout=600)
    ok = refused = 0
    for i in range(count):
        rp = targets[(offset + i) % len(targets)]
        body = json.dumps({"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p",
                           "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"})
        conn.request("PUT", "/allocations/%s" % uuid.uuid4(), body=body,
                     headers=dict(HEADERS, **{"Content-Type": "application/json"}))
        r = conn.getresponse()
        r.read()
        ok += r.status == 204
        refused += r.status == 409
    return ok, refused


def claims(addr, clients, per_client):
    conn = http.client.HTTPConnection(*addr, timeout=600)
    _, body = get(conn, "/allocation_candidates?resources=VCPU:1&limit=1000")
    targets = [next(iter(r["allocations"])) for r in json.loads(body)["allocation_requests"]]
    t0 = time.time()
    with multiprocessing.Pool(clients) as pool:
        results = pool.map(claimer, [(addr, targets, per_client, i * per_client) for i in range(clients)])
    took = time.time() - t0
    ok = sum(r[0] for r in results)
    refused = sum(r[1] for r in results)
    return clients * per_client / took, ok, refused


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per query on Placement")
    ap.add_argument("--kubeplace", default=str(ROOT / "target" / "release" / "kubeplace"))
    ap.add_argument("--state-dir", help="keep Placement's loaded database here (see above)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--claims", type=int, default=200, help="claims per client")
    ap.add_argument("--kubeplace-url", help="also time a kubeplace already serving this cloud here")
    ap.add_argument("--token", default="admin", help="the X-Auth-Token for --kubeplace-url")
    ap.add_argument("--queries-only", action="store_true",
                    help="time the queries only (no requests/s, no claims)")
    ap.add_argument("--cpus-apart", action="store_true",
                    help="run the client on the first CPU and every server this script starts "
                         "on the others, as a client on another machine would be")
    args = ap.parse_args()
    if args.cpus_apart:
        global SERVER_CPUS
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            sys.exit("--cpus-apart needs two CPUs or more")
        os.sched_setaffinity(0, cpus[:1])
        SERVER_CPUS = set(cpus[1:])
    with tempfile.TemporaryDirectory() as tmp:
        files = write_cloud(args.trees, tmp)
        print("starting Placement (loading %d trees unless --state-dir holds them) …" % args.trees,
              file=sys.stderr, flush=True)
        placement, p_addr, p_load = start_placement(files, args.state_dir)
        kubeplace, k_addr, k_load = start_kubeplace(args.kubeplace, files)
        try:
            print(f"{args.trees} trees; kubeplace serves after {k_load:.2f} s, "
                  f"Placement after {p_load:.0f} s")
            print(f"load averages at start: {os.getloadavg()}")
            if SERVER_CPUS is not None:
                print(f"client on CPU {sorted(os.sched_getaffinity(0))}, "
                      f"servers on CPUs {sorted(SERVER_CPUS)}")
            if args.kubeplace_url:
                url = args.kubeplace_url.rstrip("/").rsplit("//", 1)[-1]
                host, port = url.rsplit(":", 1)
                r_addr = (host, int(port))
                r_headers = dict(HEADERS, **{"X-Auth-Token": args.token})
            paths = [("/allocation_candidates?" + q, label)
                     for name, q0 in vs_real.QUERIES
                     for label, q in ((name, q0), (name + ", limit=50", q0 + "&limit=50"))]
            paths += [("/resource_providers" + ("?" + q if q else ""), label)
                      for label, q in PROVIDER_QUERIES]
            rows = []
            for path, label in paths:
                k_status, k_body, k_ms = time_query(k_addr, path, args.repeat * 5)
                p_status, p_body, p_ms = time_query(p_addr, path, args.repeat)
                assert k_status == p_status == 200, (label, k_status, p_status)
                key = "allocation_requests" if path.startswith("/allocation") else "resource_providers"
                k_n = len(json.loads(k_body)[key])
                p_n = len(json.loads(p_body)[key])
                if key == "resource_providers":
                    # The same providers on both (Placement lists them in its own order).
                    assert (sorted(r["uuid"] for r in json.loads(k_body)[key])
                            == sorted(r["uuid"] for r in json.loads(p_body)[key])), label
                r_ms = None
                if args.kubeplace_url:
                    r_status, r_body, r_ms = time_query(r_addr, path, args.repeat * 5, r_headers)
                    assert r_status == 200, (label, r_status, r_body[:300])
                    if key == "resource_providers":
                        def without_generations(body):
                            listed = json.loads(body)[key]
                            for r in listed:
                                r.pop("generation")
                            return listed
                        assert without_generations(r_body) == without_generations(k_body), label
                    else:
                        assert r_body == k_body, label
                rows.append((label, k_n, p_n, len(k_body), p_ms, k_ms,
                             limit_ms(k_body, args.repeat * 5), r_ms))
            run_head = " kubeplace run ms | ratio |" if args.kubeplace_url else ""
            print(f"\n| query | results (kubeplace / Placement) | JSON MB | Placement ms | kubeplace ms | ratio |"
                  f"{run_head} prepared buffer ms | Placement / prepared |")
            print("| --- " * (10 if args.kubeplace_url else 8) + "|")
            for label, k_n, p_n, size, p_ms, k_ms, b_ms, r_ms in rows:
                limit = " |" if b_ms is None else f"{b_ms:.2f} | {p_ms / b_ms:.0f}x"
                run = f" {r_ms:.2f} | {p_ms / r_ms:.0f}x |" if r_ms is not None else ""
                print(f"| {label} | {k_n} / {p_n} | {size / 1e6:.1f} | {p_ms:.1f} | {k_ms:.2f} | "
                      f"{p_ms / k_ms:.0f}x |{run} {limit} |")
            geo = statistics.geometric_mean([r[4] / r[5] for r in rows])
            print(f"\ngeometric mean ratio: {geo:.0f}x; smallest: {min(r[4] / r[5] for r in rows):.0f}x")
            if args.kubeplace_url:
                geo = statistics.geometric_mean([r[4] / r[7] for r in rows])
                print(f"kubeplace run: geometric mean ratio {geo:.0f}x; "
                      f"smallest: {min(r[4] / r[7] for r in rows):.0f}x")
            if args.queries_only:
                print(f"\nload averages at end: {os.getloadavg()}")
                return

            print(f"\n| {LIMITED}, {args.clients} clients, {args.seconds:.0f} s | requests/s | p50 ms |")
            print("| --- | --- | --- |")
            for who, addr in (("Placement", p_addr), ("kubeplace", k_addr)):
                rps, p50 = throughput(addr, args.clients, args.seconds)
                print(f"| {who} | {rps:.1f} | {p50:.1f} |")

            print(f"\n| claims (PUT /allocations, 1 VCPU, new consumers) | clients | claims/s | accepted | refused |")
            print("| --- | --- | --- | --- | --- |")
            for clients in (1, args.clients):
                for who, addr in (("Placement", p_addr), ("kubeplace", k_addr)):
                    rate, ok, refused = claims(addr, clients, max(args.claims // clients, 10))
                    print(f"| {who} | {clients} | {rate:.1f} | {ok} | {refused} |")
            print(f"\nload averages at end: {os.getloadavg()}")
        finally:
            kubeplace.kill()
            placement.terminate()
            placement.wait(timeout=60)


if __name__ == "__main__":
    main()
