#!/usr/bin/env python3
"""Serves a real OpenStack Keystone (from the virtualenv of hack/keystone-venv.sh) on
SQLite on 127.0.0.1, with the projects, users and roles kubeplace's Keystone tests use.

    $(hack/keystone-venv.sh)/bin/python hack/keystone-serve.py DIR [--expiration SECONDS]

In DIR: keystone.conf, the database, the fernet and credential keys and keystone.log,
copied from a template made once per Keystone version (and version of this script) and
kept under ~/.cache/kubeplace/keystone-db/ (KUBEPLACE_KEYSTONE_DB_CACHE): `keystone-manage
db_sync`, `fernet_setup`, `credential_setup` and `bootstrap` (the admin user, the admin
project, the roles admin > manager > member > reader and service, RegionOne and the
identity endpoint), then, through Keystone's REST API as the admin:

- projects `service`, `demo` and `other`, and a role `observer` Placement knows nothing of;
- users, each with the password `PASSWORD` below: `placement` and `nova` (role service
  in project service, as an installer sets them up), `demo-admin` (admin in demo),
  `demo-member` (member in demo), `demo-reader` (reader in demo), `demo-observer`
  (observer in demo), `other-member` (member in other), `no-role` (no role anywhere: it
  gets unscoped tokens only), and the bootstrap `admin` (admin in project admin and on
  the system);
- the service `placement` (type placement), without endpoints: a test adds one for its
  own region pointing at the server it starts (POST /v3/regions, /v3/endpoints).

Each start copies the template, serves the public WSGI application with wsgiref (one
thread a request) on a free port, and points the identity endpoints at it.

Prints one JSON line once it accepts connections: {"url", "password", "admin_password",
"projects": {name: id}, "users": {name: id}, "roles": {name: id}, "placement_service"},
then serves until killed. `--expiration` is `[token] expiration` (seconds a token lives).
"""

import argparse
import json
import os
import shutil
import socketserver
import subprocess
import sys
import threading
import urllib.request
import warnings
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

warnings.simplefilter("ignore")

PASSWORD = "kubeplace-test-secret"
ADMIN_PASSWORD = "kubeplace-test-admin"
DB = "keystone.sqlite"
# The identity URL a template is bootstrapped with, replaced at each start.
PLACEHOLDER = "http://127.0.0.1:5000"


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Threaded(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def manage(conf, *args):
    exe = os.path.join(os.path.dirname(sys.executable), "keystone-manage")
    subprocess.run([exe, "--config-file", conf, *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def keystone_version():
    from importlib import metadata
    return metadata.version("keystone")


def write_conf(d, expiration):
    conf = os.path.join(d, "keystone.conf")
    with open(conf, "w") as f:
        f.write(
            "[DEFAULT]\nlog_file = %(log)s\n"
            "[database]\nconnection = sqlite:///%(db)s\n"
            "[token]\nprovider = fernet\nexpiration = %(exp)d\n"
            "[fernet_tokens]\nkey_repository = %(d)s/fernet-keys\n"
            "[fernet_receipts]\nkey_repository = %(d)s/fernet-receipts\n"
            "[credential]\nkey_repository = %(d)s/credential-keys\n"
            "[cache]\nenabled = false\n"
            % {"log": os.path.join(d, "keystone.log"), "db": os.path.join(d, DB),
               "d": d, "exp": expiration})
    return conf


def template():
    """The directory of a Keystone set up and populated once (database, keys, the ids
    made), kept under the cache for this Keystone version and this script, made when
    missing."""
    import hashlib
    cache = os.environ.get("KUBEPLACE_KEYSTONE_DB_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kubeplace", "keystone-db")
    with open(os.path.abspath(__file__), "rb") as f:
        mine = hashlib.sha256(f.read()).hexdigest()[:12]
    kept = os.path.join(cache, "keystone-%s-%s" % (keystone_version(), mine))
    if os.path.exists(os.path.join(kept, "ids.json")):
        return kept
    os.makedirs(cache, exist_ok=True)
    part = "%s.%d.part" % (kept, os.getpid())
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    conf = write_conf(part, 3600)
    manage(conf, "db_sync")
    user = ["--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid())]
    manage(conf, "fernet_setup", *user)
    manage(conf, "credential_setup", *user)
    manage(conf, "bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
           "--bootstrap-admin-url", PLACEHOLDER, "--bootstrap-public-url", PLACEHOLDER,
           "--bootstrap-internal-url", PLACEHOLDER, "--bootstrap-region-id", "RegionOne")
    # Populated through the REST API by a Keystone of its own.
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--populate",
                              part], stdout=subprocess.PIPE)
    line = child.stdout.readline()
    child.kill()
    child.wait()
    if not line:
        sys.exit("keystone-serve: populating the template failed")
    with open(os.path.join(part, "ids.json"), "wb") as f:
        f.write(line)
    os.remove(os.path.join(part, "keystone.conf"))
    try:
        os.rename(part, kept)
    except OSError:
        # Another run made it first.
        shutil.rmtree(part, ignore_errors=True)
    return kept


class Api:
    """Keystone's REST API as the bootstrap admin."""

    def __init__(self, url):
        self.url = url
        body = {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"id": "default"},
                "password": ADMIN_PASSWORD}}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}
        req = urllib.request.Request(
            url + "/v3/auth/tokens", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=60) as resp:
            self.token = resp.headers["X-Subject-Token"]

    def call(self, method, path, body=None):
        req = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "X-Auth-Token": self.token})
        with urllib.request.urlopen(req, timeout=60) as resp:
            text = resp.read()
        return json.loads(text) if text else None


