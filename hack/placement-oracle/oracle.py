#!/usr/bin/env python3
"""A real-Placement oracle for kubeplace.

Starts OpenStack Placement (openstack-placement 16.x) on a throw-away sqlite
database, loads kubeplace manifests (ResourceProvider and Allocation objects)
into it, and then either keeps serving it or runs GET queries against it and
prints one JSON line per query.

    oracle.py serve -f MANIFEST... [--port P] [--keep | --state-dir DIR]
    oracle.py query -f MANIFEST... --query 'resources=VCPU:1&required=!CUSTOM_X' \
        [--query ...] [--queries-file FILE] [--microversion 1.39] \
        [--path allocation_candidates|resource_providers] [--time --repeat N] \
        [--state-dir DIR]

Loading. By default (the bulk loader) providers, their inventories, traits and
aggregates, and custom resource classes and traits are written straight into
Placement's database in one transaction, with Placement's own table definitions
(placement.db.sqlalchemy.models) and after Placement has synced its standard
classes and traits: the rows, ids and generations are those the API loader
leaves, and each body is first validated with the JSON schema of the handler
that would have received it. Allocations, if any, are then written through the
API (POST /allocations, then the real inventories). 45,000 providers take under
a minute this way instead of hours. --load-through-api sends everything through
the REST API instead, one provider at a time (tens of ms per provider, slower as
the database grows). hack/placement-oracle/bulk-check.py compares the two.

With --state-dir the database is kept in DIR together with the sha256 of each
manifest it was loaded from and the loader that wrote it; a later run with
byte-identical manifests, the same Placement version and the same loader reuses
it and skips db sync and loading.

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


class LoadPlan:
    """What a manifest set asks Placement to hold, checked the same way for both loaders."""

    def __init__(self, model):
        import os_resource_classes
        import os_traits

        self.providers = model.ordered_providers()
        self.by_name = {p["name"]: p for p in self.providers}
        standard_rcs = set(os_resource_classes.STANDARDS)
        standard_traits = set(os_traits.get_traits())

        # Allocations: merged per consumer (Placement keeps one allocation set per
        # consumer); entries Placement cannot hold are reported and dropped.
        self.consumers = collections.OrderedDict()
        for source, consumer, items in model.allocations:
            merged = self.consumers.setdefault(consumer, collections.OrderedDict())
            for pname, resources in items:
                p = self.by_name.get(pname)
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
        self.allocated = {u for m in self.consumers.values() for u in m}

        classes = set()
        for p in self.providers:
            classes.update(p["inventories"])
        self.custom_classes = sorted(classes - standard_rcs)
        for rc in self.custom_classes:
            if not rc.startswith("CUSTOM_"):
                raise OracleError("resource class %r is neither standard nor CUSTOM_" % rc)
        traits = {t for p in self.providers for t in p["traits"]}
        self.custom_traits = sorted(traits - standard_traits)
        for t in self.custom_traits:
            if not t.startswith("CUSTOM_"):
                raise OracleError("trait %r is neither a standard os-traits trait nor CUSTOM_" % t)

    def inventories_to_write(self, p):
        """A provider's first inventory PUT: permissive while allocations are written."""
        if p["uuid"] in self.allocated:
            return {rc: dict(PERMISSIVE_INVENTORY) for rc in p["inventories"]}
        return p["inventories"]


def load_into_placement(client, model, progress_every=0):
    """Everything through Placement's REST API, one provider at a time."""
    plan = LoadPlan(model)
    providers, by_name = plan.providers, plan.by_name

    # 1. Resource classes and traits.
    for rc in plan.custom_classes:
        call(client, "PUT", "/resource_classes/" + rc)
    for t in plan.custom_traits:
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
            r = call(client, "PUT", "/resource_providers/%s/inventories" % u,
                     {"resource_provider_generation": gens[u],
                      "inventories": plan.inventories_to_write(p)})
            gens[u] = r["resource_provider_generation"]
        if p["traits"]:
            r = call(client, "PUT", "/resource_providers/%s/traits" % u,
                     {"resource_provider_generation": gens[u], "traits": p["traits"]})
            gens[u] = r["resource_provider_generation"]
        if p["aggregates"]:
            r = call(client, "PUT", "/resource_providers/%s/aggregates" % u,
                     {"resource_provider_generation": gens[u], "aggregates": p["aggregates"]})
            gens[u] = r["resource_provider_generation"]

    load_allocations(client, plan, gens)
    return len(providers), len(plan.consumers)


