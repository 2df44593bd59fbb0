#!/usr/bin/env python3
"""Differential test: Nova's provider config loader against `kubeplace provider-config validate`.

Run it with the Python of a virtualenv that has Nova installed (nova 34.x), from the repository
root, after `cargo build`:

    VENV/bin/python hack/provider-config-differential.py [--kubeplace target/debug/kubeplace]
        [--random 400] [--seed 5] [--verbose]

For each generated directory of provider config files (hand-written cases for every rule, then
random mutations of a good file, seeded), it runs Nova's
`nova.compute.provider_config.get_provider_configs(DIR)` and
`kubeplace provider-config validate -o json DIR`, and compares:

- the verdict: Nova loads the directory  <=>  kubeplace exits 0;
- when both load: the identifications and, for each, the traits and the inventories it adds
  (Nova's list of one-class maps flattened, later items winning, Placement's defaults filled in).

Cases where kubeplace is documented to be stricter than Nova's loader (docs/provider-config.md,
"Differences from Nova") are tagged; a disagreement on such a case is counted as a documented
difference, not as a failure. The script exits 1 when any undocumented disagreement remains.
"""

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile

import yaml

logging.disable(logging.CRITICAL)

from nova.compute import provider_config as nova_pc  # noqa: E402

DEFAULTS = {"reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1,
            "allocation_ratio": 1.0}
UUID = "aa884151-b4e2-4e82-9fd4-81cfcd01abb9"
UUID2 = "5213b75d-9260-42a6-b236-f39b0fd10561"


def doc(providers, version="1.0", **extra):
    d = {"meta": {"schema_version": version}, "providers": providers}
    d.update(extra)
    return d


def prov(ident, inv=None, traits=None, **extra):
    p = {"identification": ident}
    if inv is not None:
        p["inventories"] = {"additional": inv}
    if traits is not None:
        p["traits"] = {"additional": traits}
    p.update(extra)
    return p


GOOD = prov({"name": "cn1"}, [{"CUSTOM_LLC": {"total": 22, "reserved": 2, "max_unit": 11}}],
            ["CUSTOM_P_STATE"])


def y(data):
    return yaml.safe_dump(data, sort_keys=False)


