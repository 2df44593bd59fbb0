#!/usr/bin/env python3
"""A real-Placement oracle for kubeplace.

Starts OpenStack Placement (openstack-placement 16.x) on a throw-away sqlite
database, loads kubeplace manifests (ResourceProvider and Allocation objects)
into it through Placement's REST API, and then either keeps serving it or runs
GET queries against it and prints one JSON line per query.

    oracle.py serve -f MANIFEST... [--port P] [--keep | --state-dir DIR]
    oracle.py query -f MANIFEST... --query 'resources=VCPU:1&required=!CUSTOM_X' \
        [--query ...] [--queries-file FILE] [--microversion 1.39] \
        [--path allocation_candidates|resource_providers] [--time --repeat N] \
        [--state-dir DIR]

With --state-dir the database is kept in DIR together with the sha256 of each
manifest it was loaded from; a later run with byte-identical manifests (and the
same Placement version) reuses it and skips db sync and loading.

It needs a Python with openstack-placement installed (PyYAML comes with it).
When the running interpreter lacks it, the script re-executes itself with
$PLACEMENT_VENV/bin/python (default /root/scratch/venv). It always re-executes
itself with PYTHONHASHSEED=0, because which candidates `limit` keeps follows
Python's set order. See README.md next to this file.
"""

import argparse
import collections
import fcntl
import hashlib
import http.client
import importlib.util
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from importlib import metadata

DEFAULT_VENV = os.environ.get("PLACEMENT_VENV", "/root/scratch/venv")
DEFAULT_MICROVERSION = "1.39"
MAX_INT = 2147483647
# Allocations are written at this microversion: consumer_generation null is
# accepted (1.28+) and consumer_type is not yet required (1.38+ requires it).
ALLOCATION_MICROVERSION = "1.28"
PROJECT_ID = "00000000-0000-4000-8000-00000000face"
USER_ID = "00000000-0000-4000-8000-00000000beef"

PROVIDER_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "resourceproviders.kubeplace.io")

INVENTORY_FIELDS = {
    "total": "total",
    "reserved": "reserved",
    "minUnit": "min_unit",
    "maxUnit": "max_unit",
    "stepSize": "step_size",
    "allocationRatio": "allocation_ratio",
}
# Used while allocations are written, so that kubeplace's over-capacity usage
# (and amounts that break min_unit/max_unit/step_size) can be loaded.
PERMISSIVE_INVENTORY = {"total": MAX_INT, "reserved": 0, "min_unit": 1,
                        "max_unit": MAX_INT, "step_size": 1,
                        "allocation_ratio": 1.0}


def log(msg):
    print("oracle: " + msg, file=sys.stderr, flush=True)


class OracleError(Exception):
    pass


# --------------------------------------------------------------------------
# Bootstrap: the right interpreter and PYTHONHASHSEED=0


def bootstrap():
    python = sys.executable
    reexec = False
    if importlib.util.find_spec("placement") is None:
        candidate = os.path.join(DEFAULT_VENV, "bin", "python")
        if not os.path.exists(candidate):
            sys.exit("oracle: openstack-placement is not importable and %s does not exist; "
                     "set PLACEMENT_VENV to a virtualenv with 'openstack-placement>=16,<17'"
                     % candidate)
        if os.environ.get("_ORACLE_REEXEC") == "venv":
            sys.exit("oracle: %s cannot import placement" % candidate)
        python = candidate
        reexec = True
    if os.environ.get("PYTHONHASHSEED") != "0":
        reexec = True
    if reexec:
        env = dict(os.environ, PYTHONHASHSEED="0", _ORACLE_REEXEC="venv")
        os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


# --------------------------------------------------------------------------
# Manifests


def provider_uuid(name, spec):
    u = spec.get("uuid")
    if u:
        return str(u)
    return str(uuid.uuid5(PROVIDER_NAMESPACE, name))


