#!/usr/bin/env python3
"""kops-rs and the real kops under AWS' documented request-rate limits: a
cluster of 3 zones (private, bastion, Cilium) with N instance groups in all,
on a fresh moto behind a throttling proxy, `update cluster --yes`, the no-op
`update cluster` and `delete cluster --yes`; per step the calls that reached
the proxy, the answers it throttled and the wall time, then what is left.

Two proxies keep the same buckets (EC2's documented defaults: 100 tokens at
20/s for reads, 200 at 5/s for writes, per action; Route 53 5/s):
  awsproxy  ../shared/tools/awsproxy.py --buckets
  testkit   kops-testkit aws-limits (crates/kops-testkit/src/aws_limits.rs)
so a run through each shows that they agree.

usage: bench/rate_limits.py [--groups 100,300] [--proxies awsproxy,testkit]
                            [--tools kops-rs,kops] [KOPS_RS_BIN]
KOPS_RS_BIN defaults to target/release/kops (build it with
`cargo build --release --workspace --bins`); the real kops is
~/.cache/kops-go/kops-go (KOPS_GO; ../shared/tools/gokops/build.sh builds it),
left out with a note when absent. Prints numbers; asserts nothing.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
TOOLS = os.path.join(SHARED, "tools")
IMAGE = "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
# kops create cluster makes 5 groups here: a control plane, a node group per zone, the bastion.
CREATED_GROUPS = 5


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def python():
    venv = os.environ.get("KOPS_TOOLS_VENV", os.path.expanduser("~/.cache/kops-tools/venv"))
    for p in (os.path.join(venv, "bin/python"), os.path.join(ROOT, ".venv/bin/python")):
        if os.path.exists(p):
            return p
    return sys.executable


def wait_for(url):
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"rate_limits: nothing answers at {url}")


def start_moto(py, work):
    port = free_port()
    proc = subprocess.Popen([py, os.path.join(TOOLS, "moto_patched.py"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "moto.log"), "w"))
    url = f"http://127.0.0.1:{port}"
    wait_for(url + "/moto-api/")
    # One call per service straight to moto: a cold moto loads each service
    # on its first call, much slower when they come together (AWS has no such start).
    subprocess.run([py, "-c", f"""
