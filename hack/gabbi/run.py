#!/usr/bin/env python3
"""Run OpenStack Placement's own gabbi functional tests against kubeplace.

For each YAML file in the installed openstack-placement wheel
(placement/tests/functional/gabbits, read at run time, never copied):

1. the file's fixture (its `fixtures:` class from
   placement/tests/functional/fixtures/gabbits.py) builds its state in-process
   in real Placement on a throwaway in-memory SQLite database and sets the
   environment variables the tests use ($ENVIRON['RP_UUID'], ...);
2. that state is read back through Placement's own REST API, in-process
   (custom resource classes and traits, providers with parents, inventories,
   traits and aggregates, consumers with their allocations, project, user,
   type and generation, and every provider's generation);
3. CONTROL: the fixture's database is replaced by an empty one (same
   configuration: policy, CORS, ...), real Placement serves it over HTTP
   (wsgiref in a thread), the state is written into it through the REST API,
   and gabbi runs the file over HTTP;
4. KUBEPLACE: a fresh `kubeplace placement serve --listen 127.0.0.1:0
   --token admin` gets the same REST writes, and gabbi runs the file against
   it, with the same environment variables. For the 27 policy/RBAC files
   (`*-policy.yaml`, `*-legacy-rbac.yaml`, `*-secure-rbac.yaml`), whose tests
   claim roles in headers, the server runs with `--test-roles-from-headers`
   instead (a test-only mode: any token, the roles its headers claim), so
   that kubeplace's policy table is what they judge.

Generations are replayed too: after the writes, a provider whose generation is
below the fixture's is given no-op trait writes (each moves a generation in
Placement) and a consumer no-op allocation writes, until they match.

A test failing on the control is a harness limit, not a kubeplace defect. Every
assertion of a failing test is evaluated (not only the first), so that a
failure whose only failing assertions check error detail text
(`response_strings` on an error answer, or a json path into
`errors[].detail`) is told apart as WORDING.

Cascade check: each other kubeplace failure (among the control's passes) is
run again from the control's state: the file's earlier tests run on a fresh
control, Placement's state at that point is replayed into a fresh kubeplace,
and the test runs there behind the same host:port (a relay whose backend is
switched). If it then passes (or fails on wording only) it was a CASCADE of
an earlier difference; otherwise it is REAL.

    hack/gabbi/run.py                       # all 79 files, target/debug/kubeplace
    hack/gabbi/run.py --files inventory.yaml traits.yaml --out /tmp/r.json
    hack/gabbi/run.py --no-cascade-check    # about 40 s instead of 150 s
    hack/gabbi/triage.py /tmp/kubeplace-gabbi-results.json   # failures by cause

Runs itself under the virtualenv hack/placement-venv.sh makes (PYTHONHASHSEED=0).
"""

import argparse
import copy
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WRITE_METHODS = ('POST', 'PUT', 'DELETE', 'PATCH')
# Headers the harness reads and writes with: Placement's noauth2 makes the
# token `admin` a project-scoped user; the roles make the same requests pass
# both the legacy and the secure-RBAC policies the fixtures turn on (the
# reshaper wants `service`). kubeplace reads only the token.
HARNESS_HEADERS = {
    'x-auth-token': 'admin',
    'x-roles': 'admin,member,reader,service',
    'accept': 'application/json',
}