def load_allocations(client, plan, gens):
    """Steps 3 and 4 of a load, through the API whichever loader wrote the providers."""
    if not plan.consumers:
        return
    # 3. Allocations in one POST /allocations, on permissive inventories.
    body = {}
    for consumer, merged in plan.consumers.items():
        allocs = {u: {"resources": res} for u, res in merged.items() if res}
        body[consumer] = {"allocations": allocs, "project_id": PROJECT_ID,
                          "user_id": USER_ID, "consumer_generation": None}
    call(client, "POST", "/allocations", body, microversion=ALLOCATION_MICROVERSION)
    # 4. The real inventories; Placement accepts capacity below usage here
    # (it only logs "Resource provider ... is now over-capacity").
    for p in plan.providers:
        u = p["uuid"]
        if u in plan.allocated:
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


class _BodyCheck:
    """Validates a request body with the JSON schema Placement's handler uses.

    Placement's handlers call jsonschema.validate(body, schema,
    format_checker=placement.util._FORMAT_CHECKER); this builds the validator
    once and remembers bodies already found valid (most repeat).
    """

    def __init__(self, schema):
        import jsonschema
        from jsonschema import validators
        from placement import util as placement_util
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        self.validator = cls(schema, format_checker=placement_util._FORMAT_CHECKER)
        self.best_match = jsonschema.exceptions.best_match
        self.valid = set()

    def __call__(self, what, body, memo=True):
        key = json.dumps(body, sort_keys=True) if memo else None
        if key is not None and key in self.valid:
            return
        error = self.best_match(self.validator.iter_errors(body))
        if error is not None:
            raise OracleError("%s: JSON does not validate: %s" % (what, error.message))
        if key is not None:
            self.valid.add(key)


# The layout of the rows bulk_load writes; part of the --state-dir key, so a database
# written by another loader (or an older bulk_load) is loaded again, not reused.
BULK_LOADER = "bulk-1"


