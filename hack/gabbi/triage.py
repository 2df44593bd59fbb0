#!/usr/bin/env python3
"""Sort run.py's failures into distinct kubeplace defects.

Reads results.json (run.py's output), tags every kubeplace failure among the
control's passes that is not wording-only with a defect id (REAL failures
and CASCADEs alike; a cascade is tagged with the defect of the write that
caused it), adds a `defects` list to the file and prints it as Markdown,
ordered by how many tests each defect breaks. The rules below were written
from one run's answers (27 Nov 2026); a failure no rule matches is listed as
UNSORTED so that a new difference shows up instead of hiding in a bucket.

    hack/gabbi/triage.py [RESULTS.json]
"""

import json
import re
import sys

POLICY_FILE = re.compile(r'-(policy|legacy-rbac|secure-rbac)\.yaml$')

DEFECTS = [
    ('auth-token',
     'Only the one `--token` is accepted: any other token (`user`, '
     '`admin:admin`, with or without `x-roles`) is a 403 before anything '
     'else, where Placement\'s noauth2 takes every token as a user (and '
     '`user:project`), lets its policy decide by role, and answers 405/406/'
     'OPTIONS before any policy',
     'GET /resource_providers with `x-auth-token: user`, `x-roles: admin` '
     '(secure RBAC) or an open policy; `x-auth-token: admin:admin`; '
     'OPTIONS / or POST / with `x-auth-token: user`',
     'the policy\'s answer (200/201/204 for an allowed role, 403 '
     '`{"errors": [...]}` otherwise); 406 for a bad microversion, 405 for '
     'POST /',
     '403 `{"code": "403 Forbidden", "message": "The X-Auth-Token sent is '
     'not the token this server accepts."}`'),
    ('post-inventory-generation',
     'POST /resource_providers/{uuid}/inventories without '
     '`resource_provider_generation` is refused',
     'POST /resource_providers/{uuid}/inventories {"resource_class": '
     '"DISK_GB", "total": 2048, ...} (any microversion)',
     '201, `Location: .../inventories/DISK_GB`, the inventory and the new '
     '`resource_provider_generation`; 409 "Update conflict" when the class '
     'is already there',
     '400 "JSON does not validate: \\"resource_provider_generation\\" is a '
     'required property"'),
    ('rc-rename',
     'PUT /resource_classes/{name} with a body at 1.2-1.6 (rename a custom '
     'class) is not served',
     'PUT /resource_classes/CUSTOM_IRON_NFV {"name": "CUSTOM_NFV_BAR"} at '
     '1.6 (also bodiless, a standard class, a taken name, extra fields, a '
     '256-character name)',
     '200 with the renamed class; 400 for a bad body / a standard class; '
     '409 for a taken name',
     '405 "The method PUT is not allowed for this resource."'),
    ('error-codes',
     'Error `code`s: Placement\'s specific codes are answered as '
     '`placement.undefined_code`',
     'GET /allocation_candidates?resources=VCPU:1&root_required=A,!A '
     '(1.35), repeated root_required, resourceless groups without '
     'same_subtree, a bad same_subtree (1.36); POST /reshaper to an '
     'unknown provider',
     '`placement.query.bad_value`, `placement.query.duplicate_key`, '
     '`placement.query.missing_value`, `placement.resource_provider.'
     'not_found`',
     '`placement.undefined_code` (status and title the same)'),
    ('generation-before-schema',
     'A stale generation is reported before the body is validated: '
     'Placement validates the JSON body first',
     'PUT /resource_providers/{uuid}/inventories with a stale generation '
     'and total 2147483648; PUT/POST /allocations with consumer_type '
     '"instance" and a stale consumer_generation; POST /reshaper at 1.38 '
     'without consumer_type (or with it at 1.36, or mappings at 1.33) and '
     'a stale generation',
     '400 "JSON does not validate: ..."',
     '409 placement.concurrent_update'),
    ('accept',
     'Accept negotiation: an Accept without application/json is served '
     'JSON, and errors for a client accepting text/html are JSON',
     'GET /resource_providers with `Accept: text/plain` (or '
     '`text/html,application/xhtml+xml,application/xml;q=0.9`); GET '
     '/{unknown} or a bad microversion with `Accept: text/html`',
     '406 "Only application/json is provided"; errors with '
     '`Content-Type: text/html`',
     '200 JSON; errors as application/json'),
    ('consumer-type-unknown',
     'A consumer written without a consumer type (before 1.38) reads as '
     '`INSTANCE` instead of `unknown`',
     'PUT /allocations/{c} at 1.37 then GET /allocations/{c} at 1.38; '
     'GET /usages?project_id=P (1.38); &consumer_type=unknown',
     '`"consumer_type": "unknown"`; usages grouped under `unknown`',
     '`INSTANCE`; no `unknown` group'),
    ('cors',
     'CORS: Placement with `[cors] allowed_origin` answers preflight '
     'OPTIONS and adds Access-Control-* headers (run.py serves the CORS '
     'files with the same settings as --cors-* flags)',
     'OPTIONS / with Origin and Access-Control-Request-Method; GET / with '
     'Origin',
     '200 with access-control-allow-origin/-headers',
     'no CORS headers (and 403 for the token `user`)'),
    ('mappings-validation',
     '`mappings` in a bad form or empty is accepted',
     'PUT /allocations/{c} at 1.34 with "mappings": {"alpha": "beta"} ... '
     'or "mappings": {}',
     '400 "JSON does not validate"',
     '204 (the allocation is written)'),
    ('reserved-equals-total',
     'reserved == total is accepted below 1.26',
     'PUT /resource_providers/{uuid}/inventories (and .../IPV4_ADDRESS) '
     'with total 253, reserved 253 at 1.0',
     '400 "Unable to update inventory ... reserved value is greater than '
     'or equal to total"',
     '200'),
    ('http-405',
     'A method not served on a path that exists is a 404 on / and '
     '/allocations',
     'DELETE /; GET /allocations',
     '405 with Allow',
     '404'),
    ('content-type',
     'Requests without Content-Type',
     'POST /resource_providers with a body and no Content-Type; PUT '
     '/resource_providers/{unknown uuid} with neither body nor '
     'Content-Type',
     '400 "content-type header required"; 415 "The media type None is not '
     'supported" (checked before the provider is looked up)',
     '415; 404'),
    ('forbidden-body',
     'A 403 body is not `{"errors": [...]}`',
     'GET /resource_providers with `x-auth-token: user` (default policy)',
     '403 {"errors": [{"status": 403, "title": "Forbidden", ...}]}',
     '403 {"code": "403 Forbidden", "message": ..., "title": ...}'),
    ('rc-put-location',
     'PUT /resource_classes/{name} at 1.7 answers without `Location`',
     'PUT /resource_classes/CUSTOM_COW at 1.7 (new: 201; existing: 204)',
     '`Location: .../resource_classes/CUSTOM_COW` on both',
     'no Location'),
    ('cache-headers-204',
     '204 answers at 1.15+ lack Cache-Control and Last-Modified',
     'GET /traits/CUSTOM_TRAIT_1 and PUT /traits/CUSTOM_TRAIT_1 at 1.15',
     '`cache-control: no-cache` and `last-modified`',
     'neither'),
    ('trait-order',
     'Trait lists are in name order; Placement lists them in trait id '
     'order (standard traits, then custom ones in creation order)',
     'GET /allocation_candidates?...&root_required=COMPUTE_VOLUME_MULTI_'
     'ATTACH (1.35): provider_summaries[NUMA1].traits (also GET '
     '/traits, GET /resource_providers/{uuid}/traits)',
     '["HW_NUMA_ROOT", "CUSTOM_FOO"]',
     '["CUSTOM_FOO", "HW_NUMA_ROOT"]'),
    ('aggregates-order',
     'PUT /resource_providers/{uuid}/aggregates answers the aggregates '
     'sorted, not as sent',
     'PUT .../aggregates {"aggregates": [f918..., a893...], '
     '"resource_provider_generation": 0}',
     'the list as sent', 'sorted'),
    ('aggregates-duplicates',
     'Duplicate aggregate uuids in PUT .../aggregates are accepted',
     'PUT .../aggregates {"aggregates": [A, A], ...} (1.19+)',
     '400 "has non-unique elements"', '200, deduplicated'),
    ('group-policy-twice',
     '`group_policy` given twice: Placement takes the first',
     'GET /allocation_candidates?resources1=VCPU:1&resources2=MEMORY_MB:'
     '1024&group_policy=isolate&group_policy=none (1.25)',
     '3 candidates (isolate)', '0 candidates'),
]
TITLES = {d[0]: d for d in DEFECTS}