class Model:
    def __init__(self):
        self.providers = {}          # name -> dict(uuid, parent, inventories, traits, aggregates)
        self.allocations = []        # (source, consumer, [(provider name, {class: amount})])
        self.ignored = collections.Counter()

    def add_document(self, doc, source):
        if doc is None:
            return
        if not isinstance(doc, dict):
            raise OracleError("%s: a document is not a mapping" % source)
        kind = doc.get("kind")
        if kind == "List" or (kind and kind.endswith("List") and "items" in doc):
            for item in doc.get("items") or []:
                self.add_document(item, source)
            return
        name = (doc.get("metadata") or {}).get("name")
        spec = doc.get("spec") or {}
        if kind == "ResourceProvider":
            if not name:
                raise OracleError("%s: a ResourceProvider without metadata.name" % source)
            if name in self.providers:
                raise OracleError("%s: ResourceProvider %r is defined twice" % (source, name))
            inventories = {}
            for rc, inv in (spec.get("inventories") or {}).items():
                rec = {}
                for k, v in (inv or {}).items():
                    if k not in INVENTORY_FIELDS:
                        raise OracleError("%s: provider %r inventory %s: unknown field %r"
                                          % (source, name, rc, k))
                    rec[INVENTORY_FIELDS[k]] = v
                inventories[rc] = rec
            self.providers[name] = {
                "name": name,
                "uuid": provider_uuid(name, spec),
                "parent": spec.get("parent") or None,
                "inventories": inventories,
                "traits": list(spec.get("traits") or []),
                "aggregates": list(spec.get("aggregates") or []),
            }
        elif kind == "Allocation":
            consumer = spec.get("consumer")
            if not consumer:
                raise OracleError("%s: Allocation %r without spec.consumer" % (source, name))
            items = []
            for entry in spec.get("allocations") or []:
                items.append((entry["provider"], dict(entry.get("resources") or {})))
            self.allocations.append((name or "?", str(consumer), items))
        else:
            self.ignored[kind or "<no kind>"] += 1

    def ordered_providers(self):
        """Parents before children; roots and siblings by name."""
        children = collections.defaultdict(list)
        roots = []
        for name, p in self.providers.items():
            if p["parent"] is None:
                roots.append(name)
            elif p["parent"] not in self.providers:
                raise OracleError("provider %r: parent %r does not exist" % (name, p["parent"]))
            else:
                children[p["parent"]].append(name)
        out = []
        queue = collections.deque(sorted(roots))
        while queue:
            n = queue.popleft()
            out.append(self.providers[n])
            queue.extend(sorted(children[n]))
        if len(out) != len(self.providers):
            stuck = sorted(set(self.providers) - {p["name"] for p in out})
            raise OracleError("providers in a parent cycle: %s" % ", ".join(stuck))
        return out


def load_manifests(paths):
    import yaml
    # libyaml's safe loader when PyYAML has it: the same documents, several times faster
    # (a 13 MB manifest takes minutes with the pure-Python one).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    model = Model()
    for path in paths:
        with open(path) as f:
            for doc in yaml.load_all(f, Loader=loader):
                model.add_document(doc, path)
    return model


# --------------------------------------------------------------------------
# Placement: config, db sync, server


def write_config(tmp, debug=False):
    conf = os.path.join(tmp, "placement.conf")
    # noauth2's admin token has no `service` role, which Placement's default policy asks
    # for POST /reshaper; the token kubeplace's serve accepts may do everything.
    policy = os.path.join(tmp, "policy.yaml")
    with open(policy, "w") as f:
        f.write('"placement:reshaper:reshape": "role:admin"\n')
    with open(conf, "w") as f:
        f.write("[DEFAULT]\n"
                "debug = %s\n"
                "log_file = %s\n"
                "[api]\n"
                "auth_strategy = noauth2\n"
                "[placement_database]\n"
                "connection = sqlite:///%s\n"
                "sqlite_synchronous = False\n"
                "[placement]\n"
                "randomize_allocation_candidates = False\n"
                "[oslo_policy]\n"
                "policy_file = %s\n"
                % ("True" if debug else "False",
                   os.path.join(tmp, "placement.log"),
                   os.path.join(tmp, "placement.sqlite"),
                   policy))
    return conf