import boto3
kw = dict(endpoint_url="{url}", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
for s, c in [("sts", "get_caller_identity"), ("ec2", "describe_vpcs"), ("elbv2", "describe_load_balancers"),
             ("autoscaling", "describe_auto_scaling_groups"), ("iam", "list_roles"), ("events", "list_rules"),
             ("sqs", "list_queues"), ("route53", "list_hosted_zones")]:
    getattr(boto3.client(s, **kw), c)()
"""], check=False, capture_output=True)
    return proc, url


def start_proxy(kind, py, testkit, upstream, log, work):
    out = open(os.path.join(work, "proxy.out"), "w+")
    if kind == "awsproxy":
        cmd = [py, os.path.join(TOOLS, "awsproxy.py"), "--upstream", upstream, "--port", "0", "--log", log, "--buckets"]
    else:
        cmd = [testkit, "aws-limits", "--upstream", upstream, "--log", log]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
    for _ in range(100):
        out.seek(0)
        text = out.read()
        if "listening" in text:
            return proc, int(text.split("listening")[1].split()[0])
        time.sleep(0.1)
    raise SystemExit(f"rate_limits: the {kind} proxy did not start")


def log_counts(log):
    calls = throttled = 0
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                calls += 1
                if json.loads(line).get("fault") == "bucket":
                    throttled += 1
    return calls, throttled


def lifecycle(tool, binary, groups, proxy_kind, py, testkit):
    work = tempfile.mkdtemp(prefix=f"limits-{tool}-")
    moto, moto_url = start_moto(py, work)
    log = os.path.join(work, "calls.jsonl")
    proxy, port = start_proxy(proxy_kind, py, testkit, moto_url, log, work)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="test",
               AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
               KUBECONFIG=os.path.join(work, "kubeconfig"))
    extra = []
    if tool == "kops":
        version = subprocess.run([binary, "version", "--short"], capture_output=True, text=True).stdout.strip()
        cache = os.path.expanduser("~/.cache/kops-go")
        env["KOPS_BASE_URL"] = os.environ.get("KOPS_GO_BASE", f"file://{cache}/kops-base/{version}/")
        extra = ["--cloud", "aws", "--channel", os.environ.get("KOPS_GO_CHANNEL", f"file://{cache}/kops-src/channels/stable")]
    name = "limits.k8s.local"
    state = f"file://{work}/state"
    key = os.path.join(work, "id")
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-N", "", "-f", key], check=True)

    def kops(*args, log_name):
        with open(os.path.join(work, log_name), "w") as out:
            return subprocess.run([binary, *args], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=1800).returncode

    rc = kops("create", "cluster", name, *extra, "--image", IMAGE, "--node-size", "t3.medium",
              "--control-plane-size", "t3.medium", "--zones", ",".join(ZONES), "--topology", "private",
              "--bastion", "--networking", "cilium", "--ssh-public-key", key + ".pub", "--state", state,
              log_name="create.log")
    if rc != 0:
        return f"{tool}: create cluster failed, see {work}/create.log"
    docs = "".join(
        f"---\napiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: extra-{i}\n"
        f"  labels: {{kops.k8s.io/cluster: {name}}}\nspec: {{role: Node, image: \"{IMAGE}\", machineType: t3.medium, "
        f"minSize: 0, maxSize: 2, subnets: [{ZONES[(i - 1) % 3]}]}}\n"
        for i in range(1, groups - CREATED_GROUPS + 1))
    if docs:
        path = os.path.join(work, "groups.yaml")
        open(path, "w").write(docs)
        kops("create", "-f", path, "--state", state, log_name="groups.log")
    steps = []
    for step, args in [("apply", ["update", "cluster", name, "--state", state, "--yes"]),
                       ("no-op", ["update", "cluster", name, "--state", state]),
                       ("delete", ["delete", "cluster", name, "--state", state, "--yes"])]:
        before = log_counts(log)
        started = time.monotonic()
        rc = kops(*args, log_name=f"{step}.log")
        seconds = time.monotonic() - started
        after = log_counts(log)
        steps.append((step, rc, after[0] - before[0], after[1] - before[1], seconds))
    left = subprocess.run([py, os.path.join(TOOLS, "inventory.py"), name], env=dict(env, AWS_ENDPOINT_URL=moto_url),
                          capture_output=True, text=True).stdout
    try:
        left = sum(json.loads(left).values())
    except ValueError:
        left = "?"
    proxy.kill()
    moto.kill()
    row = " | ".join(f"{s} rc={rc} {calls} calls, {thr} throttled, {sec:.0f}s" for s, rc, calls, thr, sec in steps)
    return f"{tool:<7} {proxy_kind:<8} {row} | left {left} | {work}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "target/release/kops"))
    ap.add_argument("--groups", default="100,300")
    ap.add_argument("--proxies", default="awsproxy,testkit")
    ap.add_argument("--tools", default="kops-rs,kops")
    a = ap.parse_args()
    if not os.path.isdir(TOOLS):
        print(f"rate_limits: {TOOLS} is not there; nothing to measure", file=sys.stderr)
        return 0
    testkit = os.path.join(os.path.dirname(a.binary), "kops-testkit")
    go = os.environ.get("KOPS_GO", os.path.expanduser("~/.cache/kops-go/kops-go"))
    binaries = {"kops-rs": a.binary, "kops": go}
    py = python()
    for groups in (int(g) for g in a.groups.split(",")):
        print(f"{groups} instance groups, 3 zones, AWS' default buckets", flush=True)
        for proxy in a.proxies.split(","):
            if proxy == "testkit" and not os.path.exists(testkit):
                print(f"  (no {testkit}: build the workspace's binaries)")
                continue
            for tool in a.tools.split(","):
                if not os.path.exists(binaries[tool]):
                    print(f"  (no {tool} at {binaries[tool]})")
                    continue
                print("  " + lifecycle(tool, binaries[tool], groups, proxy, py, testkit), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
