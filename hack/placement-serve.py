#!/usr/bin/env python3
"""Serves real OpenStack Placement (from the virtualenv of hack/placement-venv.sh) on
SQLite on 127.0.0.1, as /work/shared/PEERS.md describes: noauth2 (the token `admin` is an
admin), the database DIR/placement.sqlite (made and synced when missing, served as it is
otherwise), one thread per request. Prints `listening on http://127.0.0.1:PORT` once it
accepts connections, then serves until killed.

With `--keystone-authtoken FILE` (an INI file whose `[keystone_authtoken]` section is
copied into placement.conf) it authenticates with Keystone through keystonemiddleware
(`[api] auth_strategy = keystone`) and applies its default policies, as a real cloud's
Placement does: the reference tests/placement_keystone.rs holds kubeplace to.
--database-url takes an SQLAlchemy URL of an empty database instead of SQLite in DIR
(e.g. mysql+pymysql://root@localhost/placement?unix_socket=/run/mysqld.sock, with PyMySQL).
--proxy-headers believes a proxy's Forwarded and X-Forwarded-* headers, which decide the
URLs it answers with. Placement's http_proxy_to_wsgi middleware reads
[oslo_middleware] enable_proxy_headers_parsing from oslo.config's process-wide object,
which Placement's WSGI application never loads from placement.conf (it has a ConfigOpts of
its own): the option is set there, in this process, as a deployment that loads it would.
--workers N serves from N processes sharing the listening socket (each with its own
database connections): reads then use N cores, as a Placement behind uWSGI or mod_wsgi
with several processes does. Keep one worker for a Placement that is written to: SQLite
refuses a write when two processes each hold a read transaction that wants to write.
The workers end with the parent (SIGTERM or SIGKILL).

    $(hack/placement-venv.sh)/bin/python hack/placement-serve.py DIR [--port P]
        [--keystone-authtoken FILE] [--database-url URL] [--workers N] [--proxy-headers]
"""
import argparse
import ctypes
import os
import signal
import socketserver
import subprocess
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Threaded(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def application(d):
    os.environ["OS_PLACEMENT_CONFIG_DIR"] = d
    from placement.wsgi import api  # noqa: E402  (reads the config dir at import)
    return api.application


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--database-url")
    ap.add_argument("--keystone-authtoken")
    ap.add_argument("--proxy-headers", action="store_true",
                    help="believe Forwarded and X-Forwarded-* ([oslo_middleware] "
                         "enable_proxy_headers_parsing)")
    ap.add_argument("--placement-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a [placement] option for placement.conf (repeatable)")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes serving the one socket (1 to 16; keep 1 for writes)")
    args = ap.parse_args()
    if not 1 <= args.workers <= 16:
        ap.error("--workers %d: give 1 to 16 processes" % args.workers)
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
            "[placement]\n"
            % (os.path.join(d, "placement.log"), strategy, database)
        )
        options = dict(o.split("=", 1) for o in args.placement_option)
        options.setdefault("randomize_allocation_candidates", "False")
        for key, value in options.items():
            f.write("%s = %s\n" % (key, value))
    if args.proxy_headers:
        from oslo_config import cfg
        from oslo_middleware import http_proxy_to_wsgi
        cfg.CONF.register_opts(http_proxy_to_wsgi.OPTS, group="oslo_middleware")
        cfg.CONF.set_override("enable_proxy_headers_parsing", True, group="oslo_middleware")
    env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=d)
    manage = os.path.join(os.path.dirname(sys.executable), "placement-manage")
    subprocess.run([manage, "--config-file", conf, "db", "sync"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    if args.workers == 1:
        server = make_server("127.0.0.1", args.port, application(d),
                             server_class=Threaded, handler_class=Quiet)
        print("listening on http://127.0.0.1:%d" % server.server_port, flush=True)
        server.serve_forever()
        return
    # The socket first, then the workers, each loading Placement (and opening its database)
    # after the fork, so that no connection is shared between processes.
    server = make_server("127.0.0.1", args.port, None, server_class=Threaded, handler_class=Quiet)
    children = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            # PR_SET_PDEATHSIG: end with the parent, however it ends.
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)
            server.set_app(application(d))
            server.serve_forever()
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("listening on http://127.0.0.1:%d" % server.server_port, flush=True)
    os.wait()
    stop()


if __name__ == "__main__":
    main()
