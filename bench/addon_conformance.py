#!/usr/bin/env python3
"""Addon manifests of kops-rs' Terraform render against kops' golden files,
per addon kind, over every AWS case of ../shared/conformance/kops/update_cluster
(the data-conformance measure of ../shared/tools/data-conformance.py: files,
files identical byte for byte, mean line similarity).

Printed twice: raw, and with the values kops' test harness mocks normalised
in kops' files, which kops-rs must not imitate:
  - partition `aws-test` (kops' mock cloud) -> the partition of the region
    kops-rs renders for (`aws` for the cases' us-test-1);
  - the mock hosted zone id Z1AFAKE1ZON3YO: the zone argument lines of
    dns-controller (`--zone=`) and external-dns (`--zone-id-filter=`) are
    masked on both sides (kops-rs names the zone it finds, or its name);
  - kops' mock version 1.34.0-beta.1 -> kops_api::KOPS_VERSION;
  - the root device of kops' mock EC2 image (Karpenter's `deviceName:`),
    masked on both sides;
  - nodeup's location and hash in Karpenter's user data (kops' release
    artefacts in kops' tests, the nodeup kops-rs publishes in its renders),
    masked on both sides.
Both sides get the partition and version replacements (a case's input may
name `aws-test` itself). Differing by design, not masked: kops-controller
(kops-rs runs it as a host service) and, in Karpenter's user data, how the
nodeup kops-rs publishes is fetched, the cluster's CA certificates (keys
kops-rs generates; kops' tests use fixed ones) and the node config hash
derived from them. Then, per addon still differing after normalisation, its
cases and a few of the lines that differ.

The render runs against a moto started here (as kops' Terraform target, the
render asks the cloud for the account). Needs ../shared (read at run time,
never copied here) and a Python with python-hcl2 and moto (the repo's .venv).
Asserts nothing.

usage: .venv/bin/python bench/addon_conformance.py [KOPS_BINARY] [--keep DIR | --rendered DIR]
  --keep DIR      render into DIR/<case> and keep it (default: a temporary directory)
  --rendered DIR  score renders already in DIR/<case>/out instead of rendering
"""
import argparse
import collections
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
CASES = os.path.join(SHARED, "conformance", "kops", "update_cluster")
TOOLS = os.path.join(SHARED, "tools")
MOCK_VERSION = "1.34.0-beta.1"
MOCK_PARTITION = "aws-test"
CASE_REGION = "us-test-1"
# kops-rs runs kops-controller as a host service, not as this addon.
BY_DESIGN = "kops-controller.addons.k8s.io"


def kops_version():
    """kops_api::KOPS_VERSION, read from the source."""
    for dirpath, _, names in os.walk(os.path.join(ROOT, "crates", "kops-api", "src")):
        for name in names:
            if name.endswith(".rs"):
                text = open(os.path.join(dirpath, name)).read()
                m = re.search(r'pub const KOPS_VERSION: &str = "([^"]+)"', text)
                if m:
                    return m.group(1)
    sys.exit("addon_conformance: KOPS_VERSION not found in crates/kops-api")


def partition(region):
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def addon_kind(name):
    """The addon a data file holds (data-conformance's classification)."""
    m = re.search(r"-addons-(.+?)(-k8s-[\d.]+|-v[\d.]+)?(-irsa)?_content$", name)
    if m and m.group(1) != "bootstrap" and name.startswith("aws_s3_object_"):
        return m.group(1)
    return None


ZONE_ARG = re.compile(r"^(\s*- --zone=)(?!\*/\*$)\S+$|^(\s*- --zone-id-filter=)\S+$", re.M)
DEVICE = re.compile(r"^(\s*- deviceName: )\S+$", re.M)
NODEUP = re.compile(r"^(\s*NODEUP_(?:URL|HASH)_(?:AMD64|ARM64)=).*$", re.M)


def masked(text):
    """What neither side can be expected to match: zone ids, mock devices,
    nodeup locations."""
    text = ZONE_ARG.sub(lambda m: (m.group(1) or m.group(2)) + "<zone>", text)
    text = DEVICE.sub(r"\1<device>", text)
    return NODEUP.sub(r"\1<nodeup>", text)


def normalised(text, version):
    text = text.replace(f"arn:{MOCK_PARTITION}:", f"arn:{partition(CASE_REGION)}:")
    text = text.replace(MOCK_VERSION, version)
    return masked(text)


def similarity(a, b):
    ca, cb = collections.Counter(a.splitlines()), collections.Counter(b.splitlines())
    total = sum((ca | cb).values())
    return 1.0 if total == 0 else sum((ca & cb).values()) / total


