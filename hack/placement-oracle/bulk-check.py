#!/usr/bin/env python3
"""Checks that oracle.py's bulk loader leaves Placement answering as its API loader does.

    PLACEMENT_VENV=~/.cache/kubeplace/placement-venv \
        python3 hack/placement-oracle/bulk-check.py [--trees 1000] \
        [--bulk-state DIR] [--api-state DIR] [--sample 250] [-f MANIFEST ...]

Writes the cloud of benches/placement-api-vs-real.py (its write_cloud, so the same files
as the benchmark) and serves it twice with real Placement (oracle.py serve): once loaded
by the bulk loader (the default), once through Placement's REST API
(--load-through-api). Without --bulk-state/--api-state both go to fresh directories
under a temporary one; given directories are reused when they already hold this cloud
(oracle.py's --state-dir rule), so a slow API load can be kept for later runs. At 1,000
trees the API load takes several minutes; the bulk load a few seconds. With -f the given
manifests are checked instead of the cloud (e.g. gen-manifest.py output, whose allocations
the bulk loader still writes through the API).

Then compares, over HTTP at microversion 1.39, with the same requests on both servers:

- GET /resource_providers (sorted by uuid, every field including generation);
- for --sample providers (a fixed pseudo-random choice plus the sharing pools):
  GET /resource_providers/{uuid} and its /inventories, /traits, /aggregates, /usages;
- GET /traits and GET /resource_classes;
- every query of benches/placement-vs-real.py's QUERIES on GET /allocation_candidates,
  with and without `limit=50`: the allocation_requests as a multiset and the
  provider_summaries, with list members (traits, mappings) compared as sets;
- the two SQLite databases, table by table and row by row in rowid order, all columns
  but created_at and updated_at.

Prints one line per check and `RESULT: equivalent` (exit 0) or the differences (exit 1).
Only the standard library is needed here; oracle.py finds Placement's venv itself.
"""
import argparse
import http.client
import importlib.util
import json
import os
import pathlib
import random
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MICROVERSION = "1.39"
HEADERS = {"X-Auth-Token": "admin", "Accept": "application/json",
           "OpenStack-API-Version": "placement " + MICROVERSION}

spec = importlib.util.spec_from_file_location(
    "api_vs_real", ROOT / "benches" / "placement-api-vs-real.py")
api_vs_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api_vs_real)
QUERIES = api_vs_real.vs_real.QUERIES


def serve(files, state_dir, through_api):
    cmd = [sys.executable, str(HERE / "oracle.py"), "serve", "--state-dir", state_dir]
    for f in files:
        cmd += ["-f", f]
    if through_api:
        cmd.append("--load-through-api")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, t0


def wait_url(proc, t0, label):
    line = proc.stdout.readline()
    if not line:
        sys.exit("%s: Placement did not start (see the oracle's messages above)" % label)
    host, port = line.strip().rsplit("http://", 1)[1].rstrip("/").split(":")
    print("%s: serving after %.1f s" % (label, time.perf_counter() - t0), flush=True)
    return host, int(port)


def get(addr, path):
    # wsgiref answers one request per connection.
    conn = http.client.HTTPConnection(*addr, timeout=3600)
    try:
        conn.request("GET", path, headers=HEADERS)
        r = conn.getresponse()
        body = json.loads(r.read() or b"null")
        if r.status != 200 and isinstance(body, dict):
            for e in body.get("errors", []):
                e.pop("request_id", None)  # differs on every request
        return r.status, body
    finally:
        conn.close()