# name -> (files {filename: text or None for a directory}, stricter-reason or None)
def handwritten():
    c = {}

    def case(name, files, stricter=None):
        c[name] = (files, stricter)

    # Version rules.
    case("version 1.0", {"a.yaml": y(doc([GOOD]))})
    case("version 1.1 loads", {"a.yaml": y(doc([GOOD], "1.1"))})
    case("version 1.10 loads", {"a.yaml": y(doc([GOOD], "1.10"))})
    case("version 1.05", {"a.yaml": y(doc([GOOD], "1.05"))})
    case("version 2.0", {"a.yaml": y(doc([GOOD], "2.0"))})
    case("version 0.9", {"a.yaml": y(doc([GOOD], "0.9"))})
    case("version 99.99", {"a.yaml": y(doc([GOOD], "99.99"))})
    case("version unquoted float", {"a.yaml": "meta:\n  schema_version: 1.0\nproviders: []\n"})
    case("version 1", {"a.yaml": y(doc([GOOD], "1"))})
    case("version null", {"a.yaml": y(doc([GOOD], None))})
    case("version with space", {"a.yaml": y(doc([GOOD], " 1.0"))})
    case("no meta", {"a.yaml": y({"providers": [GOOD]})})
    case("meta empty", {"a.yaml": y({"meta": {}, "providers": [GOOD]})})
    case("meta only", {"a.yaml": y({"meta": {"schema_version": "1.0"}})})
    case("empty file", {"a.yaml": ""})
    case("comment only", {"a.yaml": "# nothing\n"})
    case("top-level list", {"a.yaml": "- meta: {}\n"})
    case("two documents", {"a.yaml": y(doc([GOOD])) + "---\n" + y(doc([]))})
    case("__source_file set", {"a.yaml": y(doc([GOOD], __source_file="x"))})
    case("__source_file null", {"a.yaml": y(doc([GOOD], __source_file=None))})
    case("unknown top-level field", {"a.yaml": y(doc([GOOD], extra_field=1))})
    case("unknown meta field", {"a.yaml": y({"meta": {"schema_version": "1.0", "x": 1}, "providers": [GOOD]})})
    case("providers null", {"a.yaml": y(doc(None))})
    case("providers mapping", {"a.yaml": y(doc({"a": 1}))})
    # Identification.
    case("by uuid", {"a.yaml": y(doc([prov({"uuid": UUID}, traits=["CUSTOM_A"])]))})
    case("by upper-case uuid", {"a.yaml": y(doc([prov({"uuid": UUID.upper()}, traits=["CUSTOM_A"])]))})
    case("magic uuid", {"a.yaml": y(doc([prov({"uuid": "$COMPUTE_NODE"}, traits=["CUSTOM_A"])]))})
    case("magic as name", {"a.yaml": y(doc([prov({"name": "$COMPUTE_NODE"}, traits=["CUSTOM_A"])]))})
    case("bad uuid", {"a.yaml": y(doc([prov({"uuid": "not quite a uuid"}, traits=["CUSTOM_A"])]))})
    case("uuid without hyphens", {"a.yaml": y(doc([prov({"uuid": UUID.replace("-", "")}, traits=["CUSTOM_A"])]))})
    case("null uuid", {"a.yaml": y(doc([prov({"uuid": None}, traits=["CUSTOM_A"])]))})
    case("empty name", {"a.yaml": y(doc([prov({"name": ""}, traits=["CUSTOM_A"])]))})
    case("null name", {"a.yaml": y(doc([prov({"name": None}, traits=["CUSTOM_A"])]))})
    case("numeric name", {"a.yaml": y(doc([prov({"name": 5}, traits=["CUSTOM_A"])]))})
    case("name 200 chars", {"a.yaml": y(doc([prov({"name": "n" * 200}, traits=["CUSTOM_A"])]))})
    case("name 201 chars", {"a.yaml": y(doc([prov({"name": "n" * 201}, traits=["CUSTOM_A"])]))})
    case("name and uuid", {"a.yaml": y(doc([prov({"name": "n", "uuid": UUID}, traits=["CUSTOM_A"])]))})
    case("identification empty", {"a.yaml": y(doc([prov({}, traits=["CUSTOM_A"])]))})
    case("identification null", {"a.yaml": y(doc([prov(None, traits=["CUSTOM_A"])]))})
    case("identification other key", {"a.yaml": y(doc([prov({"hostname": "n"}, traits=["CUSTOM_A"])]))})
    case("no identification", {"a.yaml": y(doc([{"traits": {"additional": ["CUSTOM_A"]}}]))})
    case("provider not a mapping", {"a.yaml": y(doc(["cn1"]))})
    case("unknown provider field", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A"], aggregates=[UUID])]))})
    # Inventories.
    case("inventory full", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {
        "total": 100, "reserved": 0, "min_unit": 1, "max_unit": 10, "step_size": 1,
        "allocation_ratio": 1.0}}])]))})
    case("inventory no total", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {}}])]))})
    case("inventory total string", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": "x"}}])]))})
    case("inventory total 1.0", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1.0}}])]))})
    case("inventory total 1.5", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1.5}}])]))})
    case("inventory total bool", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": True}}])]))})
    case("inventory ratio string", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1, "allocation_ratio": "2"}}])]))})
    case("inventory ratio int", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1, "allocation_ratio": 2}}])]))})
    case("inventory unknown field", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1, "additional_property": 2}}])]))})
    case("inventory standard class", {"a.yaml": y(doc([prov({"name": "n"}, [{"VCPU": {"total": 1}}])]))})
    case("inventory one good one standard", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1}}, {"MEMORY_MB": {"total": 1}}])]))})
    case("inventory lower-case class", {"a.yaml": y(doc([prov({"name": "n"}, [{"custom_x": {"total": 1}}])]))})
    case("inventory class with symbols", {"a.yaml": y(doc([prov({"name": "n"}, [{"INVALID_!@#": {"total": 1}}])]))})
    case("inventory two classes in one item", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1}, "CUSTOM_Y": {"total": 2}}])]))})
    case("inventory class twice, last wins", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 1}}, {"CUSTOM_X": {"total": 3}}])]))})
    case("inventory empty item", {"a.yaml": y(doc([prov({"name": "n"}, [{}])]))})
    case("inventory empty list", {"a.yaml": y(doc([prov({"name": "n"}, [])]))})
    case("inventory unknown adjective", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A"], ) | {"inventories": {"invalid_adjective": [{"CUSTOM_X": {"total": 1}}]}}]))})
    case("inventory additional not a list", {"a.yaml": y(doc([prov({"name": "n"}, {"CUSTOM_X": {"total": 1}})]))})
    case("inventory item is a number", {"a.yaml": y(doc([prov({"name": "n"}, [5])]))})
    case("inventory item is a class name", {"a.yaml": y(doc([prov({"name": "n"}, ["CUSTOM_X"])]))})
    case("inventories null", {"a.yaml": y(doc([{"identification": {"name": "n"}, "inventories": None}]))})
    # Documented: kubeplace applies Placement's inventory rules and names at load time.
    case("inventory total 0", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 0}}])]))}, "bounds")
    case("inventory total negative", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": -5}}])]))}, "bounds")
    case("inventory total above int32", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 2**31}}])]))}, "bounds")
    case("inventory reserved above total", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 4, "reserved": 8}}])]))}, "bounds")
    case("inventory min above max", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 4, "min_unit": 4, "max_unit": 2}}])]))}, "bounds")
    case("inventory ratio 0", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_X": {"total": 4, "allocation_ratio": 0}}])]))}, "bounds")
    case("inventory class CUSTOM_", {"a.yaml": y(doc([prov({"name": "n"}, [{"CUSTOM_": {"total": 1}}])]))}, "names")
    case("inventory item empty string", {"a.yaml": y(doc([prov({"name": "n"}, [""])]))}, "items")
    case("inventory item empty list", {"a.yaml": y(doc([prov({"name": "n"}, [[]])]))}, "items")
    # Traits.
    case("traits custom", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A", "CUSTOM_B"])]))})
    case("traits standard", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A", "HW_CPU_X86_AVX2"])]))})
    case("traits lower-case", {"a.yaml": y(doc([prov({"name": "n"}, traits=["custom_a"])]))})
    case("traits symbols", {"a.yaml": y(doc([prov({"name": "n"}, traits=["INVALID_TRAIT_!@#"])]))})
    case("traits mapping item", {"a.yaml": y(doc([prov({"name": "n"}, traits=[{"TRAIT1": "invalid"}])]))})
    case("traits number item", {"a.yaml": y(doc([prov({"name": "n"}, traits=[5])]))})
    case("traits repeated", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A", "CUSTOM_A"])]))})
    case("traits empty list", {"a.yaml": y(doc([prov({"name": "n"}, traits=[])]))})
    case("traits unknown adjective", {"a.yaml": y(doc([{"identification": {"name": "n"}, "traits": {"invalid": ["CUSTOM_A"]}}]))})
    case("traits CUSTOM_", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_"])]))}, "names")
    # Duplicates and dropping.
    case("no-op provider kept alone", {"a.yaml": y(doc([prov({"name": "n"})]))})
    case("duplicate in one file", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A"]), prov({"name": "n"}, traits=["CUSTOM_B"])]))})
    case("duplicate with a no-op entry", {"a.yaml": y(doc([prov({"name": "n"}), prov({"name": "n"}, traits=["CUSTOM_B"])]))})
    case("duplicate across files", {"a.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_A"])])),
                                    "b.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_B"])]))})
    case("duplicate across files, one no-op", {"a.yaml": y(doc([prov({"name": "n"}, traits=[])])),
                                               "b.yaml": y(doc([prov({"name": "n"}, traits=["CUSTOM_B"])]))})
    case("duplicate magic across files", {"a.yaml": y(doc([prov({"uuid": "$COMPUTE_NODE"}, traits=["CUSTOM_A"])])),
                                          "b.yaml": y(doc([prov({"name": "$COMPUTE_NODE"}, traits=["CUSTOM_B"])]))})
    case("name equal to a uuid string", {"a.yaml": y(doc([prov({"uuid": UUID}, traits=["CUSTOM_A"])])),
                                         "b.yaml": y(doc([prov({"name": UUID}, traits=["CUSTOM_B"])]))})
    case("uuid cases differ", {"a.yaml": y(doc([prov({"uuid": UUID}, traits=["CUSTOM_A"])])),
                               "b.yaml": y(doc([prov({"uuid": UUID.upper()}, traits=["CUSTOM_B"])]))})
    case("explicit and magic together", {"a.yaml": y(doc([prov({"uuid": "$COMPUTE_NODE"}, traits=["CUSTOM_A"]),
                                                          prov({"uuid": UUID}, traits=["CUSTOM_B"]),
                                                          prov({"name": "cn1"}, [{"CUSTOM_X": {"total": 2}}])]))})
    # Directory rules.
    case("empty directory", {})
    case("only other extensions", {"a.yml": y(doc([GOOD])), "b.json": "{}", "c.YAML": "x: ["})
    case("bad file with other extension is ignored", {"a.yaml": y(doc([GOOD])), "b.yml": "meta: [\n"})
    case("hidden file ignored", {"a.yaml": y(doc([GOOD])), ".b.yaml": "not: [valid\n"})
    case("hidden duplicate ignored", {"a.yaml": y(doc([GOOD])), ".b.yaml": y(doc([GOOD]))})
    case("subdirectory ignored", {"a.yaml": y(doc([GOOD])), "sub/b.yaml": "meta: [\n"})
    case("directory named .yaml", {"a.yaml": y(doc([GOOD])), "d.yaml/x": "x"})
    case("order across files", {"b.yaml": y(doc([prov({"name": "n2"}, traits=["CUSTOM_B"])])),
                                "a.yaml": y(doc([prov({"name": "n1"}, traits=["CUSTOM_A"])])),
                                "10.yaml": y(doc([prov({"name": "n0"}, traits=["CUSTOM_C"])]))})
    case("syntax error", {"a.yaml": "meta: [\n"})
    case("one bad file among good", {"a.yaml": y(doc([GOOD])), "b.yaml": y(doc([prov({"name": "n"}, traits=["VCPU"])]))})
    # YAML 1.1 plain scalars, as Nova's YAML library reads them.
    head = "meta:\n  schema_version: '1.0'\nproviders:\n- identification:\n    name: "
    tail = "\n  traits:\n    additional: [CUSTOM_A]\n"
    for scalar in ["n", "y", "yes", "No", "on", "OFF", "~", "null", "2020-01-01", "12", "0x1F",
                   "1e3", "1.5", "'yes'", '"on"', "|-\n      yes", "cn1 # a comment"]:
        case(f"yaml 1.1 name {scalar!r}", {"a.yaml": head + scalar + tail})
    inv = "meta:\n  schema_version: \"1.0\"\nproviders:\n- identification:\n    name: cn1\n  inventories:\n    additional:\n    - CUSTOM_X:\n        total: "
    for scalar in ["1_000", "0x10", "017", "1:30", "1e3", "1.0e+1", "'8'", "+8", "0b101"]:
        case(f"yaml 1.1 total {scalar!r}", {"a.yaml": inv + scalar + "\n"})
    case("yaml 1.1 trait ON", {"a.yaml": "meta:\n  schema_version: '1.0'\nproviders:\n- identification:\n    name: cn1\n  traits:\n    additional: [CUSTOM_A, ON]\n"})
    # Nova's own example (name: $COMPUTE_NODE).
    case("nova example", {"a.yaml": "meta:\n  schema_version: '1.0'\nproviders:\n  - identification:\n      name: '$COMPUTE_NODE'\n    inventories:\n      additional:\n        - CUSTOM_EXAMPLE_RESOURCE_CLASS:\n            total: 100\n            reserved: 0\n            min_unit: 1\n            max_unit: 10\n            step_size: 1\n            allocation_ratio: 1.0\n    traits:\n      additional:\n        - 'CUSTOM_TRAIT_ONE'\n        - 'CUSTOM_TRAIT2'\n"})
    return c