def db_sync(tmp, conf):
    manage = os.path.join(os.path.dirname(sys.executable), "placement-manage")
    if not os.path.exists(manage):
        manage = shutil.which("placement-manage")
    if not manage:
        raise OracleError("placement-manage not found next to %s" % sys.executable)
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=tmp, PYTHONHASHSEED="0")
    r = subprocess.run([manage, "--config-file", conf, "db", "sync"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise OracleError("placement-manage db sync failed:\n" + r.stdout)


def load_app(tmp):
    os.environ["OS_PLACEMENT_CONFIG_DIR"] = tmp
    from placement.wsgi import api  # initialises the app from OS_PLACEMENT_CONFIG_DIR
    return api.application


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app, port):
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    class Server(WSGIServer):
        allow_reuse_address = True

    httpd = make_server("127.0.0.1", port, app, server_class=Server, handler_class=QuietHandler)
    t = threading.Thread(target=httpd.serve_forever, name="placement", daemon=True)
    t.start()
    return httpd


# --------------------------------------------------------------------------
# Clients


def quote_target(path, query):
    # Keep what the caller wrote (already-encoded %XX stays as it is); encode only
    # what cannot go on an HTTP request line, such as spaces.
    safe = "&=:,!/;+%?@$'()*[]~-._"
    target = urllib.parse.quote(path, safe="/")
    if query:
        target += "?" + urllib.parse.quote(query, safe=safe)
    return target


class HttpClient:
    def __init__(self, base):
        self.base = base
        u = urllib.parse.urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.requests = 0

    def request(self, method, path, body=None, microversion=DEFAULT_MICROVERSION, query=""):
        headers = {"X-Auth-Token": "admin", "Accept": "application/json",
                   "OpenStack-API-Version": "placement " + microversion}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port)
        try:
            conn.request(method, quote_target(path, query), body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        self.requests += 1
        return resp.status, raw


class WsgiClient:
    """Calls the WSGI application directly (no socket)."""

    def __init__(self, app):
        self.app = app
        self.requests = 0

    def request(self, method, path, body=None, microversion=DEFAULT_MICROVERSION, query=""):
        data = b"" if body is None else json.dumps(body).encode()
        target = quote_target(path, query)
        p, _, q = target.partition("?")
        environ = {
            "REQUEST_METHOD": method, "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote(p, encoding="latin-1"),
            "QUERY_STRING": q, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_X_AUTH_TOKEN": "admin", "HTTP_ACCEPT": "application/json",
            "HTTP_OPENSTACK_API_VERSION": "placement " + microversion,
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(data), "wsgi.errors": sys.stderr,
            "wsgi.multithread": False, "wsgi.multiprocess": False, "wsgi.run_once": False,
        }
        if body is not None:
            environ["CONTENT_TYPE"] = "application/json"
        status = []

        def start_response(s, headers, exc_info=None):
            status.append(int(s.split(" ", 1)[0]))

        chunks = self.app(environ, start_response)
        try:
            raw = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        self.requests += 1
        return status[0], raw


def call(client, method, path, body=None, microversion=DEFAULT_MICROVERSION, ok=(200, 201, 204)):
    status, raw = client.request(method, path, body, microversion)
    if status not in ok:
        raise OracleError("%s %s -> %d %s\n  request body: %s"
                          % (method, path, status, raw.decode(errors="replace").strip(),
                             json.dumps(body)))
    return json.loads(raw) if raw else None


# --------------------------------------------------------------------------
# Loading


class CachedSchemaCheck:
    """While loading, make jsonschema.validate check each (constant) schema once.

    Placement validates every request body with jsonschema.validate(), which
    re-checks the schema against the metaschema on every call: about a third of
    the load time. Instances are validated exactly as before. The patch is
    removed before queries run, so query timings are stock Placement.
    """

    def __enter__(self):
        import jsonschema
        from jsonschema import exceptions, validators
        self.module = jsonschema
        self.orig = jsonschema.validate
        checked = {}

        def validate(instance, schema, cls=None, *args, **kwargs):
            if cls is None:
                cls = validators.validator_for(schema)
            if checked.get(id(schema)) is not schema:
                cls.check_schema(schema)
                checked[id(schema)] = schema  # keeps schema alive: ids are not reused
            error = exceptions.best_match(cls(schema, *args, **kwargs).iter_errors(instance))
            if error is not None:
                raise error

        jsonschema.validate = validate
        return self

    def __exit__(self, *exc):
        self.module.validate = self.orig


def load_into_placement(client, model, progress_every=0):
    import os_resource_classes
    import os_traits

    providers = model.ordered_providers()
    by_name = {p["name"]: p for p in providers}
    standard_rcs = set(os_resource_classes.STANDARDS)
    standard_traits = set(os_traits.get_traits())

    # Allocations: merged per consumer (Placement keeps one allocation set per
    # consumer); entries Placement cannot hold are reported and dropped.
    consumers = collections.OrderedDict()
    for source, consumer, items in model.allocations:
        merged = consumers.setdefault(consumer, collections.OrderedDict())
        for pname, resources in items:
            p = by_name.get(pname)
            if p is None:
                log("allocation %s: provider %r does not exist; entry skipped" % (source, pname))
                continue
            for rc, amount in resources.items():
                if rc not in p["inventories"]:
                    log("allocation %s: provider %r has no %s inventory; skipped"
                        % (source, pname, rc))
                    continue
                if amount is None or int(amount) < 1:
                    log("allocation %s: %s amount %r on %r is not positive; skipped"
                        % (source, rc, amount, pname))
                    continue
                res = merged.setdefault(p["uuid"], {})
                res[rc] = res.get(rc, 0) + int(amount)
    allocated = {u for m in consumers.values() for u in m}

    # 1. Resource classes and traits.
    classes = set()
    for p in providers:
        classes.update(p["inventories"])
    for rc in sorted(classes - standard_rcs):
        if not rc.startswith("CUSTOM_"):
            raise OracleError("resource class %r is neither standard nor CUSTOM_" % rc)
        call(client, "PUT", "/resource_classes/" + rc)
    traits = {t for p in providers for t in p["traits"]}
    for t in sorted(traits - standard_traits):
        if not t.startswith("CUSTOM_"):
            raise OracleError("trait %r is neither a standard os-traits trait nor CUSTOM_" % t)
        call(client, "PUT", "/traits/" + t)

    # 2. Providers, parents first, with inventories, traits and aggregates.
    gens = {}
    t0 = time.perf_counter()
    for i, p in enumerate(providers, 1):
        if progress_every and i % progress_every == 0:
            dt = time.perf_counter() - t0
            log("%d/%d providers in %.0f s (about %.0f s to go)"
                % (i, len(providers), dt, dt / i * (len(providers) - i)))
        body = {"name": p["name"], "uuid": p["uuid"]}
        if p["parent"]:
            body["parent_provider_uuid"] = by_name[p["parent"]]["uuid"]
        r = call(client, "POST", "/resource_providers", body)
        u = p["uuid"]
        gens[u] = r["generation"]
        if p["inventories"]:
            if u in allocated:
                invs = {rc: dict(PERMISSIVE_INVENTORY) for rc in p["inventories"]}
            else:
                invs = p["inventories"]
            r = call(client, "PUT", "/resource_providers/%s/inventories" % u,
                     {"resource_provider_generation": gens[u], "inventories": invs})
            gens[u] = r["resource_provider_generation"]
        if p["traits"]:
            r = call(client, "PUT", "/resource_providers/%s/traits" % u,
                     {"resource_provider_generation": gens[u], "traits": p["traits"]})
            gens[u] = r["resource_provider_generation"]
        if p["aggregates"]:
            r = call(client, "PUT", "/resource_providers/%s/aggregates" % u,
                     {"resource_provider_generation": gens[u], "aggregates": p["aggregates"]})
            gens[u] = r["resource_provider_generation"]

    # 3. Allocations in one POST /allocations, on permissive inventories.
    if consumers:
        body = {}
        for consumer, merged in consumers.items():
            allocs = {u: {"resources": res} for u, res in merged.items() if res}
            body[consumer] = {"allocations": allocs, "project_id": PROJECT_ID,
                              "user_id": USER_ID, "consumer_generation": None}
        call(client, "POST", "/allocations", body, microversion=ALLOCATION_MICROVERSION)
        # 4. The real inventories; Placement accepts capacity below usage here
        # (it only logs "Resource provider ... is now over-capacity").
        for p in providers:
            u = p["uuid"]
            if u in allocated:
                # Writing allocations bumped the generation by one; ask on a conflict.
                body = {"resource_provider_generation": gens[u] + 1,
                        "inventories": p["inventories"]}
                status, raw = client.request(
                    "PUT", "/resource_providers/%s/inventories" % u, body, DEFAULT_MICROVERSION)
                if status == 409:
                    body["resource_provider_generation"] = call(
                        client, "GET", "/resource_providers/%s" % u)["generation"]
                    call(client, "PUT", "/resource_providers/%s/inventories" % u, body)
                elif status != 200:
                    raise OracleError("PUT /resource_providers/%s/inventories -> %d %s"
                                      % (u, status, raw.decode(errors="replace")))
    return len(providers), len(consumers)


# --------------------------------------------------------------------------
# Commands


STATE_FILE = "loaded.json"


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Oracle:
    def __init__(self, args):
        self.args = args
        self.httpd = None
        self.lock = None
        self.state_dir = getattr(args, "state_dir", None)
        self.reused = None   # the state record when an existing database is reused
        if self.state_dir:
            self.tmp = os.path.abspath(self.state_dir)
            os.makedirs(self.tmp, exist_ok=True)
            self.lock = open(os.path.join(self.tmp, "lock"), "w")
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise OracleError("state dir %s is in use by another oracle" % self.tmp)
        else:
            self.tmp = tempfile.mkdtemp(prefix="placement-oracle-", dir=args.tmpdir)

    def close(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        if self.state_dir:
            log("state kept in %s" % self.tmp)
            self.lock.close()
        elif self.args.keep:
            log("kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def state_key(self):
        """What a kept database must have been loaded from to be reused."""
        return {"manifests": [{"file": os.path.basename(f), "sha256": file_sha256(f)}
                              for f in self.args.file],
                "placement": metadata.version("openstack-placement")}

    def check_state(self):
        """With --state-dir: reuse the database when it was loaded from the same
        manifests, else remove it (and its record) so that it is loaded again."""
        self.key = self.state_key()
        record_path = os.path.join(self.tmp, STATE_FILE)
        db = os.path.join(self.tmp, "placement.sqlite")
        record = None
        if os.path.exists(record_path):
            with open(record_path) as f:
                record = json.load(f)
        if record is not None and os.path.exists(db):
            if ([m["sha256"] for m in record["manifests"]] == [m["sha256"] for m in self.key["manifests"]]
                    and record["placement"] == self.key["placement"]):
                self.reused = record
                log("reusing the database in %s (loaded %s: %d providers, %d consumers in %.0f s)"
                    % (self.tmp, record["loaded_at"], record["providers"], record["consumers"],
                       record["seconds"]))
                return
            log("the database in %s was loaded from other manifests or another Placement; "
                "loading again" % self.tmp)
        for name in (STATE_FILE, "placement.sqlite", "placement.log"):
            try:
                os.remove(os.path.join(self.tmp, name))
            except FileNotFoundError:
                pass

    def save_state(self):
        record = dict(self.key, loaded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      **{k: v for k, v in self.load_stats.items() if k != "uuids"})
        path = os.path.join(self.tmp, STATE_FILE)
        with open(path + ".new", "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        os.replace(path + ".new", path)

    def start(self, serve_http):
        t0 = time.perf_counter()
        if self.state_dir:
            self.check_state()
        conf = write_config(self.tmp, self.args.debug)
        if self.reused is None:
            db_sync(self.tmp, conf)
        app = load_app(self.tmp)
        t1 = time.perf_counter()
        log("placement ready in %.2f s (config dir %s)" % (t1 - t0, self.tmp))
        self.base = None
        if serve_http:
            port = self.args.port or free_port()
            self.httpd = start_server(app, port)
            self.base = "http://127.0.0.1:%d" % port
        if self.args.transport == "wsgi":
            self.client = WsgiClient(app)
        else:
            if self.httpd is None:
                port = self.args.port or free_port()
                self.httpd = start_server(app, port)
                self.base = "http://127.0.0.1:%d" % port
            self.client = HttpClient(self.base)

    def load(self, want_uuids=True):
        if self.reused is not None:
            # The database already holds these manifests; read them only for the uuids.
            self.load_stats = {k: self.reused[k] for k in
                               ("providers", "consumers", "seconds", "cpu_seconds", "requests")}
            if want_uuids:
                model = load_manifests(self.args.file)
                self.load_stats["uuids"] = {p["name"]: p["uuid"] for p in model.providers.values()}
            self.load_stats["reused"] = True
            return
        model = load_manifests(self.args.file)
        for kind, n in sorted(model.ignored.items()):
            log("ignored %d %s document(s)" % (n, kind))
        t0, c0 = time.perf_counter(), time.process_time()
        every = 2000 if len(model.providers) >= 10000 else 0
        if self.args.stock_load:
            nprov, ncons = load_into_placement(self.client, model, every)
        else:
            with CachedSchemaCheck():
                nprov, ncons = load_into_placement(self.client, model, every)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        log("loaded %d providers and %d consumers in %.2f s (%.2f s CPU) with %d requests "
            "(%.1f ms/provider, %.1f ms/request, transport %s)"
            % (nprov, ncons, dt, cpu, self.client.requests,
               1000 * dt / max(nprov, 1), 1000 * dt / max(self.client.requests, 1),
               self.args.transport))
        self.load_stats = {"providers": nprov, "consumers": ncons, "seconds": round(dt, 3),
                           "cpu_seconds": round(cpu, 3),
                           "requests": self.client.requests,
                           "uuids": {p["name"]: p["uuid"] for p in model.providers.values()}}
        if self.state_dir:
            self.save_state()


def read_queries(args):
    out = []
    for q in args.query or []:
        out.append({"query": q})
    for path in args.queries_file or []:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("{"):
                    out.append(json.loads(line))
                else:
                    out.append({"query": line})
    for q in out:
        q["query"] = q["query"].lstrip("?")
        q.setdefault("microversion", args.microversion)
        q.setdefault("path", args.path)
    return out


def cmd_query(args):
    oracle = Oracle(args)
    try:
        oracle.start(serve_http=False)
        oracle.load(want_uuids=args.load_stats)
        if args.load_stats:
            print(json.dumps({"load": oracle.load_stats}), flush=True)
        for q in read_queries(args):
            path = "/" + q["path"].strip("/")
            status, raw = oracle.client.request("GET", path, None, q["microversion"],
                                                query=q["query"])
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            rec = {"query": q["query"], "microversion": q["microversion"]}
            if q["path"] != "allocation_candidates":
                rec["path"] = q["path"]
            rec["status"] = status
            rec["body"] = body
            if args.time:
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    oracle.client.request("GET", path, None, q["microversion"], query=q["query"])
                    times.append((time.perf_counter() - t0) * 1000)
                rec["ms"] = round(statistics.median(times), 3)
                rec["ms_min"] = round(min(times), 3)
                rec["runs"] = args.repeat
            print(json.dumps(rec, sort_keys=args.sort_keys), flush=True)
    finally:
        oracle.close()


def cmd_serve(args):
    oracle = Oracle(args)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        oracle.start(serve_http=True)
        oracle.load(want_uuids=False)
        print(oracle.base, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        oracle.close()


OVER_CAPACITY_DOC = """
apiVersion: kubeplace.io/v1alpha1
kind: Allocation
metadata:
  name: selftest-over-capacity
spec:
  consumer: 44444444-0000-4000-8000-0000000000ff
  allocations:
  - provider: cn-plain
    resources: {CUSTOM_FPGA: 3}
"""


def cmd_selftest(args):
    here = os.path.dirname(os.path.abspath(__file__))
    oracle = Oracle(args)
    extra = os.path.join(oracle.tmp, "over-capacity.yaml")
    with open(extra, "w") as f:
        f.write(OVER_CAPACITY_DOC)
    args.file = [os.path.join(here, "sample.yaml"), extra]
    failures = []
    try:
        oracle.start(serve_http=False)
        oracle.load()
        uuids = oracle.load_stats["uuids"]
        names = {u: n for n, u in uuids.items()}

        def q(query, mv=DEFAULT_MICROVERSION):
            status, raw = oracle.client.request("GET", "/allocation_candidates", None, mv,
                                                query=query)
            return status, json.loads(raw)

        def cands(body):
            # each candidate as a sorted tuple of (provider name, class, amount)
            return sorted(tuple(sorted((names[u], rc, n) for u, a in ar["allocations"].items()
                                       for rc, n in a["resources"].items()))
                          for ar in body["allocation_requests"])

        def check(label, cond, detail=""):
            print("%s  %s%s" % ("ok  " if cond else "FAIL", label, ("  " + detail) if not cond else ""), flush=True)
            if not cond:
                failures.append(label)

        check("derived uuid of cn-plain is uuid5(uuid5(NAMESPACE_DNS, "
              "'resourceproviders.kubeplace.io'), 'cn-plain')",
              uuids["cn-plain"] == "43befae5-9717-55ca-9a82-898cc7e01a2b", uuids["cn-plain"])
        st, b = q("resources=VCPU:1")
        numas = ["cn-gold-numa0", "cn-gold-numa1", "cn-plain-numa0", "cn-plain-numa1"]
        check("VCPU:1 -> one candidate per NUMA cell",
              st == 200 and cands(b) == [((n, "VCPU", 1),) for n in numas], str(cands(b)))
        ps = b["provider_summaries"]
        check("1.39 summaries: resources/traits/parent/root; every provider of the used trees",
              set(ps) == {uuids[n] for n in ["cn-gold", "cn-plain"] + numas}
              and all(set(v) == {"resources", "traits", "parent_provider_uuid",
                                 "root_provider_uuid"} for v in ps.values()),
              json.dumps(ps)[:300])
        check("1.39 mappings: {'': [provider]}",
              all(list(ar["mappings"]) == [""] for ar in b["allocation_requests"]))
        check("over-capacity usage loaded (3 > capacity 2 and > max_unit 1): cn-plain CUSTOM_FPGA",
              ps[uuids["cn-plain"]]["resources"]["CUSTOM_FPGA"] == {"capacity": 2, "used": 3},
              str(ps[uuids["cn-plain"]]["resources"]))
        check("real inventory restored after loading: cn-gold-numa0 MEMORY_MB capacity 15872 used 2048",
              ps[uuids["cn-gold-numa0"]]["resources"]["MEMORY_MB"] == {"capacity": 15872, "used": 2048},
              str(ps[uuids["cn-gold-numa0"]]["resources"]))
        st, b = q("resources=CUSTOM_FPGA:1")
        check("an over-capacity inventory offers nothing", st == 200 and cands(b) == [],
              str(cands(b)))
        st, b = q("resources=VCPU:1&required=CUSTOM_GOLD")
        check("required=CUSTOM_GOLD: no candidate (the gold root supplies nothing)",
              st == 200 and cands(b) == [], str(cands(b)))
        st, b = q("resources=VCPU:1&required=!CUSTOM_GOLD")
        check("required=!CUSTOM_GOLD: gold tree kept (trait on a root that supplies nothing)",
              st == 200 and len(cands(b)) == 4, str(cands(b)))
        st, b = q("resources=VCPU:1&root_required=!CUSTOM_GOLD")
        check("root_required=!CUSTOM_GOLD excludes the gold tree",
              st == 200 and cands(b) == [(("cn-plain-numa0", "VCPU", 1),),
                                         (("cn-plain-numa1", "VCPU", 1),)], str(cands(b)))
        st, b = q("resources=VCPU:1&required=!HW_NUMA_ROOT")
        check("required=!HW_NUMA_ROOT excludes the gold NUMA cells (they supply VCPU)",
              st == 200 and all(c[0][0].startswith("cn-plain") for c in cands(b))
              and len(cands(b)) == 2, str(cands(b)))
        st, b = q("resources=DISK_GB:10")
        check("DISK_GB:10 -> the sharing provider alone, and cn-plain's own disk",
              st == 200 and cands(b) == [(("cn-plain", "DISK_GB", 10),),
                                         (("shared-disk", "DISK_GB", 10),)], str(cands(b)))
        st, b = q("resources=VCPU:1,DISK_GB:10&required=!STORAGE_DISK_SSD")
        check("forbidden trait of the sharing provider leaves cn-plain's local disk",
              st == 200 and cands(b) == [(("cn-plain", "DISK_GB", 10), ("cn-plain-numa0", "VCPU", 1)),
                                         (("cn-plain", "DISK_GB", 10), ("cn-plain-numa1", "VCPU", 1))],
              str(cands(b)))
        st, b = q("resources=VCPU:1,DISK_GB:10")
        check("VCPU+DISK_GB: gold cells with the share, plain cells with the share or local disk",
              st == 200 and len(cands(b)) == 6, str(cands(b)))
        st, b = q("resources=VCPU:1&limit=1")
        roots = {v["root_provider_uuid"] for v in b["provider_summaries"].values()}
        check("limit=1 keeps one candidate and the summaries of its tree only",
              st == 200 and len(b["allocation_requests"]) == 1 and len(roots) == 1)
        st, b = q("resources=VCPU:1&required=CUSTOM_GOLD,!CUSTOM_GOLD")
        check("required=T,!T -> 400 conflict",
              st == 400 and "Conflicting required and forbidden traits" in b["errors"][0]["detail"],
              json.dumps(b))
        st, b = q("resources1=VCPU:1&resources2=MEMORY_MB:256")
        check("two granular groups without group_policy -> 400",
              st == 400 and "group_policy" in b["errors"][0]["detail"], json.dumps(b))
        st, b = q("resources=VCPU:1&required=!CUSTOM_GOLD", "1.21")
        check("'!' before 1.22 -> 400", st == 400, json.dumps(b))
        st, b = q("resources=VCPU:1,MEMORY_MB:256", "1.28")
        ps = b["provider_summaries"]
        check("1.28: summaries without parent/root uuids",
              st == 200 and all(set(v) == {"resources", "traits"} for v in ps.values())
              and all("mappings" not in ar for ar in b["allocation_requests"]))
    finally:
        oracle.close()
    print("selftest: %s" % ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    sys.exit(1 if failures else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, files=True):
        if files:
            p.add_argument("-f", "--file", action="append", required=True,
                           help="a kubeplace manifest (multi-document YAML); repeatable")
        p.add_argument("--transport", choices=["http", "wsgi"], default="http",
                       help="http: a wsgiref server on 127.0.0.1 (default); wsgi: call the "
                            "WSGI application in-process, no socket (query only)")
        p.add_argument("--port", type=int, default=0, help="port for the server (default: a free one)")
        p.add_argument("--tmpdir", default=None,
                       help="where to create the config/sqlite dir (default: $TMPDIR or /tmp)")
        p.add_argument("--keep", action="store_true", help="keep the config dir, sqlite db and log")
        if files:
            p.add_argument("--state-dir", default=None,
                           help="keep the config, sqlite db and log in this directory with the "
                                "sha256 of each manifest; when it already holds a database "
                                "loaded from byte-identical manifests, skip db sync and loading")
        p.add_argument("--debug", action="store_true", help="debug logging in placement.log")
        p.add_argument("--stock-load", action="store_true",
                       help="load without the jsonschema schema-check cache (slower, same result)")

    ps = sub.add_parser("serve", help="load, print the base URL, serve until killed")
    common(ps)
    ps.set_defaults(func=cmd_serve)

    pq = sub.add_parser("query", help="load once, run GET queries, one JSON line each")
    common(pq)
    pq.add_argument("--query", "-q", action="append",
                    help="a query string such as 'resources=VCPU:1&required=!CUSTOM_X'; repeatable")
    pq.add_argument("--queries-file", action="append",
                    help="one query per line; or a JSON object per line with query and "
                         "optionally microversion and path; # comments")
    pq.add_argument("--microversion", default=DEFAULT_MICROVERSION)
    pq.add_argument("--path", default="allocation_candidates",
                    choices=["allocation_candidates", "resource_providers"])
    pq.add_argument("--time", action="store_true",
                    help="add ms (median wall time of --repeat runs), ms_min and runs")
    pq.add_argument("--repeat", type=int, default=5)
    pq.add_argument("--sort-keys", action="store_true", help="sort JSON keys in the output")
    pq.add_argument("--load-stats", action="store_true",
                    help="print a first JSON line {\"load\": {...}}: providers, consumers, seconds, "
                         "requests and uuids (name -> uuid)")
    pq.set_defaults(func=cmd_query)

    pt = sub.add_parser("selftest", help="load sample.yaml (plus an over-capacity allocation) "
                                         "and check a handful of answers")
    common(pt, files=False)
    pt.set_defaults(func=cmd_selftest)

    args = ap.parse_args()
    if args.cmd == "serve" and args.transport == "wsgi":
        ap.error("serve needs --transport http")
    try:
        args.func(args)
    except OracleError as e:
        log("error: %s" % e)
        sys.exit(2)


if __name__ == "__main__":
    bootstrap()
    main()