def failure_text(t):
    """What the failure says: for a REAL failure, its re-run from the
    control's state (the cascade check) when there is one, so that a test
    an earlier failure also disturbed is sorted by its own cause."""
    iso = t.get('isolated') or {}
    if t['class'] == 'REAL' and iso.get('failures'):
        src = iso['failures']
    else:
        src = t.get('kubeplace_failures') or []
    parts = ['%s %s %s' % (f['check'], f['item'], f['message']) for f in src]
    if not (t['class'] == 'REAL' and iso.get('failures')):
        parts.append(t.get('kubeplace_response_body') or '')
    return '\n'.join(parts)


def classify(fname, t):
    name = t['name']
    text = failure_text(t)
    req = t.get('kubeplace_request') or {}
    headers = {k.lower(): v for k, v in (req.get('headers') or {}).items()}
    url = t['url']
    if POLICY_FILE.search(fname):
        return 'auth-token'
    if fname == 'cors.yaml':
        return 'cors'
    if 'The X-Auth-Token sent is not the token' in text:
        if t.get('control_status') == 403:
            return 'forbidden-body'
        return 'auth-token'
    if t['class'] == 'CASCADE':
        return {'allocations.yaml': 'post-inventory-generation',
                'allocations-1-8.yaml': 'post-inventory-generation',
                'inventory.yaml': 'post-inventory-generation',
                'resource-classes.yaml': 'rc-rename',
                'allocations-mappings.yaml': 'mappings-validation'}.get(
                    fname, 'UNSORTED')
    if 'resource_provider_generation\\" is a required property' in text \
            and t['method'] == 'POST' and url.endswith('/inventories'):
        return 'post-inventory-generation'
    if url.startswith('/resource_classes/') and t['method'] == 'PUT':
        if "location' header not present" in text:
            return 'rc-put-location'
        if 'The method PUT is not allowed' in text:
            return 'rc-rename'
    if re.search(r"'placement\.(query|resource_provider)\.[a-z_.]+' != "
                 r"'placement\.undefined_code'", text):
        return 'error-codes'
    if 'zero capacity old microversion' in name:
        return 'reserved-equals-total'
    if name.startswith('put allocation mapping'):
        return 'mappings-validation'
    if t.get('control_status') == 400 and 'concurrent_update' in text:
        return 'generation-before-schema'
    if t.get('control_status') == 400 and \
            'is not the current one' in text:
        return 'generation-before-schema'
    if 'mapping' in name:
        return 'mappings-validation'
    if ('consumer_type' in text or url.startswith('/usages')) and \
            ('unknown' in text or 'INSTANCE' in text):
        return 'consumer-type-unknown'
    if t.get('control_status') == 406 or 'text/html' in text:
        return 'accept'
    if t.get('control_status') == 405:
        return 'http-405'
    if 'content-type' in name or 'no body' in name:
        return 'content-type'
    if 'zero capacity old microversion' in name:
        return 'reserved-equals-total'
    if "'cache-control' header not present" in text:
        return 'cache-headers-204'
    if url.startswith('/allocation_candidates') and 'traits' in text and \
            'Lists differ' in text:
        return 'trait-order'
    if 'non-unique' in text:
        return 'aggregates-duplicates'
    if fname == 'aggregate.yaml' and '$.aggregates[' in text:
        return 'aggregates-order'
    if 'group_policy=isolate&group_policy=none' in url:
        return 'group-policy-twice'
    return 'UNSORTED'


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else 'results.json'
    d = json.load(open(path))
    groups = {}
    for f in d['files']:
        for t in f.get('tests', []):
            if t.get('class') not in ('REAL', 'CASCADE'):
                t.pop('defect', None)
                continue
            did = classify(f['file'], t)
            t['defect'] = did
            g = groups.setdefault(did, {'real': [], 'cascade': []})
            g['real' if t['class'] == 'REAL' else 'cascade'].append(
                '%s: %s' % (f['file'], t['name']))
    order = sorted(groups, key=lambda k: -(len(groups[k]['real']) +
                                           len(groups[k]['cascade'])))
    d['defects'] = []
    for n, did in enumerate(order, 1):
        g = groups[did]
        info = TITLES.get(did, (did, 'not sorted yet', '', '', ''))
        d['defects'].append({
            'id': did, 'title': info[1], 'request': info[2],
            'placement': info[3], 'kubeplace': info[4],
            'tests': len(g['real']) + len(g['cascade']),
            'real': g['real'], 'cascades': g['cascade']})
        files = {}
        for x in g['real'] + g['cascade']:
            fn = x.split(': ', 1)[0]
            files[fn] = files.get(fn, 0) + 1
        print('%d. **%s** (`%s`): %d tests (%d direct, %d cascades)' % (
            n, info[1], did, len(g['real']) + len(g['cascade']),
            len(g['real']), len(g['cascade'])))
        print('   - request: %s' % info[2])
        print('   - Placement: %s; kubeplace: %s' % (info[3], info[4]))
        if did == 'auth-token' and len(g['real']) > 20:
            print('   - files: %s' % ', '.join(
                '%s (%d)' % kv for kv in sorted(files.items())))
        else:
            print('   - tests: %s' % '; '.join(g['real']))
            if g['cascade']:
                print('   - cascades: %s' % '; '.join(g['cascade']))
    with open(path, 'w') as fh:
        json.dump(d, fh, indent=1)


if __name__ == '__main__':
    main()