# Random mutations of a good file: (mutation, stricter-reason or None).
def mutations(rng):
    versions = [("1.0", None), ("1.1", None), ("1.7", None), ("2.0", None), ("0.1", None),
                (1.0, None), ("1", None), ("1.01", None), ("v1.0", None), (None, None)]
    idents = [({"name": "cn1"}, None), ({"name": "cn2"}, None), ({"uuid": UUID}, None),
              ({"uuid": UUID2}, None), ({"uuid": "$COMPUTE_NODE"}, None),
              ({"name": "$COMPUTE_NODE"}, None), ({"uuid": "cn1"}, None), ({"name": ""}, None),
              ({"name": "x" * 201}, None), ({"name": "cn1", "uuid": UUID}, None), ({}, None),
              ({"host": "cn1"}, None), ({"name": 7}, None)]
    classes = [("CUSTOM_LLC", None), ("CUSTOM_FPGA", None), ("VCPU", None), ("custom_x", None),
               ("CUSTOM-X", None), ("CUSTOM_", "names"), ("DISK_GB", None)]
    totals = [(1, None), (22, None), (1.0, None), (2.5, None), ("8", None), (0, "bounds"),
              (-1, "bounds"), (True, None), (None, None), (2**31, "bounds")]
    extras = [({}, None), ({"reserved": 1}, None), ({"reserved": 500}, "bounds"),
              ({"min_unit": 2, "max_unit": 1}, "bounds"), ({"step_size": 0}, "bounds"),
              ({"allocation_ratio": 16.0}, None), ({"allocation_ratio": -1}, "bounds"),
              ({"allocation_ratio": "x"}, None), ({"bogus": 1}, None), ({"max_unit": 4}, None)]
    traits = [("CUSTOM_A", None), ("CUSTOM_B", None), ("HW_CPU_X86_AVX2", None),
              ("custom_a", None), ("CUSTOM_", "names"), (3, None)]
    return versions, idents, classes, totals, extras, traits


