#!/usr/bin/env python3
"""Serves real OpenStack Placement (from the virtualenv of hack/placement-venv.sh) on
SQLite on 127.0.0.1, as /work/shared/PEERS.md describes: noauth2 (the token `admin` is an
admin), a fresh database in DIR, one thread per request. Prints `listening on
http://127.0.0.1:PORT` once it accepts connections, then serves until killed.

With `--keystone-authtoken FILE` (an INI file whose `[keystone_authtoken]` section is
copied into placement.conf) it authenticates with Keystone through keystonemiddleware
(`[api] auth_strategy = keystone`) and applies its default policies, as a real cloud's
Placement does: the reference tests/placement_keystone.rs holds kubeplace to.
--database-url takes an SQLAlchemy URL of an empty database instead of SQLite in DIR
(e.g. mysql+pymysql://root@localhost/placement?unix_socket=/run/mysqld.sock, with PyMySQL).

    $(hack/placement-venv.sh)/bin/python hack/placement-serve.py DIR [--port P]
        [--keystone-authtoken FILE] [--database-url URL]
"""
import argparse
import os
import socketserver
import subprocess
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Threaded(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--database-url")
    ap.add_argument("--keystone-authtoken")
    args = ap.parse_args()
    d = os.path.abspath(args.dir)
    os.makedirs(d, exist_ok=True)
    database = args.database_url or "sqlite:///%s" % os.path.join(d, "placement.sqlite")
    conf = os.path.join(d, "placement.conf")
    strategy = "keystone" if args.keystone_authtoken else "noauth2"
    with open(conf, "w") as f:
        if args.keystone_authtoken:
            import configparser
            ini = configparser.ConfigParser(interpolation=None)
            ini.read(args.keystone_authtoken)
            f.write("[keystone_authtoken]\n")
            for k, v in ini["keystone_authtoken"].items():
                f.write("%s = %s\n" % (k, v))
        f.write(
            "[DEFAULT]\nlog_file = %s\n"
            "[api]\nauth_strategy = %s\n"
            "[placement_database]\nconnection = %s\nsqlite_synchronous = False\n"
            "[placement]\nrandomize_allocation_candidates = False\n"
            % (os.path.join(d, "placement.log"), strategy, database)
        )
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=d)
    manage = os.path.join(os.path.dirname(sys.executable), "placement-manage")
    subprocess.run([manage, "--config-file", conf, "db", "sync"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    os.environ["OS_PLACEMENT_CONFIG_DIR"] = d
    from placement.wsgi import api  # noqa: E402  (reads the config dir at import)

    server = make_server("127.0.0.1", args.port, api.application,
                         server_class=Threaded, handler_class=Quiet)
    print("listening on http://127.0.0.1:%d" % server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
