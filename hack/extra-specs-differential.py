#!/usr/bin/env python3
"""Differential test of kubeplace's extra spec and image property checks against Nova.

Run with a Python that has nova installed (a scratch virtualenv outside the repo):

    python3 -m venv /tmp/nova && /tmp/nova/bin/pip install nova
    cargo build --release
    /tmp/nova/bin/python hack/extra-specs-differential.py [--kubeplace target/release/kubeplace]

It does three things:

1. Facts: compares kubeplace's in-tree registry (`kubeplace extra-specs facts`) with
   Nova's `validators.VALIDATORS`: the same keys, types, enums, bounds, deprecations,
   parameters and patterns (after writing Python's \\d and \\w as the ASCII classes
   kubeplace uses).
2. Extra specs: generates keys and values (every registered key with valid, boundary and
   invalid values, every bool spelling, enums with case changes and spaces, typos of keys,
   unknown namespaces) and runs each through Nova's API schema and
   `validators.validate(key, value)`, and through `kubeplace extra-specs check`. Nova has
   no modes: it accepts unknown keys outside the namespaces it knows, so kubeplace's answer
   is read the same way (an unknown key counts as rejected only in a namespace Nova knows).
3. Image properties: generates values for every `ImageMetaProps` field and older name and
   compares `ImageMetaProps.from_dict({key: value})` with `kubeplace extra-specs check --image`.

Disagreements that docs/extra-specs.md lists under "Differences from Nova" are counted
apart from unexplained ones. Exit status 1 when anything is unexplained.
"""
import argparse
import json
import re
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")

from nova.api.validation.extra_specs import validators  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.objects import image_meta  # noqa: E402

objects.register_all()

KEY_SCHEMA = re.compile(r"^[a-zA-Z0-9-_:. ]{1,255}$")
UNICODE_DIGIT = "\u0663"  # ARABIC-INDIC DIGIT THREE