def random_case(rng):
    versions, idents, classes, totals, extras, traits = mutations(rng)
    stricter = set()

    def pick(options):
        value, reason = rng.choice(options)
        if reason:
            stricter.add(reason)
        return value

    files = {}
    for f in range(rng.choice([1, 1, 2, 3])):
        providers = []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            p = {"identification": pick(idents)}
            if rng.random() < 0.7:
                items = []
                for _ in range(rng.choice([0, 1, 2])):
                    inv = {}
                    total = pick(totals)
                    if total is not None:
                        inv["total"] = total
                    inv.update(pick(extras))
                    items.append({pick(classes): inv})
                p["inventories"] = {"additional": items}
            if rng.random() < 0.6:
                p["traits"] = {"additional": [pick(traits) for _ in range(rng.choice([0, 1, 2]))]}
            if rng.random() < 0.05:
                p["extra"] = True
            providers.append(p)
        d = {"meta": {"schema_version": pick(versions)}, "providers": providers}
        if rng.random() < 0.05:
            del d["providers"]
        name = rng.choice(["a", "b", "c", "10", "B"]) + rng.choice([".yaml"] * 8 + [".yml", ".txt"])
        if rng.random() < 0.05:
            name = "." + name
        files[name] = y(d)
    # A provider-level stricter rule only matters if the entry is kept; tagging stays conservative.
    return files, ",".join(sorted(stricter)) or None