def reexec_in_venv():
    if os.environ.get('KUBEPLACE_GABBI_IN_VENV') == '1':
        return
    venv = subprocess.run([os.path.join(HERE, '..', 'placement-venv.sh')], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    env = dict(os.environ, KUBEPLACE_GABBI_IN_VENV='1', PYTHONHASHSEED='0')
    py = os.path.join(venv, 'bin', 'python')
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# --------------------------------------------------------------------------
# Talking to a Placement API: in-process (WSGI) or over HTTP.

class WSGIClient:
    """Calls a WSGI app directly (the fixture's Placement, in-process)."""

    def __init__(self, app):
        import webob
        self.webob = webob
        self.app = app

    def call(self, method, path, body=None, version='1.39'):
        headers = dict(HARNESS_HEADERS)
        headers['openstack-api-version'] = 'placement %s' % version
        kw = {}
        if body is not None:
            headers['content-type'] = 'application/json'
            kw['body'] = json.dumps(body).encode()
        req = self.webob.Request.blank(path, method=method, headers=headers,
                                       **kw)
        resp = req.get_response(self.app)
        data = None
        if resp.body:
            try:
                data = json.loads(resp.body)
            except ValueError:
                data = resp.text
        return resp.status_int, data


class HTTPClient:
    def __init__(self, base, token=None):
        import httpx
        self.client = httpx.Client(base_url=base, timeout=60)
        self.token = token

    def call(self, method, path, body=None, version='1.39'):
        headers = dict(HARNESS_HEADERS)
        if self.token:
            headers['x-auth-token'] = self.token
        headers['openstack-api-version'] = 'placement %s' % version
        kw = {}
        if body is not None:
            headers['content-type'] = 'application/json'
            kw['content'] = json.dumps(body).encode()
        resp = self.client.request(method, path, headers=headers, **kw)
        data = None
        if resp.content:
            try:
                data = resp.json()
            except ValueError:
                data = resp.text
        return resp.status_code, data

    def close(self):
        self.client.close()


class ReplayError(Exception):
    pass


def must(client, method, path, body=None, version='1.39', ok=(200, 201, 204)):
    status, data = client.call(method, path, body, version)
    if status not in ok:
        raise ReplayError('%s %s (%s) -> %s %s' % (
            method, path, json.dumps(body)[:300], status,
            json.dumps(data)[:500]))
    return data


# --------------------------------------------------------------------------
# Reading a Placement's state through its API, and writing it into another.

def dump_state(client):
    """What a fixture can make that the API can show."""
    rcs = must(client, 'GET', '/resource_classes')['resource_classes']
    traits = must(client, 'GET', '/traits')['traits']
    rps = must(client, 'GET', '/resource_providers')['resource_providers']
    state = {
        'resource_classes': [r['name'] for r in rcs
                             if r['name'].startswith('CUSTOM_')],
        'traits': [t for t in traits if t.startswith('CUSTOM_')],
        'providers': [],
        'consumers': {},
    }
    consumers = []
    for rp in rps:
        u = rp['uuid']
        base = '/resource_providers/%s' % u
        inv = must(client, 'GET', base + '/inventories')['inventories']
        tr = must(client, 'GET', base + '/traits')['traits']
        agg = must(client, 'GET', base + '/aggregates')['aggregates']
        al = must(client, 'GET', base + '/allocations')['allocations']
        for c in al:
            if c not in consumers:
                consumers.append(c)
        state['providers'].append({
            'uuid': u, 'name': rp['name'],
            'parent_provider_uuid': rp.get('parent_provider_uuid'),
            'root_provider_uuid': rp.get('root_provider_uuid'),
            'generation': rp['generation'],
            'inventories': inv, 'traits': sorted(tr),
            'aggregates': sorted(agg),
        })
    for c in consumers:
        a = must(client, 'GET', '/allocations/%s' % c)
        for v in a['allocations'].values():
            v.pop('generation', None)
        state['consumers'][c] = a
    return state


def empty_placement(port, token):
    """Deletes everything a file may have left through the API: consumers'
    allocations, providers children first, custom traits and classes."""
    client = HTTPClient('http://127.0.0.1:%d' % port, token)
    try:
        state = dump_state(client)
        for c in state['consumers']:
            must(client, 'DELETE', '/allocations/%s' % c, ok=(204, 404))
        for p in reversed(order_parents_first(state['providers'])):
            must(client, 'DELETE', '/resource_providers/%s' % p['uuid'],
                 ok=(204, 404))
        for t in state['traits']:
            must(client, 'DELETE', '/traits/%s' % t, ok=(204, 404))
        for rc in state['resource_classes']:
            must(client, 'DELETE', '/resource_classes/%s' % rc, ok=(204, 404))
        left = dump_state(client)
        if left['providers'] or left['traits'] or left['resource_classes']:
            raise ReplayError('kubeplace could not be emptied: %r' % left)
    finally:
        client.close()


def order_parents_first(providers):
    done, out, pending = set(), [], list(providers)
    while pending:
        progress = False
        for p in list(pending):
            par = p['parent_provider_uuid']
            if not par or par in done:
                out.append(p)
                done.add(p['uuid'])
                pending.remove(p)
                progress = True
        if not progress:
            raise ReplayError('provider parents do not form a tree')
    return out


def put_allocations(client, c, a, gen):
    body = {'allocations': a['allocations'], 'project_id': a['project_id'],
            'user_id': a['user_id'], 'consumer_generation': gen}
    if a.get('consumer_type') and a['consumer_type'] != 'unknown':
        body['consumer_type'] = a['consumer_type']
        version = '1.38'
    else:
        # A consumer without a type reads back as 'unknown': write it at 1.37
        # so that it is made without one.
        version = '1.37'
    return must(client, 'PUT', '/allocations/%s' % c, body, version)


def replay_state(client, state):
    """Write `state` into an empty Placement through the REST API. Returns
    notes about what could not be made the same."""
    notes = []
    for rc in state['resource_classes']:
        must(client, 'PUT', '/resource_classes/%s' % rc, version='1.7')
    for t in state['traits']:
        must(client, 'PUT', '/traits/%s' % t)
    for p in order_parents_first(state['providers']):
        body = {'name': p['name'], 'uuid': p['uuid']}
        if p['parent_provider_uuid']:
            body['parent_provider_uuid'] = p['parent_provider_uuid']
        gen = must(client, 'POST', '/resource_providers', body)['generation']
        base = '/resource_providers/%s' % p['uuid']
        if p['inventories']:
            gen = must(client, 'PUT', base + '/inventories', {
                'resource_provider_generation': gen,
                'inventories': p['inventories']})['resource_provider_generation']
        if p['traits']:
            gen = must(client, 'PUT', base + '/traits', {
                'resource_provider_generation': gen,
                'traits': p['traits']})['resource_provider_generation']
        if p['aggregates']:
            # Before 1.19 an aggregate write does not move the generation,
            # as the fixtures' set_aggregates does not.
            must(client, 'PUT', base + '/aggregates', p['aggregates'],
                 version='1.18')
    for c, a in state['consumers'].items():
        put_allocations(client, c, a, None)
    # Consumer generations first: their writes move provider generations too.
    for c, a in state['consumers'].items():
        for _ in range(50):
            cur = must(client, 'GET', '/allocations/%s' % c)
            have = cur.get('consumer_generation')
            if have is None or have >= a['consumer_generation']:
                if have != a['consumer_generation']:
                    notes.append('consumer %s generation %s, fixture %s' % (
                        c, have, a['consumer_generation']))
                break
            put_allocations(client, c, a, have)
    for p in state['providers']:
        base = '/resource_providers/%s' % p['uuid']
        last = None
        for _ in range(50):
            gen = must(client, 'GET', base)['generation']
            if gen >= p['generation'] or gen == last:
                if gen != p['generation']:
                    notes.append('provider %s (%s) generation %s, fixture %s'
                                 % (p['name'], p['uuid'], gen,
                                    p['generation']))
                break
            last = gen
            # An inventory write moves the generation even when it changes
            # nothing (a trait write that changes nothing does not).
            must(client, 'PUT', base + '/inventories', {
                'resource_provider_generation': gen,
                'inventories': p['inventories']})
    return notes


def diff_state(want, have):
    out = []
    for k in ('resource_classes', 'traits'):
        if want[k] != have[k]:
            out.append('%s: fixture %s, replayed %s' % (k, want[k], have[k]))
    wp = {p['uuid']: p for p in want['providers']}
    hp = {p['uuid']: p for p in have['providers']}
    if [p['uuid'] for p in want['providers']] != \
            [p['uuid'] for p in have['providers']]:
        out.append('provider order or set differs')
    for u, p in wp.items():
        q = hp.get(u)
        if not q:
            out.append('provider %s missing' % u)
            continue
        for k in p:
            if p[k] != q.get(k):
                out.append('provider %s %s: fixture %s, replayed %s' % (
                    p['name'], k, json.dumps(p[k]), json.dumps(q.get(k))))
    for c, a in want['consumers'].items():
        b = have['consumers'].get(c)
        if a != b:
            out.append('consumer %s: fixture %s, replayed %s' % (
                c, json.dumps(a), json.dumps(b)))
    return out


# --------------------------------------------------------------------------
# Servers.

class ControlServer:
    """Real Placement (the fixture's configuration, an empty database)
    served over HTTP by wsgiref in a thread."""

    def __init__(self, app):
        from wsgiref import simple_server

        class Quiet(simple_server.WSGIRequestHandler):
            def log_message(self, *args):
                pass

            def get_environ(self):
                # wsgiref makes up CONTENT_TYPE text/plain for a request
                # without Content-Type; other WSGI servers (and gabbi's
                # in-process intercept) leave it out.
                env = super().get_environ()
                if self.headers.get('content-type') is None:
                    env.pop('CONTENT_TYPE', None)
                return env

        self.httpd = simple_server.make_server('127.0.0.1', 0, app,
                                               handler_class=Quiet)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       args=(0.05,), daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# Settings a file's fixture gives Placement, as `placement serve` flags: the CORS files
# call with the token `user` (any token passes Placement's noauth2) and CORSFixture sets
# `[cors] allowed_origin` and `allow_headers`.
FILE_SETTINGS = {
    'cors.yaml': ['--token', 'user',
                  '--cors-allowed-origin', 'http://valid.example.com',
                  '--cors-allow-headers', 'openstack-api-version'],
    'non-cors.yaml': ['--token', 'user'],
}


def file_settings(path):
    """The `placement serve` flags that stand for the file's fixture's settings."""
    return FILE_SETTINGS.get(os.path.basename(path), [])


def settings_token(settings):
    """The token a file's settings give `placement serve`, if they give one."""
    if '--token' in settings:
        return settings[settings.index('--token') + 1]
    return None


class KubeplaceServer:
    """`kubeplace placement serve` on a free port: with the static token
    `admin`, or, for the policy/RBAC files (roles_from_headers), with
    `--test-roles-from-headers`, which reads callers' roles, project and scope
    from the headers as Placement's noauth2 does under those files' fixtures,
    and judges them by kubeplace's policy table (Placement 16's defaults)."""

    def __init__(self, binary, log_path, roles_from_headers=False, extra=()):
        self.log = open(log_path, 'ab')
        auth = (['--test-roles-from-headers'] if roles_from_headers
                else ['--token', 'admin'])
        self.proc = subprocess.Popen(
            [binary, 'placement', 'serve', '--listen', '127.0.0.1:0'] + auth
            + list(extra),
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        m = re.search(r'listening on http://127\.0\.0\.1:(\d+)', line)
        if not m:
            self.stop()
            raise RuntimeError('kubeplace did not start: %r' % line)
        self.port = int(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


class Proxy:
    """A plain HTTP relay on one port whose backend can be switched between
    requests: the cascade check runs a file's first tests on the control and
    the failing test on kubeplace behind one host:port, so that $LOCATION,
    $NETLOC and Location headers stay the same. Requests and answers are
    passed on as they are (Host header included)."""

    def __init__(self, backend_port):
        import http.client
        import http.server
        self.backend_port = backend_port
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.0'

            def log_message(self, *args):
                pass

            def _relay(self):
                n = self.headers.get('content-length')
                body = self.rfile.read(int(n)) if n and n.isdigit() else None
                conn = http.client.HTTPConnection('127.0.0.1',
                                                  proxy.backend_port,
                                                  timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() not in ('connection', 'keep-alive'):
                            conn.putheader(k, v)
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response_only(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in ('connection', 'keep-alive',
                                             'transfer-encoding'):
                            self.send_header(k, v)
                    self.end_headers()
                    if self.command != 'HEAD':
                        self.wfile.write(data)
                finally:
                    conn.close()

            def __getattr__(self, name):
                if name.startswith('do_'):
                    return self._relay
                raise AttributeError(name)

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       args=(0.05,), daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# --------------------------------------------------------------------------
# Running one gabbit file with gabbi, every assertion recorded.

# --kubeplace-admin-token: every token sent to kubeplace becomes `admin`, to
# see what the token wall hides (the tests that expect a 403 then fail).
REWRITE_TOKEN = {'on': False, 'to': 'admin'}


def install_gabbi_hooks():
    """Make gabbi evaluate every assertion of a test (it stops at the first)
    and keep the request and answer of each test."""
    from gabbi import case
    from gabbi import exception as gexc

    orig_run_request = case.HTTPTestCase._run_request

    def _run_request(self, url, method, headers, body, redirect=False,
                     timeout=30):
        if REWRITE_TOKEN['on'] and 'x-auth-token' in {
                k.lower() for k in headers}:
            headers = {k: (REWRITE_TOKEN['to'] if k.lower() == 'x-auth-token'
                           else v)
                       for k, v in headers.items()}
        self._kp_request = {
            'method': method, 'url': url,
            'body': body.decode('utf-8', 'replace')[:2000] if body else '',
            'headers': {k: v for k, v in headers.items()
                        if k.lower() not in ('user-agent',)},
        }
        return orig_run_request(self, url, method, headers, body,
                                redirect=redirect, timeout=timeout)

    def _assert_response(self):
        failures = []
        try:
            self._test_status(self.test_data['status'],
                              self.response['status'])
        except AssertionError as exc:
            failures.append({'check': 'status',
                             'item': str(self.test_data['status']),
                             'message': str(exc)[:1500]})
        for handler in self.response_handlers:
            key = handler._key
            spec = self.test_data[key]
            if not spec:
                continue
            if not isinstance(spec, type(handler.test_key_value)):
                raise gexc.GabbiFormatError('%s has incorrect type' % key)
            try:
                handler.preprocess(self)
            except Exception as exc:  # noqa
                failures.append({'check': key, 'item': None,
                                 'message': '%s: %s' % (
                                     type(exc).__name__, str(exc)[:1500])})
                continue
            for item in spec:
                try:
                    value = spec[item]
                except (TypeError, KeyError):
                    value = None
                try:
                    handler.action(self, item, value=value)
                except Exception as exc:  # noqa
                    failures.append({
                        'check': key, 'item': str(item),
                        'expected': None if value is None else str(value),
                        'message': ('' if isinstance(exc, AssertionError)
                                    else type(exc).__name__ + ': ')
                        + str(exc)[:1500]})
        self._kp_failures = failures
        if failures:
            raise AssertionError('\n'.join(
                '[%s %s] %s' % (f['check'], f['item'] or '', f['message'])
                for f in failures))

    case.HTTPTestCase._run_request = _run_request
    case.HTTPTestCase._assert_response = _assert_response

    # gabbi makes an httpx client per test, and each builds an SSL context
    # (20 ms, loading CA files) that plain HTTP never uses: share one.
    import httpx._transports.default as httpx_default
    orig_ctx = httpx_default.create_ssl_context
    cache = {}

    def create_ssl_context(verify=True, cert=None, trust_env=True):
        if cert is not None or not isinstance(verify, bool):
            return orig_ctx(verify=verify, cert=cert, trust_env=trust_env)
        key = (verify, trust_env)
        if key not in cache:
            cache[key] = orig_ctx(verify=verify, cert=cert,
                                  trust_env=trust_env)
        return cache[key]

    httpx_default.create_ssl_context = create_ssl_context


def run_gabbit(path, suite_dict, host, port, before_test=None, upto=None):
    """Run a file's tests in order; `before_test(i)` is called before test
    i, and only tests 0..upto are run when `upto` is given."""
    import unittest
    from gabbi import handlers
    from gabbi import suitemaker

    suite_dict = copy.deepcopy(suite_dict)
    suite_dict.pop('fixtures', None)  # the harness made the state
    handler_objects = [h() for h in handlers.RESPONSE_HANDLERS]
    name = os.path.splitext(os.path.basename(path))[0]
    suite = suitemaker.test_suite_from_dict(
        unittest.TestLoader(), name, suite_dict, os.path.dirname(path),
        host, port, None, None, handlers=handler_objects)

    outcomes = {}

    class Result(unittest.TestResult):
        def _rec(self, test, outcome, err=None):
            rec = {'outcome': outcome}
            if err is not None:
                rec['text'] = self._exc_info_to_string(err, test)[-3000:]
            outcomes[id(test)] = rec

        def addSuccess(self, test):
            self._rec(test, 'pass')

        def addFailure(self, test, err):
            self._rec(test, 'fail', err)

        def addError(self, test, err):
            self._rec(test, 'error', err)

        def addSkip(self, test, reason):
            outcomes[id(test)] = {'outcome': 'skip', 'text': reason}

        def addExpectedFailure(self, test, err):
            self._rec(test, 'pass')  # xfail that failed: as declared

        def addUnexpectedSuccess(self, test):
            outcomes[id(test)] = {'outcome': 'fail',
                                  'text': 'unexpected success (xfail)'}

    tests = list(suite._tests)
    if upto is not None:
        tests = tests[:upto + 1]
    result = Result()
    for i, test in enumerate(tests):
        if before_test:
            before_test(i)
        test.run(result)
    results = []
    for test in tests:
        td = test.test_data
        rec = outcomes.get(id(test), {'outcome': 'error', 'text': 'not run'})
        out = {
            'name': td['name'],
            'method': td['method'],
            'url': td['url'],
            'outcome': rec['outcome'],
        }
        resp = getattr(test, 'response', None)
        if resp is not None:
            out['status'] = int(resp['status'])
        if rec['outcome'] not in ('pass', 'skip'):
            out['text'] = rec.get('text', '')
            out['failures'] = getattr(test, '_kp_failures', None)
            out['request'] = getattr(test, '_kp_request', None)
            if resp is not None:
                out['response_headers'] = {
                    k: v for k, v in resp.items()
                    if k not in ('status', 'reason', 'http_protocol_version')}
                out['response_body'] = (getattr(test, 'output', '') or '')
                if not isinstance(out['response_body'], str):
                    out['response_body'] = repr(out['response_body'])
                out['response_body'] = out['response_body'][:3000]
        results.append(out)
    return results


# --------------------------------------------------------------------------
# Classification.

def is_wording(test):
    """Every failing assertion checks error detail text: status and all else
    pass, the answer is an error, and each failure is a `response_strings`
    item (not an error code) or a json path into errors[].detail."""
    fails = test.get('failures')
    if not fails or test.get('status', 0) < 400:
        return False
    kinds = set()
    for f in fails:
        if f['check'] == 'response_strings':
            if (f['item'] or '').startswith('placement.'):
                return False
            kinds.add('strings')
        elif f['check'] == 'response_json_paths' and \
                re.search(r'errors\[.*\]\.detail', f['item'] or ''):
            kinds.add('json_detail')
        else:
            return False
    return True


def classify_file(ctrl, kp):
    """Merge the two runs of one file."""
    tests = []
    for i, c in enumerate(ctrl):
        k = kp[i] if kp is not None and i < len(kp) else None
        t = {'name': c['name'], 'method': c['method'], 'url': c['url'],
             'control': c['outcome'], 'control_status': c.get('status')}
        if c['outcome'] != 'pass':
            t['control_failure'] = c.get('text')
        if k is not None:
            t['kubeplace'] = k['outcome']
            t['kubeplace_status'] = k.get('status')
            if k['outcome'] != 'pass':
                for key in ('text', 'failures', 'request', 'response_headers',
                            'response_body'):
                    if key in k:
                        t['kubeplace_' + key] = k[key]
        tests.append(t)
    # Classify kubeplace failures among control passes.
    earlier_real = []
    for t in tests:
        if t['control'] != 'pass' or t.get('kubeplace') in (None, 'pass'):
            continue
        kt = {'failures': t.get('kubeplace_failures'),
              'status': t.get('kubeplace_status')}
        if t['kubeplace'] == 'fail' and is_wording(kt):
            t['class'] = 'WORDING'
            continue
        t['class'] = 'REAL'
        if earlier_real:
            t['after_real_failures'] = list(earlier_real)
        if t['method'] in WRITE_METHODS:
            earlier_real.append(t['name'])
    return tests


# --------------------------------------------------------------------------

def fresh_control(started, conf):
    """Real Placement with the fixture's configuration and an empty
    database, served over HTTP."""
    from placement import deploy
    from placement.tests import fixtures as db_fixtures
    owner = next(f for f in started if hasattr(f, 'placement_db_fixture'))
    owner.placement_db_fixture.cleanUp()
    owner.placement_db_fixture = db_fixtures.Database(
        owner.conf_fixture, set_config=True)
    owner.placement_db_fixture.setUp()
    return ControlServer(deploy.loadapp(conf))


def load_into(port, state, token=None):
    client = HTTPClient('http://127.0.0.1:%d' % port, token)
    try:
        notes = replay_state(client, state)
        diff = diff_state(state, dump_state(client))
    finally:
        client.close()
    return notes, diff


def isolate(path, suite_dict, state, index, started, conf, args,
            kubeplace_bin):
    """Cascade check for test `index`: the tests before it run on real
    Placement (loaded with the fixture state), then Placement's state at that
    point is replayed into a fresh kubeplace and the test runs there, behind
    the same host:port. Returns the test's record."""
    control = fresh_control(started, conf)
    proxy = Proxy(control.port)
    holder = {}
    try:
        load_into(control.port, state)

        def before(i):
            if i != index:
                return
            c = HTTPClient('http://127.0.0.1:%d' % control.port)
            try:
                st = dump_state(c)
            finally:
                c.close()
            kp = KubeplaceServer(kubeplace_bin, args.kubeplace_log,
                                 roles_from_headers=is_policy_file(path),
                                 extra=file_settings(path))
            holder['kp'] = kp
            try:
                notes, diff = load_into(kp.port, st,
                                        settings_token(file_settings(path)))
                holder['notes'] = notes + diff
            except ReplayError as exc:
                holder['notes'] = ['replay failed: %s' % exc]
            proxy.backend_port = kp.port

        res = run_gabbit(path, suite_dict, '127.0.0.1', proxy.port,
                         before_test=before, upto=index)
    finally:
        proxy.stop()
        control.stop()
        if 'kp' in holder:
            holder['kp'].stop()
    rec = res[index]
    out = {'outcome': rec['outcome'], 'status': rec.get('status')}
    if rec['outcome'] != 'pass':
        out['failures'] = rec.get('failures')
        out['wording'] = is_wording(rec)
        if not rec.get('failures'):
            out['text'] = rec.get('text')
    if holder.get('notes'):
        out['replay_notes'] = holder['notes']
    return out


def run_file(path, args, fixtures_mod, kubeplace_bin):
    from gabbi import utils as gutils
    from placement import deploy

    rec = {'file': os.path.basename(path)}
    suite_dict = gutils.load_yaml(yaml_file=path, safe=True)
    names = suite_dict.get('fixtures') or []
    rec['fixtures'] = names
    fixtures = [getattr(fixtures_mod, n)() for n in names]
    started = []
    t0 = time.time()
    try:
        for f in fixtures:
            f.__enter__()
            started.append(f)
        conf = fixtures_mod.CONF
        state = dump_state(WSGIClient(deploy.loadapp(conf)))
        rec['state'] = {'providers': len(state['providers']),
                        'consumers': len(state['consumers']),
                        'custom_traits': len(state['traits']),
                        'custom_resource_classes':
                            len(state['resource_classes'])}
        rec['time_fixture'] = round(time.time() - t0, 2)

        ctrl = None
        if not args.no_control:
            t1 = time.time()
            server = fresh_control(started, conf)
            try:
                notes, diff = load_into(server.port, state)
                rec['replay_notes_control'] = notes
                rec['replay_diff_control'] = diff
                ctrl = run_gabbit(path, suite_dict, '127.0.0.1', server.port)
            finally:
                server.stop()
            rec['time_control'] = round(time.time() - t1, 2)

        kp = None
        if not args.no_kubeplace and args.kubeplace_port:
            # Served elsewhere (`kubeplace run` over a cluster): emptied
            # through the API, written and run with --kubeplace-token.
            t2 = time.time()
            empty_placement(args.kubeplace_port, args.kubeplace_token)
            try:
                notes, diff = load_into(args.kubeplace_port, state,
                                        args.kubeplace_token)
                rec['replay_notes_kubeplace'] = notes
                rec['replay_diff_kubeplace'] = diff
            except ReplayError as exc:
                rec['replay_error_kubeplace'] = str(exc)
            REWRITE_TOKEN.update(on=True, to=args.kubeplace_token)
            try:
                kp = run_gabbit(path, suite_dict, '127.0.0.1',
                                args.kubeplace_port)
            finally:
                REWRITE_TOKEN.update(on=False, to='admin')
            rec['time_kubeplace'] = round(time.time() - t2, 2)
        elif not args.no_kubeplace:
            t2 = time.time()
            settings = file_settings(path)
            server = KubeplaceServer(kubeplace_bin, args.kubeplace_log,
                                     roles_from_headers=is_policy_file(path),
                                     extra=settings)
            try:
                try:
                    notes, diff = load_into(server.port, state,
                                            settings_token(settings))
                    rec['replay_notes_kubeplace'] = notes
                    rec['replay_diff_kubeplace'] = diff
                except ReplayError as exc:
                    rec['replay_error_kubeplace'] = str(exc)
                REWRITE_TOKEN['on'] = args.kubeplace_admin_token
                try:
                    kp = run_gabbit(path, suite_dict, '127.0.0.1',
                                    server.port)
                finally:
                    REWRITE_TOKEN['on'] = False
            finally:
                server.stop()
            rec['time_kubeplace'] = round(time.time() - t2, 2)

        if ctrl is None:
            # No control: take kubeplace's run as the list of tests, every
            # control outcome unknown.
            ctrl = [dict(t, outcome='unknown') for t in (kp or [])]
        rec['tests'] = classify_file(ctrl, kp)

        if args.cascade_check and ctrl and kp:
            t3 = time.time()
            for i, t in enumerate(rec['tests']):
                if t.get('class') != 'REAL':
                    continue
                try:
                    iso = isolate(path, suite_dict, state, i, started, conf,
                                  args, kubeplace_bin)
                except Exception as exc:  # noqa
                    iso = {'outcome': 'error', 'text': repr(exc)}
                t['isolated'] = iso
                if iso['outcome'] == 'pass':
                    t['class'] = 'CASCADE'
                elif iso['outcome'] == 'fail' and iso.get('wording'):
                    t['class'] = 'CASCADE'
                    t['cascade_note'] = ('with the control\'s state it fails '
                                         'on wording only')
            rec['time_cascade_check'] = round(time.time() - t3, 2)
    finally:
        for f in reversed(started):
            f.__exit__(None, None, None)
    return rec


def summarize(files):
    rows = []
    tot = dict(tests=0, control=0, kp=0, wording=0, cascade=0, real=0,
               ctrl_fail=0)
    for f in files:
        ts = f.get('tests', [])
        ctrl_pass = [t for t in ts if t['control'] == 'pass']
        kp_pass = [t for t in ctrl_pass if t.get('kubeplace') == 'pass']
        wording = [t for t in ctrl_pass if t.get('class') == 'WORDING']
        real = [t for t in ctrl_pass if t.get('class') == 'REAL']
        cascade = [t for t in ctrl_pass if t.get('class') == 'CASCADE']
        row = dict(file=f['file'], tests=len(ts), control=len(ctrl_pass),
                   kp=len(kp_pass), wording=len(wording),
                   cascade=len(cascade), real=len(real),
                   ctrl_fail=len(ts) - len(ctrl_pass))
        rows.append(row)
        for k in tot:
            tot[k] += row[k]
    return rows, tot


POLICY_FILE = re.compile(r'-(policy|legacy-rbac|secure-rbac)\.yaml$')


def is_policy_file(path):
    """One of the 27 files of Placement's policies, which drive roles through
    headers."""
    return bool(POLICY_FILE.search(os.path.basename(path)))


def totals(rows):
    tot = dict(tests=0, control=0, kp=0, wording=0, cascade=0, real=0,
               ctrl_fail=0)
    for r in rows:
        for k in tot:
            tot[k] += r[k]
    return tot


def rate_line(label, tot):
    c = tot['control'] or 1
    return ('%s: kubeplace passes / control passes %d/%d = %.1f%%; counting '
            'wording-only failures as passes %d/%d = %.1f%% (failures: '
            '%d wording-only, %d cascades, %d real)' % (
                label, tot['kp'], tot['control'], 100.0 * tot['kp'] / c,
                tot['kp'] + tot['wording'], tot['control'],
                100.0 * (tot['kp'] + tot['wording']) / c,
                tot['wording'], tot['cascade'], tot['real']))


def print_table(rows, tot, out=sys.stdout):
    print('| file | tests | control passes | kubeplace passes (of those) | '
          'wording-only | cascades | real | control fails |', file=out)
    print('|---|---:|---:|---:|---:|---:|---:|---:|', file=out)
    for r in rows + [dict(tot, file='**total**')]:
        print('| %s | %d | %d | %d | %d | %d | %d | %d |' % (
            r['file'], r['tests'], r['control'], r['kp'], r['wording'],
            r['cascade'], r['real'], r['ctrl_fail']), file=out)
    core = totals([r for r in rows if not POLICY_FILE.search(r['file'])])
    pol = totals([r for r in rows if POLICY_FILE.search(r['file'])])
    print('', file=out)
    print(rate_line('all files', tot), file=out)
    print(rate_line('without the 27 policy/RBAC files', core), file=out)
    print(rate_line('the policy/RBAC files alone', pol), file=out)


def main():
    reexec_in_venv()
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--files', nargs='*',
                    help='gabbit file names (default: all)')
    ap.add_argument('--kubeplace', default=os.path.join(HERE, '..', '..', 'target', 'debug', 'kubeplace'))
    ap.add_argument('--out', default=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'kubeplace-gabbi-results.json'))
    ap.add_argument('--kubeplace-log',
                    default=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'kubeplace-gabbi-serve.log'))
    ap.add_argument('--no-control', action='store_true')
    ap.add_argument('--no-kubeplace', action='store_true')
    ap.add_argument('--kubeplace-admin-token', action='store_true',
                    help='diagnosis: send every token to kubeplace as admin '
                    '(shows what the token wall hides; the tests expecting '
                    'a 403 then fail)')
    ap.add_argument('--kubeplace-port', type=int,
                    help='run against kubeplace already serving on '
                    '127.0.0.1:PORT (`kubeplace run --placement-addr`) '
                    'instead of a `placement serve` of its own; implies '
                    '--no-cascade-check')
    ap.add_argument('--kubeplace-token',
                    help='with --kubeplace-port: the token every request '
                    'to kubeplace carries')
    ap.add_argument('--no-cascade-check', dest='cascade_check',
                    action='store_false',
                    help='do not re-run each real failure from the '
                    'control\'s state (faster; cascades are then counted as '
                    'real)')
    args = ap.parse_args()
    if args.kubeplace_port:
        if not args.kubeplace_token:
            sys.exit('--kubeplace-port needs --kubeplace-token')
        args.cascade_check = False

    # The fixtures' logging fixture captures Placement's logs (else they go to
    # stderr).
    os.environ['OS_LOG_CAPTURE'] = '1'
    import placement
    from placement.tests.functional.fixtures import gabbits as fixtures_mod
    install_gabbi_hooks()
    # The fixtures' log capture swallows Placement's logs; keep stderr quiet
    # of gabbi's warnings about file names too.
    import warnings
    warnings.simplefilter('ignore')

    gdir = os.path.join(os.path.dirname(placement.__file__),
                        'tests', 'functional', 'gabbits')
    paths = sorted(glob.glob(os.path.join(gdir, '*.yaml')))
    if args.files:
        want = set(os.path.basename(f) for f in args.files)
        paths = [p for p in paths if os.path.basename(p) in want]
        missing = want - set(os.path.basename(p) for p in paths)
        if missing:
            sys.exit('no such gabbit: %s' % ', '.join(sorted(missing)))
    kubeplace_bin = os.path.abspath(args.kubeplace)
    if not args.no_kubeplace and not os.access(kubeplace_bin, os.X_OK):
        sys.exit('no kubeplace binary at %s' % kubeplace_bin)
    open(args.kubeplace_log, 'wb').close()

    files = []
    start = time.time()
    for n, path in enumerate(paths, 1):
        t = time.time()
        try:
            rec = run_file(path, args, fixtures_mod, kubeplace_bin)
        except Exception as exc:  # noqa: a harness error fails its file only
            import traceback
            rec = {'file': os.path.basename(path), 'tests': [],
                   'harness_error': traceback.format_exc()[-3000:]}
            print('  HARNESS ERROR: %s' % exc, file=sys.stderr)
        rec['time'] = round(time.time() - t, 2)
        files.append(rec)
        rows, _ = summarize([rec])
        r = rows[0]
        print('[%2d/%d] %-45s %3d tests, control %3d, kubeplace %3d '
              '(wording %d, cascade %d, real %d) %.1fs' % (
                  n, len(paths), rec['file'], r['tests'], r['control'],
                  r['kp'], r['wording'], r['cascade'], r['real'],
                  rec['time']),
              file=sys.stderr, flush=True)

    rows, tot = summarize(files)
    result = {
        'placement': '16.0.0',
        'kubeplace': kubeplace_bin,
        'kubeplace_mtime': time.strftime(
            '%Y-%m-%dT%H:%M:%SZ', time.gmtime(os.path.getmtime(kubeplace_bin)))
        if os.path.exists(kubeplace_bin) else None,
        'elapsed_seconds': round(time.time() - start, 1),
        'summary': {'files': rows, 'total': tot},
        'files': files,
    }
    with open(args.out, 'w') as fh:
        json.dump(result, fh, indent=1, sort_keys=False)
    print_table(rows, tot)
    print('\n%d files in %.0f s; results in %s' % (
        len(files), time.time() - start, args.out))


if __name__ == '__main__':
    main()