def diff(a, b, path="", out=None, limit=20):
    """Paths where a and b differ (at most limit of them)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append("%s/%s: only on the %s side" % (path, k, "bulk" if k in a else "api"))
            else:
                diff(a[k], b[k], "%s/%s" % (path, k), out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out, limit)
    elif a != b:
        out.append("%s: bulk %s != api %s" % (path, json.dumps(a)[:200], json.dumps(b)[:200]))
    return out


def canonical_candidates(body):
    """allocation_requests as a sorted multiset; summaries with traits as sorted lists."""
    reqs = []
    for ar in body["allocation_requests"]:
        ar = dict(ar)
        if "mappings" in ar:
            ar["mappings"] = {k: sorted(v) for k, v in ar["mappings"].items()}
        reqs.append(json.dumps(ar, sort_keys=True))
    summaries = {}
    for u, s in body["provider_summaries"].items():
        s = dict(s)
        if "traits" in s:
            s["traits"] = sorted(s["traits"])
        summaries[u] = s
    return {"allocation_requests": sorted(reqs), "provider_summaries": summaries}


def sort_lists(body, *keys):
    body = dict(body)
    for k in keys:
        if k in body:
            body[k] = sorted(body[k], key=lambda x: json.dumps(x, sort_keys=True))
    return body


def compare_databases(bulk_db, api_db):
    """Row-by-row differences between the two databases, ignoring timestamps."""
    problems = []
    counts = {}
    a, b = sqlite3.connect(bulk_db), sqlite3.connect(api_db)
    tables = [r[0] for r in a.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    other = [r[0] for r in b.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    if tables != other:
        problems.append("tables differ: %s vs %s" % (tables, other))
    for t in tables:
        cols = [r[1] for r in a.execute("PRAGMA table_info(%s)" % t)
                if r[1] not in ("created_at", "updated_at")]
        sql = "SELECT %s FROM %s ORDER BY rowid" % (", ".join(cols), t)
        ra, rb = a.execute(sql).fetchall(), b.execute(sql).fetchall()
        counts[t] = len(ra)
        if ra != rb:
            first = next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), min(len(ra), len(rb)))
            problems.append("table %s: %d vs %d rows; first difference at row %d: %s vs %s"
                            % (t, len(ra), len(rb), first,
                               ra[first] if first < len(ra) else None,
                               rb[first] if first < len(rb) else None))
    return counts, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--bulk-state", help="state dir of the bulk-loaded database")
    ap.add_argument("--api-state", help="state dir of the API-loaded database")
    ap.add_argument("--sample", type=int, default=250, help="providers checked one by one")
    ap.add_argument("-f", "--file", action="append",
                    help="check these manifests instead of the generated cloud; repeatable")
    args = ap.parse_args()

    failures = []

    def report(label, problems):
        print("%s  %s" % ("ok  " if not problems else "DIFF", label), flush=True)
        for p in problems[:20]:
            print("      " + p)
        if problems:
            failures.append(label)

    with tempfile.TemporaryDirectory(prefix="bulk-check-") as tmp:
        files = ([os.path.abspath(f) for f in args.file] if args.file
                 else api_vs_real.write_cloud(args.trees, tmp))
        bulk_state = os.path.abspath(os.path.expanduser(args.bulk_state or os.path.join(tmp, "bulk")))
        api_state = os.path.abspath(os.path.expanduser(args.api_state or os.path.join(tmp, "api")))
        bulk, tb = serve(files, bulk_state, False)
        api, ta = serve(files, api_state, True)
        try:
            b_addr = wait_url(bulk, tb, "bulk loader")
            a_addr = wait_url(api, ta, "API loader")

            def both(path):
                sb, bb = get(b_addr, path)
                sa, ba = get(a_addr, path)
                problems = [] if sb == sa else ["status: bulk %d, api %d" % (sb, sa)]
                return bb, ba, problems

            bb, ba, problems = both("/resource_providers")
            rps_b = sorted(bb["resource_providers"], key=lambda r: r["uuid"])
            rps_a = sorted(ba["resource_providers"], key=lambda r: r["uuid"])
            problems += diff(rps_b, rps_a) if len(rps_b) == len(rps_a) else [
                "%d vs %d providers" % (len(rps_b), len(rps_a))]
            gens = sorted({r["generation"] for r in rps_a})
            report("GET /resource_providers: %d providers on each side (generations %s)"
                   % (len(rps_a), gens), problems)

            names = sorted(rps_a, key=lambda r: r["name"])
            pools = [r for r in names if r["name"].startswith("pool-")]
            rest = [r for r in names if not r["name"].startswith("pool-")]
            chosen = pools + random.Random(0).sample(rest, min(len(rest), max(args.sample - len(pools), 0)))
            problems = []
            for r in chosen:
                base = "/resource_providers/" + r["uuid"]
                for sub in ("", "/inventories", "/traits", "/aggregates", "/usages"):
                    bb, ba, p = both(base + sub)
                    problems += ["%s %s" % (r["name"], x)
                                 for x in p + diff(sort_lists(bb, "traits", "aggregates"),
                                                   sort_lists(ba, "traits", "aggregates"),
                                                   base + sub)]
            report("%d providers (%d pools, %d others) x GET itself, /inventories, /traits, "
                   "/aggregates, /usages" % (len(chosen), len(pools), len(chosen) - len(pools)),
                   problems)

            for path, key in (("/traits", "traits"), ("/resource_classes", "resource_classes")):
                bb, ba, problems = both(path)
                problems += diff(sort_lists(bb, key), sort_lists(ba, key), path)
                report("GET %s: %d entries" % (path, len(ba[key])), problems)

            for name, q in QUERIES:
                for label, query in ((name, q), (name + ", limit=50", q + "&limit=50")):
                    bb, ba, problems = both("/allocation_candidates?" + query)
                    if problems or not isinstance(ba, dict) or "allocation_requests" not in ba:
                        report("query %s: %s" % (label, json.dumps(ba)[:100]),
                               problems + diff(bb, ba))
                        continue
                    problems += diff(canonical_candidates(bb), canonical_candidates(ba))
                    report("query %s: %d allocation requests, %d provider summaries; same order: %s"
                           % (label, len(ba["allocation_requests"]), len(ba["provider_summaries"]),
                              "yes" if bb == ba else "no"), problems)

            counts, problems = compare_databases(os.path.join(bulk_state, "placement.sqlite"),
                                                 os.path.join(api_state, "placement.sqlite"))
            report("databases row by row (timestamps aside): %s"
                   % ", ".join("%s %d" % kv for kv in sorted(counts.items())), problems)
        finally:
            for proc in (bulk, api):
                proc.terminate()
            for proc in (bulk, api):
                proc.wait(timeout=120)
    print("RESULT: %s" % ("equivalent" if not failures else "DIFFERENT: " + "; ".join(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