def write_dir(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, 0o644)


def nova(root):
    try:
        result = nova_pc.get_provider_configs(root)
    except Exception as e:  # Nova raises ProviderConfigException, and others on odd input.
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    merged = {}
    for key, p in result.items():
        invs = {}
        for item in p.get("inventories", {}).get("additional", []):
            # Nova loads items that are not maps when iterating them finds no class ("" or []).
            for rc, inv in (item.items() if isinstance(item, dict) else []):
                full = dict(DEFAULTS)
                full.update(inv)
                invs[rc] = {k: float(v) if k == "allocation_ratio" else int(v)
                            for k, v in full.items()}
        merged[key] = {"inventories": invs,
                       "traits": sorted(set(p.get("traits", {}).get("additional", [])))}
    return True, merged


def kubeplace(binary, root):
    out = subprocess.run([binary, "provider-config", "validate", "-o", "json", root],
                         capture_output=True, text=True)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        return out.returncode, None, out.stderr.strip()[:200]
    merged = {}
    for m in report["merged"]:
        merged[m["key"]] = {
            "inventories": {rc: {k: float(v) if k == "allocation_ratio" else int(v)
                                 for k, v in inv.items()}
                            for rc, inv in m["inventories"].items()},
            "traits": sorted(m["traits"]),
        }
    errors = [e["text"] for f in report["files"] for e in f["errors"]]
    return out.returncode, merged, "; ".join(errors)[:300]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeplace", default="target/debug/kubeplace")
    ap.add_argument("--random", type=int, default=400)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cases = [(n, f, s) for n, (f, s) in handwritten().items()]
    cases += [(f"random {i}", *random_case(rng)) for i in range(args.random)]
    counts = {"cases": 0, "agree": 0, "agree_valid": 0, "agree_invalid": 0,
              "documented": 0, "disagree": 0}
    failures = []
    for name, files, stricter in cases:
        root = tempfile.mkdtemp(prefix="pcdiff-")
        try:
            write_dir(root, files)
            n_ok, n_result = nova(root)
            code, k_result, k_errors = kubeplace(args.kubeplace, root)
        finally:
            shutil.rmtree(root)
        counts["cases"] += 1
        k_ok = code == 0
        same = n_ok == k_ok and (not n_ok or n_result == k_result)
        if same:
            counts["agree"] += 1
            counts["agree_valid" if n_ok else "agree_invalid"] += 1
            if args.verbose:
                print(f"agree      {name}: {'loads' if n_ok else 'refused'}")
        elif stricter and n_ok and not k_ok:
            counts["documented"] += 1
            if args.verbose:
                print(f"documented {name} ({stricter}): Nova loads; kubeplace: {k_errors}")
        else:
            counts["disagree"] += 1
            failures.append((name, files, n_ok, n_result, code, k_result, k_errors))
    for name, files, n_ok, n_result, code, k_result, k_errors in failures:
        print(f"DISAGREE {name}")
        for f, text in files.items():
            print(f"  --- {f}\n    " + (text or "").replace("\n", "\n    "))
        print(f"  nova: {'loads ' + json.dumps(n_result) if n_ok else n_result}")
        print(f"  kubeplace: exit {code}; merged {json.dumps(k_result)}; {k_errors}")
    print(json.dumps(counts))
    print(f"{counts['agree']} agree ({counts['agree_valid']} both load, "
          f"{counts['agree_invalid']} both refuse), {counts['documented']} documented "
          f"differences, {counts['disagree']} disagree, of {counts['cases']} cases")
    return 1 if counts["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