def run_kubeplace(binary, pairs, image=False):
    args = [binary, "extra-specs", "check", "--json-input", "-", "-o", "json", "--mode", "strict"]
    if image:
        args.append("--image")
    proc = subprocess.run(args, input=json.dumps(pairs), capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit("kubeplace failed: " + proc.stderr)
    return json.loads(proc.stdout)["items"]


# ---------------------------------------------------------------- facts

def normalise(pattern):
    return pattern.replace(r"\d", "[0-9]").replace(r"\w", "[a-zA-Z0-9_]")


def compare_facts(binary):
    ours = json.loads(subprocess.run([binary, "extra-specs", "facts"], capture_output=True,
                                     text=True, check=True).stdout)["definitions"]
    ours = {d["key"]: d for d in ours}
    theirs = validators.VALIDATORS
    problems = []
    if set(ours) != set(theirs):
        problems.append("keys only in kubeplace: %s" % sorted(set(ours) - set(theirs)))
        problems.append("keys only in Nova: %s" % sorted(set(theirs) - set(ours)))
    type_names = {int: "integer", bool: "boolean", str: "string"}
    documented = 0
    for key in sorted(set(ours) & set(theirs)):
        o, n = ours[key], theirs[key]
        v = n.value
        if o["type"] != type_names[v["type"]]:
            problems.append(f"{key}: type {o['type']} vs {type_names[v['type']]}")
        if "enum" in v and list(o.get("enum", [])) != list(v["enum"]):
            problems.append(f"{key}: enum {o.get('enum')} vs {list(v['enum'])}")
        if v["type"] is int:
            nmin, nmax = v.get("min"), v.get("max")
            if key.startswith("resources") and nmin is None and o.get("min") == 0:
                documented += 1  # kubeplace rejects negative amounts
            elif (o.get("min"), o.get("max")) != (nmin, nmax):
                problems.append(f"{key}: bounds {o.get('min')}..{o.get('max')} vs {nmin}..{nmax}")
        if "pattern" in v and o.get("pattern") != normalise(v["pattern"]):
            problems.append(f"{key}: pattern {o.get('pattern')!r} vs {v['pattern']!r}")
        if o["deprecated"] != n.deprecated:
            problems.append(f"{key}: deprecated {o['deprecated']} vs {n.deprecated}")
        op = [(p["name"], p["pattern"]) for p in o["params"]]
        np_ = [(p["name"], normalise(p["pattern"])) for p in n.parameters]
        if op != np_:
            problems.append(f"{key}: parameters {op} vs {np_}")
    print(f"facts: {len(ours)} kubeplace definitions, {len(theirs)} Nova validators, "
          f"{len(problems)} mismatches, {documented} documented differences (resources min 0)")
    for p in problems[:20]:
        print("  MISMATCH", p)
    return len(problems)


# ---------------------------------------------------------------- extra specs

def instantiate(validator):
    """Concrete keys for a validator's name template."""
    samples = {
        "group": ["", "1", "_NIC"],
        "num": ["0", "12"],
        "filter": ["", ":features", ":a:b"],
        "key": ["ssd", "a:b"],
        "resource": ["LLC"],
        "trait": ["GOLD"],
        "id": ["0"],
    }
    keys = [validator.name]
    for p in validator.parameters:
        keys = [k.replace("{%s}" % p["name"], s) for k in keys for s in samples[p["name"]]]
    return keys


INT_VALUES = ["0", "1", "-1", "2", "15", "16", " 5 ", "+3", "007", "\t4\n", "1.0", "abc", "", "1_000",
              UNICODE_DIGIT, "9" * 30, "-" + "9" * 30, "0x10", "1e3", "- 1", "--1"]
BOOL_VALUES = ["1", "t", "true", "on", "y", "yes", "0", "f", "false", "off", "n", "no", "TRUE", "True",
               "YES", "Off", " yes ", "\ttrue\n", "\x1ctrue", "yess", "2", "", "tru e", "enabled", "none"]
PATTERN_VALUES = ["0", "0-3", "^0", "0-3,^2", "1,2,3", "0-", "a", "", "0,,1", "0-3,^2,5-7", "^0-1",
                  UNICODE_DIGIT, "0" + UNICODE_DIGIT,
                  "large", "small", "any", "2048", "2MB", "1GiB", "2Mbit", "2mb", "4kB", "huge", "2 MB",
                  "a,b", "a,", "a,,b", "a b", "GOLD_1,SMALL",
                  "a:1", "a:1,b:2", "a:1 , b:2", "a:x", "a:1,", ":1", "a:1:2", "a b:3", "a:" + UNICODE_DIGIT]
STRING_VALUES = ["", "x", "anything goes", ">= 4", "<in> avx2", "s== QEMU"]


def enum_values(members):
    values = []
    for m in members:
        values += [m, m.upper(), m.capitalize(), m + " ", " " + m, m + m[-1:], m[:-1]]
    return values + ["", "banana"]


def values_for(v):
    t = v["type"]
    if t is int:
        out = list(INT_VALUES)
        for bound in (v.get("min"), v.get("max")):
            if bound is not None:
                out += [str(bound - 1), str(bound), str(bound + 1)]
        return out
    if t is bool:
        return BOOL_VALUES
    if "enum" in v:
        return enum_values(list(v["enum"]))
    if "pattern" in v:
        return PATTERN_VALUES
    return STRING_VALUES


def typo_keys():
    keys = ["hw:cpu_pollllicy", "hw:cpu_polic", "hw_cpu_policy", "hw:numa_cpusX0", "hw:numa_cpus_0",
            "hw:numa_cpus:0", "hw:numa_memX1", "hw:numa_cpus.", "hw:numa_cpus.x", "traits:HW_CPU_X86_AVX2",
            "trait:HW_CPU_X86_AVX3", "trait:custom_gold", "trait:CUSTOM_", "resources:VCPUS",
            "resources.1:VCPU", "resources:CUSTOM_", "resources:vcpu", "acme:cache_ways", "hw:nope",
            "quota:cpu_limits", "capabilities:nope", "capabilities:cpu_info:", "capabilities:cpu_info:a-b",
            "aggregate_instance_extra_specs:", "no_namespace", "hw", "hw:", ":x", "os:secure_boots",
            "vmware:hw_versions", "group_policies", "hide_hypervisor", "resources" + "a" * 65 + ":VCPU",
            "trait" + "a" * 64 + ":HW_CPU_X86_AVX2", "hw_rng:allowed ", " hw:cpu_policy"]
    return [(k, "1") for k in keys] + [(k, "required") for k in keys[:16]]


def nova_verdict(key, value):
    if not KEY_SCHEMA.search(key) or len(value) > 255:
        return False
    try:
        validators.validate(key, value)
        return True
    except exception.ValidationError:
        return False


def kubeplace_nova_reading(item):
    """kubeplace's verdict, read as Nova's: unknown keys outside Nova's namespaces pass."""
    status = item["status"]
    if status in ("valid", "deprecated"):
        return True
    if status == "unknown-key":
        return not item["in_tree_namespace"]
    return False


def explain(key, value, nova_ok):
    """The documented difference that explains a disagreement, if any."""
    digits_only = value.strip().lstrip("+-")
    if nova_ok and UNICODE_DIGIT in value:
        return "Unicode digits"
    if nova_ok and "_" in digits_only and digits_only.replace("_", "").isdigit():
        return "underscores in integers"
    if nova_ok and re.match(r"^hw:numa_(cpus|mem).\d+$", key) and key[len("hw:numa_cpus"):][:1] != "." \
            and not key.startswith("hw:numa_mem."):
        return "unescaped '.' in hw:numa_cpus.{num} / hw:numa_mem.{num}"
    if nova_ok and re.match(r"^resources[a-zA-Z0-9_-]{0,64}:", key) and value.strip().startswith("-"):
        return "negative resource amounts"
    return None


def differential_specs(binary):
    pairs = []
    for validator in validators.VALIDATORS.values():
        for key in instantiate(validator):
            for value in values_for(validator.value):
                pairs.append((key, value))
    pairs += typo_keys()
    items = run_kubeplace(binary, pairs)
    assert len(items) == len(pairs)
    agree, documented, unexplained = 0, {}, []
    for (key, value), item in zip(pairs, items):
        n = nova_verdict(key, value)
        k = kubeplace_nova_reading(item)
        if n == k:
            agree += 1
            continue
        why = explain(key, value, n)
        if why:
            documented[why] = documented.get(why, 0) + 1
        else:
            unexplained.append((key, value, n, item))
    print(f"extra specs: {len(pairs)} cases, {agree} agree ({100.0 * agree / len(pairs):.2f}%), "
          f"{sum(documented.values())} differ as documented, {len(unexplained)} unexplained")
    for why, count in sorted(documented.items()):
        print(f"  documented: {why}: {count}")
    for key, value, n, item in unexplained[:30]:
        print(f"  UNEXPLAINED {key!r}={value!r}: nova {'accepts' if n else 'rejects'}, kubeplace {item['status']}"
              f" {item.get('problem', {}).get('why', '')}")
    return len(unexplained)


# ---------------------------------------------------------------- image properties

def image_values(field):
    ftype = type(field).__name__
    t = getattr(field, "_type", None)
    valid = getattr(t, "_valid_values", None)
    if valid:
        out = enum_values(list(valid))
        if ftype == "ArchitectureField":
            out += ["amd64", "AMD64", "i386", "x86_32", "x86-64"]
        if ftype == "HVTypeField":
            out += ["xapi", "KVM"]
        if ftype == "VMModeField":
            out += ["pv", "HV", "baremetal"]
        if ftype == "VIFModelField":
            out += ["VirtualE1000", "virtualvmxnet3"]
        if ftype == "SCSIModelField":
            out += ["LSILogicSAS", "paravirtual"]
        return out
    if ftype == "IntegerField":
        return INT_VALUES
    if ftype == "FlexibleBooleanField":
        return BOOL_VALUES
    if ftype == "UUIDField":
        return ["0a1b2c3d-0000-4000-8000-000000000000", "0A1B2C3D00004000800000000000000", "nope", ""]
    if ftype == "VersionPredicateField":
        return [">= 6.0", ">=6.0, <7", "==1.2.3", "<2", "banana", "", ">=", ">= 1 2", "!=1.0rc1", "> v1.0"]
    if ftype == "ListOfDictOfNullableStringsField":
        return ['[{"device": "vda", "virtual": null}]', "[]", "x", "[1]", '{"a": "b"}']
    return STRING_VALUES


def nova_image_verdict(key, value):
    props = {key: value}
    if key in ("img_mappings", "img_block_device_mapping", "mappings", "block_device_mapping"):
        # Nova's Glance client decodes these JSON strings before building ImageMetaProps.
        try:
            props = {key: json.loads(value)}
        except ValueError:
            return False
    try:
        image_meta.ImageMetaProps.from_dict(props)
        return True
    except Exception:  # noqa: BLE001 - any failure is a rejection
        return False


def differential_images(binary):
    props = image_meta.ImageMetaProps
    pairs = []
    for name, field in props.fields.items():
        if name == "traits_required":
            continue
        if name in ("hw_numa_cpus", "hw_numa_mem"):
            values = PATTERN_VALUES[:13] + ["3-1", " 0 - 3 "] if name == "hw_numa_cpus" else INT_VALUES
            pairs += [(name + ".0", v) for v in values]
            continue
        pairs += [(name, v) for v in image_values(field)]
    for legacy, current in props._legacy_property_map.items():
        pairs += [(legacy, v) for v in image_values(props.fields[current])]
    pairs += [("vmware_adaptertype", v) for v in ["ide", "lsiLogic", "paravirtual", "x", "IDE"]]
    items = run_kubeplace(binary, pairs, image=True)
    agree, documented, unexplained = 0, {}, []
    for (key, value), item in zip(pairs, items):
        n = nova_image_verdict(key, value)
        k = item["status"] != "invalid"
        if n == k:
            agree += 1
            continue
        field = props.fields.get(props._legacy_property_map.get(key, key.split(".")[0]))
        ftype = type(field).__name__ if field is not None else ""
        why = None
        if n and ftype == "FlexibleBooleanField":
            why = "booleans: Nova reads any other word as false"
        elif n and ftype == "UUIDField":
            why = "UUIDs: Nova only logs a malformed one"
        elif n and (UNICODE_DIGIT in value):
            why = "Unicode digits"
        elif n and "_" in value and value.replace("_", "").strip().lstrip("+-").isdigit():
            why = "underscores in integers"
        elif not n and key == "vmware_adaptertype" and value == "IDE":
            why = "vmware_adaptertype: Nova lower-cases only the SCSI models"
        if why:
            documented[why] = documented.get(why, 0) + 1
        else:
            unexplained.append((key, value, n, item))
    print(f"image properties: {len(pairs)} cases, {agree} agree ({100.0 * agree / len(pairs):.2f}%), "
          f"{sum(documented.values())} differ as documented, {len(unexplained)} unexplained")
    for why, count in sorted(documented.items()):
        print(f"  documented: {why}: {count}")
    for key, value, n, item in unexplained[:30]:
        print(f"  UNEXPLAINED {key!r}={value!r}: nova {'accepts' if n else 'rejects'}, kubeplace {item['status']}"
              f" {item.get('problem', '')}")
    return len(unexplained)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeplace", default="target/release/kubeplace")
    args = parser.parse_args()
    bad = compare_facts(args.kubeplace)
    bad += differential_specs(args.kubeplace)
    bad += differential_images(args.kubeplace)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