def bulk_load(db_path, client, model):
    """Writes providers, inventories, traits and aggregates straight into Placement's
    database, in one transaction, with Placement's own table definitions.

    The rows are those the API loader leaves: the same ids (providers breadth-first,
    custom classes from 10000 and custom traits after the standard ones, both sorted,
    aggregates in order of first use), rows inserted in the order Placement's handlers
    insert them (their set iteration order, PYTHONHASHSEED=0) and the same generations
    (one per non-empty inventories, traits and aggregates PUT). Bodies are validated
    with the handlers' JSON schemas first. Allocations still go through the API
    (load_allocations), on the permissive inventories written here.

    Standard classes and traits must already be in the database: Placement syncs
    them when the application is loaded (Oracle.start), before this runs.
    """
    import sqlalchemy as sa
    from oslo_utils import timeutils
    from placement.db.sqlalchemy import models
    from placement.handlers.inventory import INVENTORY_DEFAULTS
    from placement.objects.resource_class import ResourceClass
    from placement.schemas import aggregate as agg_schema
    from placement.schemas import inventory as inv_schema
    from placement.schemas import resource_class as rc_schema
    from placement.schemas import resource_provider as rp_schema
    from placement.schemas import trait as trait_schema

    plan = LoadPlan(model)
    providers = plan.providers
    t_rp = models.ResourceProvider.__table__
    t_inv = models.Inventory.__table__
    t_rc = models.ResourceClass.__table__
    t_trait = models.Trait.__table__
    t_rp_trait = models.ResourceProviderTrait.__table__
    t_agg = models.PlacementAggregate.__table__
    t_rp_agg = models.ResourceProviderAggregate.__table__

    # The checks of PUT /resource_classes/{name}, PUT /traits/{name}, POST
    # /resource_providers (at 1.14+) and the three PUTs on a provider (at 1.19+).
    check_rc = _BodyCheck(rc_schema.PUT_RC_SCHEMA_V1_2)
    check_trait = _BodyCheck(trait_schema.CUSTOM_TRAIT)
    check_rp = _BodyCheck(rp_schema.POST_RP_SCHEMA_V1_14)
    check_inv = _BodyCheck(inv_schema.PUT_INVENTORY_SCHEMA)
    check_traits = _BodyCheck(trait_schema.SET_TRAITS_FOR_RP_SCHEMA)
    check_aggs = _BodyCheck(agg_schema.PUT_AGGREGATES_SCHEMA_V1_19)
    for rc in plan.custom_classes:
        check_rc("resource class %s" % rc, {"name": rc})
    for t in plan.custom_traits:
        check_trait("trait %s" % t, t)

    now = timeutils.utcnow()
    engine = sa.create_engine("sqlite:///" + db_path)
    try:
        with engine.connect() as conn:
            # Placement's own connections use sqlite_synchronous = False as well.
            conn.exec_driver_sql("PRAGMA synchronous = OFF")
            conn.commit()
            with conn.begin():
                # 1. Custom classes (ids as ResourceClass._get_next_id gives them)
                # and custom traits (ids after the synced standard ones).
                rc_ids = {name: i for i, name in conn.execute(sa.select(t_rc.c.id, t_rc.c.name))}
                rows = []
                for rc in plan.custom_classes:
                    if rc in rc_ids:
                        continue
                    top = max(rc_ids.values(), default=0)
                    rc_ids[rc] = max(top + 1, ResourceClass.MIN_CUSTOM_RESOURCE_CLASS_ID)
                    rows.append({"id": rc_ids[rc], "name": rc, "created_at": now})
                if rows:
                    conn.execute(t_rc.insert(), rows)
                missing = set(c for p in providers for c in p["inventories"]) - set(rc_ids)
                if missing:
                    raise OracleError("resource classes not in Placement's database (was it "
                                      "synced?): %s" % ", ".join(sorted(missing)))
                trait_ids = {n: i for i, n in conn.execute(sa.select(t_trait.c.id, t_trait.c.name))}
                rows = []
                next_id = max(trait_ids.values(), default=0) + 1
                for t in plan.custom_traits:
                    if t not in trait_ids:
                        trait_ids[t] = next_id
                        rows.append({"id": next_id, "name": t, "created_at": now})
                        next_id += 1
                if rows:
                    conn.execute(t_trait.insert(), rows)
                missing = set(t for p in providers for t in p["traits"]) - set(trait_ids)
                if missing:
                    raise OracleError("traits not in Placement's database (was it synced?): %s"
                                      % ", ".join(sorted(missing)))

                # 2. Providers, parents first, as POST /resource_providers and the
                # inventories, traits and aggregates PUTs would write them.
                rp_ids, root_ids = {}, {}
                next_rp = (conn.execute(sa.select(sa.func.max(t_rp.c.id))).scalar() or 0) + 1
                agg_ids = {u: i for i, u in conn.execute(sa.select(t_agg.c.id, t_agg.c.uuid))}
                next_agg = max(agg_ids.values(), default=0) + 1
                trait_sets = {}
                rp_rows, inv_rows, rp_trait_rows, agg_rows, rp_agg_rows = [], [], [], [], []
                gens = {}
                for p in providers:
                    what = "provider %r" % p["name"]
                    body = {"name": p["name"], "uuid": p["uuid"]}
                    parent = None
                    if p["parent"]:
                        parent = plan.by_name[p["parent"]]
                        body["parent_provider_uuid"] = parent["uuid"]
                    check_rp(what, body, memo=False)
                    rp_id = rp_ids[p["name"]] = next_rp
                    next_rp += 1
                    root_ids[p["name"]] = root_ids[parent["name"]] if parent else rp_id
                    gen = 0

                    invs = plan.inventories_to_write(p)
                    if invs:
                        # The body as Placement receives it, then its defaults.
                        body = json.loads(json.dumps(
                            {"resource_provider_generation": gen, "inventories": invs}))
                        check_inv(what + " inventories", body)
                        records = {}
                        for rc, raw in body["inventories"].items():
                            rec = dict(INVENTORY_DEFAULTS, **raw)
                            # _validate_inventory_capacity at 1.26+
                            if int((rec["total"] - rec["reserved"]) * rec["allocation_ratio"]) < 0:
                                raise OracleError("%s inventory %s: capacity below 0" % (what, rc))
                            records[rc] = rec
                        # _set_inventory: to_add = these_resources - existing_resources (a
                        # difference, not a copy: for small sets it is a rebuilt set whose
                        # order can differ from that of its operand).
                        for rc_id in set([rc_ids[rc] for rc in records]) - set():
                            rec = next(r for n, r in records.items() if rc_ids[n] == rc_id)
                            inv_rows.append(dict(
                                rec, created_at=now, resource_provider_id=rp_id,
                                resource_class_id=rc_id))
                        gen += 1
                    if p["traits"]:
                        check_traits(what + " traits",
                                     {"resource_provider_generation": gen, "traits": p["traits"]})
                        key = tuple(p["traits"])
                        if key not in trait_sets:
                            # The handler's trait_obj.get_all(name_in=...) query, in its
                            # row order, then _set_traits' to_add = want_traits - existing.
                            found = conn.execute(sa.select(t_trait).where(
                                t_trait.c.name.in_([str(n) for n in p["traits"]]))).fetchall()
                            trait_sets[key] = [r.id for r in found]
                        for trait_id in set(trait_sets[key]) - set():
                            rp_trait_rows.append({"created_at": now, "trait_id": trait_id,
                                                  "resource_provider_id": rp_id})
                        gen += 1
                    if p["aggregates"]:
                        check_aggs(what + " aggregates",
                                   {"resource_provider_generation": gen,
                                    "aggregates": p["aggregates"]})
                        # _set_aggregates: new aggregates in set order, then links.
                        associate = {}
                        for agg in set(p["aggregates"]) - set():
                            if agg not in agg_ids:
                                agg_ids[agg] = next_agg
                                agg_rows.append({"created_at": now, "id": next_agg, "uuid": agg})
                                next_agg += 1
                            associate[agg_ids[agg]] = agg
                        for agg_id in associate:
                            rp_agg_rows.append({"created_at": now, "resource_provider_id": rp_id,
                                                "aggregate_id": agg_id})
                        gen += 1

                    gens[p["uuid"]] = gen
                    rp_rows.append({
                        "created_at": now, "updated_at": now if gen else None, "id": rp_id,
                        "uuid": str(uuid.UUID(p["uuid"])), "name": p["name"], "generation": gen,
                        "root_provider_id": root_ids[p["name"]],
                        "parent_provider_id": rp_ids[parent["name"]] if parent else None})

                for table, rows in ((t_rp, rp_rows), (t_inv, inv_rows), (t_rp_trait, rp_trait_rows),
                                    (t_agg, agg_rows), (t_rp_agg, rp_agg_rows)):
                    if rows:
                        conn.execute(table.insert(), rows)
    except sa.exc.IntegrityError as e:
        raise OracleError("the database refused the rows: %s" % e.orig)
    finally:
        engine.dispose()

    load_allocations(client, plan, gens)
    return len(providers), len(plan.consumers)


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
                "placement": metadata.version("openstack-placement"),
                "loader": self.loader()}

    def loader(self):
        return "api" if self.args.load_through_api else BULK_LOADER

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
                    and record["placement"] == self.key["placement"]
                    # Records from before the bulk loader have no "loader": the API wrote them.
                    and record.get("loader", "api") == self.key["loader"]):
                self.reused = record
                log("reusing the database in %s (loaded %s by the %s loader: %d providers, "
                    "%d consumers in %.0f s)"
                    % (self.tmp, record["loaded_at"], self.key["loader"], record["providers"],
                       record["consumers"], record["seconds"]))
                return
            log("the database in %s was loaded from other manifests, by another Placement or "
                "by another loader; loading again" % self.tmp)
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

        def run():
            if self.args.load_through_api:
                return load_into_placement(self.client, model, every)
            return bulk_load(os.path.join(self.tmp, "placement.sqlite"), self.client, model)

        if self.args.stock_load:
            nprov, ncons = run()
        else:
            with CachedSchemaCheck():
                nprov, ncons = run()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        log("loaded %d providers and %d consumers in %.2f s (%.2f s CPU) with %d requests "
            "(%s loader, %.2f ms/provider, transport %s)"
            % (nprov, ncons, dt, cpu, self.client.requests, self.loader(),
               1000 * dt / max(nprov, 1), self.args.transport))
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
                                "loaded from byte-identical manifests by the same loader, skip "
                                "db sync and loading")
        p.add_argument("--debug", action="store_true", help="debug logging in placement.log")
        p.add_argument("--stock-load", action="store_true",
                       help="load without the jsonschema schema-check cache (slower, same result)")
        p.add_argument("--load-through-api", action="store_true",
                       help="load every provider through Placement's REST API (tens of ms per "
                            "provider) instead of writing the rows straight into its database")

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