def populate(api):
    roles = {r["name"]: r["id"] for r in api.call("GET", "/v3/roles")["roles"]}
    roles["observer"] = api.call("POST", "/v3/roles", {"role": {"name": "observer"}})[
        "role"]["id"]
    projects = {p["name"]: p["id"] for p in api.call("GET", "/v3/projects")["projects"]}
    for name in ("service", "demo", "other"):
        projects[name] = api.call("POST", "/v3/projects", {"project": {
            "name": name, "domain_id": "default"}})["project"]["id"]
    users = {u["name"]: u["id"] for u in api.call("GET", "/v3/users")["users"]}
    grants = [
        ("placement", "service", "service"),
        ("nova", "service", "service"),
        ("demo-admin", "demo", "admin"),
        ("demo-member", "demo", "member"),
        ("demo-reader", "demo", "reader"),
        ("demo-observer", "demo", "observer"),
        ("other-member", "other", "member"),
        ("no-role", None, None),
    ]
    for user, project, role in grants:
        users[user] = api.call("POST", "/v3/users", {"user": {
            "name": user, "domain_id": "default", "password": PASSWORD}})["user"]["id"]
        if project:
            api.call("PUT", "/v3/projects/%s/users/%s/roles/%s" % (
                projects[project], users[user], roles[role]))
    service = api.call("POST", "/v3/services", {"service": {
        "name": "placement", "type": "placement"}})["service"]["id"]
    return projects, users, roles, service


def serve(d, expiration):
    """Keystone on DIR's database, on a free port; its Api once it answers."""
    server = make_server("127.0.0.1", 0, lambda e, s: [], server_class=Threaded,
                         handler_class=Quiet)
    url = "http://127.0.0.1:%d" % server.server_port
    write_conf(d, expiration)
    os.environ["OS_KEYSTONE_CONFIG_DIR"] = d
    # Keystone's configuration reads the command line too: leave it ours alone.
    sys.argv = sys.argv[:1]
    from keystone.server import wsgi  # noqa: E402  (reads the config at start)

    server.set_app(wsgi.initialize_public_application())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return url, Api(url)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--expiration", type=int, default=3600)
    ap.add_argument("--populate", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    d = os.path.abspath(args.dir)
    if args.populate:
        url, api = serve(d, 3600)
        projects, users, roles, service = populate(api)
        print(json.dumps({"projects": projects, "users": users, "roles": roles,
                          "placement_service": service}), flush=True)
        threading.Event().wait()
    kept = template()
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(kept, d)
    with open(os.path.join(d, "ids.json")) as f:
        ids = json.load(f)
    url, api = serve(d, args.expiration)
    # The identity endpoints bootstrap wrote name the template's placeholder.
    for e in api.call("GET", "/v3/endpoints")["endpoints"]:
        if e["url"] == PLACEHOLDER:
            api.call("PATCH", "/v3/endpoints/%s" % e["id"], {"endpoint": {"url": url}})
    print(json.dumps(dict(ids, url=url, password=PASSWORD, admin_password=ADMIN_PASSWORD)),
          flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