def aws_cases():
    for case in sorted(os.listdir(CASES)):
        d = os.path.join(CASES, case)
        f = os.path.join(d, "in-v1alpha2.yaml")
        if not (os.path.exists(os.path.join(d, "kubernetes.tf")) and os.path.exists(f)):
            continue
        text = open(f).read()
        if "cloudProvider: aws" in text or "\n    aws:" in text:
            name = re.search(r"kind: Cluster\n(?:.*\n)*?  name: (\S+)", text).group(1)
            yield case, d, name


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto():
    port = free_port()
    script = os.path.join(TOOLS, "moto_patched.py")
    cmd = [sys.executable, script, "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("addon_conformance: moto did not start")


def render(kops, case_dir, name, work, env):
    state = f"file://{work}/state"
    f = os.path.join(case_dir, "in-v1alpha2.yaml")
    for cmd in (["create", "-f", f],
                ["create", "sshpublickey", name, "-i", os.path.join(case_dir, "id_rsa.pub")],
                ["update", "cluster", name, "--target", "terraform", "--out", f"{work}/out"]):
        subprocess.run([kops, *cmd, "--state", state], capture_output=True, timeout=300, env=env)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kops", nargs="?", default=os.path.join(ROOT, "target", "debug", "kops"))
    group = p.add_mutually_exclusive_group()
    group.add_argument("--keep", help="render into DIR/<case> and keep it")
    group.add_argument("--rendered", help="DIR with <case>/out renders to score instead of rendering")
    args = p.parse_args()
    if not os.path.isdir(CASES):
        print(f"skipping: ../shared not found ({CASES})")
        return
    version = kops_version()
    moto = None
    if not args.rendered:
        if not os.path.exists(args.kops):
            sys.exit(f"addon_conformance: no kops binary at {args.kops}")
        moto, url = start_moto()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "KOPS_STATE_STORE"}
        env.update(AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                   AWS_REGION="us-east-1")
        base = args.keep or tempfile.mkdtemp(prefix="addon-conformance-")
    else:
        base = args.rendered
    raw = collections.defaultdict(lambda: [0, 0, 0.0])
    norm = collections.defaultdict(lambda: [0, 0, 0.0])
    remaining = collections.defaultdict(list)
    lines = collections.defaultdict(collections.Counter)
    try:
        for case, d, name in aws_cases():
            work = os.path.join(base, case)
            if not args.rendered:
                os.makedirs(work, exist_ok=True)
                render(args.kops, d, name, work, env)
            for fname in sorted(os.listdir(os.path.join(d, "data"))):
                kind = addon_kind(fname)
                if kind is None:
                    continue
                theirs = open(os.path.join(d, "data", fname), errors="replace").read()
                path = os.path.join(work, "out", "data", fname)
                ours = open(path, errors="replace").read() if os.path.exists(path) else ""
                n_theirs, n_ours = normalised(theirs, version), normalised(ours, version)
                for agg, a, b in ((raw, theirs, ours), (norm, n_theirs, n_ours)):
                    row = agg[kind]
                    row[0] += 1
                    row[1] += a == b
                    row[2] += similarity(a, b)
                if n_theirs != n_ours:
                    remaining[kind].append(case)
                    ca, cb = collections.Counter(n_theirs.splitlines()), collections.Counter(n_ours.splitlines())
                    lines[kind].update(f"- {l.strip()}" for l in (ca - cb).elements())
                    lines[kind].update(f"+ {l.strip()}" for l in (cb - ca).elements())
    finally:
        if moto:
            moto.kill()
            moto.wait()
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    print(f"{'addon':50s} {'files':>5s}  {'raw exact':>9s} {'sim':>6s}  {'norm exact':>10s} {'sim':>6s}")
    totals = [[0, 0, 0.0], [0, 0, 0.0]]
    for kind in sorted(raw, key=lambda k: (-raw[k][0], k)):
        (n, ex, s), (_, nex, ns) = raw[kind], norm[kind]
        note = "  (by design: host service in kops-rs)" if kind == BY_DESIGN else ""
        print(f"{kind:50s} {n:5d}  {ex:9d} {s / n:6.3f}  {nex:10d} {ns / n:6.3f}{note}")
        for t, (a, b, c) in zip(totals, ((n, ex, s), (n, nex, ns))):
            t[0] += a
            t[1] += b
            t[2] += c
    n = max(totals[0][0], 1)
    print(f"{'ADDONS':50s} {totals[0][0]:5d}  {totals[0][1]:9d} {totals[0][2] / n:6.3f}  "
          f"{totals[1][1]:10d} {totals[1][2] / n:6.3f}")
    if remaining:
        print("\nstill differing after normalisation (- kops only, + kops-rs only; most frequent lines):")
        for kind in sorted(remaining):
            if kind == BY_DESIGN:
                print(f"  {kind}: {len(remaining[kind])} files (by design)")
                continue
            print(f"  {kind}: {len(remaining[kind])} files: {' '.join(remaining[kind])}")
            for line, count in lines[kind].most_common(6):
                print(f"      {count:4d}x {line[:110]}")


if __name__ == "__main__":
    main()
