#!/usr/bin/env python3
"""AWS calls per operation of kops-rs through ../shared/tools/awsproxy.py in
front of moto (../shared/tools/moto_patched.py), for the goals of issue 15:
  - 1-zone private cluster with a bastion: calls of a no-op `update cluster`
  - N extra instance groups (default 100): calls of the no-op
  - 3 zones, `delete cluster --yes` at 100 ms per call: seconds
  - faults: 3 zones with a share of calls failing (throttling, HTTP 500,
    dropped connections), per seed: apply and delete in one run each, a
    no-op that plans nothing, nothing duplicated or left (counted on moto
    against a fault-free run), and the longest line printed on stderr
Prints calls per step, the no-op's calls per AWS operation, and seconds.
Asserts nothing. BENCH_LOGS=DIR keeps each step's output and its calls
with their times (DIR/<cluster>-<step>.log and .calls).

usage: bench/aws_calls.py [KOPS_BINARY] [--case one|many|delete3|all] [--igs 100]
       bench/aws_calls.py [KOPS_BINARY] --case faults [--fail 0.2] [--seeds 10] [--igs 0]
"""
import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(os.path.dirname(ROOT), "shared", "tools")
# A Python with moto: the shared tools' venv, else this repo's .venv.
PY = next((p for p in (os.path.join(os.environ.get("KOPS_TOOLS_VENV", os.path.expanduser("~/.cache/kops-tools/venv")),
                                    "bin", "python"), os.path.join(ROOT, ".venv", "bin", "python"))
           if os.path.exists(p)), sys.executable)
IMAGE = "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721"

# What inventory.py does not count and a retried create could make twice:
# target groups, listeners, security-group rules, routes, instance-profile
# roles, inline role policies, lifecycle hooks, event targets.
EXTRA_COUNTS = r"""
import json, os, sys
import boto3
name = sys.argv[1]
kw = dict(endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION", "us-east-1"))
ec2, asg, elb, iam, ev = (boto3.client(s, **kw) for s in ("ec2", "autoscaling", "elbv2", "iam", "events"))
f = [{"Name": "tag:KubernetesCluster", "Values": [name]}]
out = {}
out["target_group"] = out["listener"] = 0
lbs = elb.describe_load_balancers()["LoadBalancers"]
tgs = elb.describe_target_groups()["TargetGroups"]
arns = [l["LoadBalancerArn"] for l in lbs] + [t["TargetGroupArn"] for t in tgs]
mine = set()
for i in range(0, len(arns), 20):
    for d in elb.describe_tags(ResourceArns=arns[i:i + 20])["TagDescriptions"]:
        if any(t["Key"] == "KubernetesCluster" and t["Value"] == name for t in d["Tags"]):
            mine.add(d["ResourceArn"])
out["target_group"] = sum(1 for t in tgs if t["TargetGroupArn"] in mine)
out["listener"] = sum(len(elb.describe_listeners(LoadBalancerArn=l["LoadBalancerArn"])["Listeners"])
                      for l in lbs if l["LoadBalancerArn"] in mine)
groups = [g["GroupId"] for g in ec2.describe_security_groups(Filters=f)["SecurityGroups"]]
out["sg_rule"] = len(ec2.describe_security_group_rules(Filters=[{"Name": "group-id", "Values": groups}])["SecurityGroupRules"]) if groups else 0
out["route"] = sum(len(t["Routes"]) for t in ec2.describe_route_tables(Filters=f)["RouteTables"])
roles = [r["RoleName"] for r in iam.list_roles()["Roles"] if name in r["RoleName"]]
out["role_policy"] = sum(len(iam.list_role_policies(RoleName=r)["PolicyNames"]) for r in roles)
out["profile_role"] = sum(len(p["Roles"]) for p in iam.list_instance_profiles()["InstanceProfiles"]
                          if name in p["InstanceProfileName"])
groups = [g["AutoScalingGroupName"] for g in asg.describe_auto_scaling_groups()["AutoScalingGroups"]
          if any(t["Key"] == "KubernetesCluster" and t["Value"] == name for t in g.get("Tags", []))]
out["lifecycle_hook"] = sum(len(asg.describe_lifecycle_hooks(AutoScalingGroupName=g)["LifecycleHooks"]) for g in groups)
out["event_target"] = sum(len(ev.list_targets_by_rule(Rule=r["Name"])["Targets"]) for r in ev.list_rules()["Rules"]
                          if name in r["Name"] or name.replace(".", "-") in r["Name"])
print(json.dumps(out))
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Env:
    """moto + awsproxy, both stopped by close()."""

    def __init__(self, latency_ms, tmp, fail=0.0, seed=1):
        port = free_port()
        self.moto = subprocess.Popen([PY, os.path.join(TOOLS, "moto_patched.py"), "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        self.moto_url = url
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        self.log = os.path.join(tmp, "calls.jsonl")
        open(self.log, "w").close()
        self.proxy = subprocess.Popen([PY, os.path.join(TOOLS, "awsproxy.py"), "--upstream", url, "--port", "0",
                                       "--latency-ms", str(latency_ms), "--fail", str(fail), "--seed", str(seed),
                                       "--log", self.log],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proxy.stdout.readline().split()
        self.env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{line[1]}", AWS_ACCESS_KEY_ID="test",
                        AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
                        AWS_EC2_METADATA_DISABLED="true", KUBECONFIG=os.path.join(tmp, "kubeconfig"))

    def ops(self):
        return [op for op, _ in self.timed_ops()]

    def faults(self):
        """How many calls so far were answered with an injected fault."""
        with open(self.log) as f:
            return sum(1 for l in f if l.strip() and json.loads(l).get("fault"))

    def inventory(self, name):
        """The cluster's resources counted on moto itself (not through the proxy)."""
        p = subprocess.run([PY, os.path.join(TOOLS, "inventory.py"), name], env=dict(self.env, AWS_ENDPOINT_URL=self.moto_url),
                           capture_output=True, text=True)
        out = json.loads(p.stdout) if p.returncode == 0 else {"inventory-failed": 1}
        p = subprocess.run([PY, "-c", EXTRA_COUNTS, name], env=dict(self.env, AWS_ENDPOINT_URL=self.moto_url),
                           capture_output=True, text=True)
        out.update(json.loads(p.stdout) if p.returncode == 0 else {"extra-counts-failed": 1})
        return out

    def timed_ops(self):
        """(operation, time its answer was sent) of every call so far."""
        with open(self.log) as f:
            return [(d["op"], d.get("t", 0.0)) for d in (json.loads(l) for l in f if l.strip())]

    def close(self):
        for p in (self.proxy, self.moto):
            p.kill()
            p.wait()


def create(kops, env, tmp, zones, igs):
    """`create cluster` (+ `create -f` of `igs` extra groups): no cloud calls. The cluster's name."""
    # moto refuses target-group names with "--": the 9th and 16th characters must not be "-" or ".".
    name = f"kopsbenchmark{zones}z{igs:03d}.k8s.local"
    state = f"file://{tmp}/state"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-N", "", "-f", f"{tmp}/id"], check=True)
    zs = ["us-east-1a", "us-east-1b", "us-east-1c"][:zones]
    subprocess.run([kops, "create", "cluster", name, "--image", IMAGE, "--node-size", "t3.medium",
                    "--control-plane-size", "t3.medium", "--zones", ",".join(zs), "--topology", "private",
                    "--bastion", "--networking", "cilium", "--ssh-public-key", f"{tmp}/id.pub",
                    "--state", state], env=env.env, check=True, capture_output=True)
    if igs:
        docs = [f"apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: extra-{i}\n"
                f"  labels: {{kops.k8s.io/cluster: {name}}}\nspec: {{role: Node, image: \"{IMAGE}\", "
                f"machineType: t3.medium, minSize: 0, maxSize: 2, subnets: [{zs[(i - 1) % zones]}]}}\n"
                for i in range(1, igs + 1)]
        open(f"{tmp}/igs.yaml", "w").write("---\n".join(docs))
        subprocess.run([kops, "create", "-f", f"{tmp}/igs.yaml", "--state", state], env=env.env,
                       check=True, capture_output=True)
    return name


def lifecycle(kops, zones, igs, latency_ms, verbose):
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(latency_ms, tmp)
        try:
            name = create(kops, env, tmp, zones, igs)
            state = f"file://{tmp}/state"
            out = {}
            for step, args in [("apply", ["update", "cluster", name, "--yes"]),
                               ("no-op", ["update", "cluster", name]),
                               ("delete", ["delete", "cluster", name, "--yes"])]:
                before = len(env.ops())
                t = time.perf_counter()
                started = time.time()
                p = subprocess.run([kops, *args, "--state", state], env=env.env, capture_output=True, text=True)
                secs = time.perf_counter() - t
                ops = env.ops()[before:]
                note = ""
                if step == "no-op":
                    note = "no changes" if "no changes" in (p.stdout + p.stderr).lower() else "CHANGES PLANNED"
                if p.returncode not in (0,):
                    note += f" rc={p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1][:200]}"
                if os.environ.get("BENCH_LOGS"):
                    os.makedirs(os.environ["BENCH_LOGS"], exist_ok=True)
                    # The run's output, and its calls with the seconds since the step started.
                    with open(os.path.join(os.environ["BENCH_LOGS"], f"{name}-{step}.log"), "w") as f:
                        f.write(p.stdout + p.stderr)
                    with open(os.path.join(os.environ["BENCH_LOGS"], f"{name}-{step}.calls"), "w") as f:
                        for op, at in env.timed_ops()[before:]:
                            f.write(f"{at - started:7.3f} {op}\n")
                out[step] = (len(ops), secs, note, collections.Counter(ops))
                print(f"  {name:22s} {step:7s} {len(ops):5d} calls {secs:7.2f} s  {note}", flush=True)
                if verbose and step == "no-op":
                    for op, n in sorted(out[step][3].items(), key=lambda x: (-x[1], x[0])):
                        print(f"      {n:4d} {op}")
            return out
        finally:
            env.close()


def faults(kops, fail, seeds, igs, zones=3):
    """Per seed, on a fresh moto behind a proxy failing a share `fail` of calls:
    apply, no-op, inventory, delete, inventory. Counts are compared with a
    fault-free apply of the same cluster."""
    def run(env, name, state, args):
        t = time.perf_counter()
        p = subprocess.run([kops, *args, "--state", state], env=env.env, capture_output=True, text=True, timeout=1800)
        return p, time.perf_counter() - t

    def longest(*ps):
        lines = [l for p in ps for l in p.stderr.splitlines()]
        return max(lines, key=len, default="")

    def keep(name, step, p):
        if os.environ.get("BENCH_LOGS"):
            os.makedirs(os.environ["BENCH_LOGS"], exist_ok=True)
            with open(os.path.join(os.environ["BENCH_LOGS"], f"{name}-{step}.log"), "w") as f:
                f.write(p.stdout + p.stderr)

    def one(seed, p_fail):
        with tempfile.TemporaryDirectory() as tmp:
            env = Env(0, tmp, p_fail, seed)
            try:
                name = create(kops, env, tmp, zones, igs)
                state = f"file://{tmp}/state"
                calls0, faults0 = len(env.ops()), env.faults()
                apply, apply_s = run(env, name, state, ["update", "cluster", name, "--yes"])
                calls1, faults1 = len(env.ops()), env.faults()
                noop, _ = run(env, name, state, ["update", "cluster", name])
                clean = noop.returncode == 0 and "no changes" in (noop.stdout + noop.stderr).lower()
                after_apply = env.inventory(name)
                delete, delete_s = run(env, name, state, ["delete", "cluster", name, "--yes"])
                left = env.inventory(name)
                for step, p in (("apply", apply), ("no-op", noop), ("delete", delete)):
                    keep(f"{name}-seed{seed}", step, p)
                if os.environ.get("BENCH_LOGS"):  # every call of the seed: op, status, fault
                    with open(env.log) as src, open(os.path.join(os.environ["BENCH_LOGS"], f"{name}-seed{seed}.calls"), "w") as f:
                        f.write(src.read())
                return dict(apply_rc=apply.returncode, calls=calls1 - calls0, faults=faults1 - faults0, apply_s=apply_s,
                            clean=clean, noop_rc=noop.returncode, counts=after_apply, delete_rc=delete.returncode,
                            delete_s=delete_s, left=left, longest=longest(apply, noop, delete),
                            errors=[p.stderr.strip().splitlines()[-1][:200] for p in (apply, noop, delete)
                                    if p.returncode and p.stderr.strip()])
            finally:
                env.close()

    ref = one(0, 0.0)
    total = sum(ref["counts"].values())
    print(f"fault-free: apply rc={ref['apply_rc']} {ref['calls']} calls {ref['apply_s']:.1f} s, "
          f"{total} resources, delete rc={ref['delete_rc']}, left {sum(ref['left'].values())}")
    print("  " + " ".join(f"{k}={v}" for k, v in ref["counts"].items()), flush=True)
    print(f"{'seed':>4} {'apply':>5} {'calls':>5} {'faults':>6} {'secs':>6}  {'no-op':7} {'dup/miss':24} "
          f"{'delete':>6} {'secs':>6}  {'left':16} longest stderr line")
    for seed in range(1, seeds + 1):
        r = one(seed, fail)
        diff = {k: r["counts"].get(k, 0) - ref["counts"].get(k, 0)
                for k in set(r["counts"]) | set(ref["counts"]) if r["counts"].get(k, 0) != ref["counts"].get(k, 0)}
        diff_s = ",".join(f"{k}{v:+d}" for k, v in sorted(diff.items())) or "-"
        left = {k: v for k, v in r["left"].items() if v}
        left_s = ",".join(f"{k}={v}" for k, v in sorted(left.items())) or "0"
        noop_s = "clean" if r["clean"] else f"DIRTY{'' if r['noop_rc'] == 0 else ' rc=' + str(r['noop_rc'])}"
        print(f"{seed:4d} {'rc=' + str(r['apply_rc']):>5} {r['calls']:5d} {r['faults']:6d} {r['apply_s']:6.1f}  "
              f"{noop_s:7} {diff_s:24} {'rc=' + str(r['delete_rc']):>6} {r['delete_s']:6.1f}  {left_s:16} "
              f"{len(r['longest'])} chars", flush=True)
        for e in r["errors"]:
            print(f"       error: {e}")
        if len(r["longest"]) >= 300:
            print(f"       longest: {r['longest'][:400]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kops", nargs="?", default=os.path.join(ROOT, "target/debug/kops"))
    ap.add_argument("--case", default="all", choices=["one", "many", "delete3", "faults", "all"])
    ap.add_argument("--igs", type=int, default=None, help="extra instance groups (many: 100, faults: 0)")
    ap.add_argument("--fail", type=float, default=0.2, help="faults: the share of calls that fail")
    ap.add_argument("--seeds", type=int, default=10, help="faults: how many seeds (1..N)")
    a = ap.parse_args()
    print(f"binary: {a.kops}")
    if a.case == "faults":
        igs = a.igs or 0
        print(f"3 zones, private, bastion, {igs} extra groups, {a.fail:.0%} of calls failing "
              "(goal: apply and delete rc=0 in one run, no-op clean, no duplicates, nothing left, lines < 300)")
        faults(a.kops, a.fail, a.seeds, igs)
        return
    a.igs = 100 if a.igs is None else a.igs
    if a.case in ("one", "all"):
        print("1 zone, private, bastion (goal: no-op <= 40 calls)")
        lifecycle(a.kops, 1, 0, 0, True)
    if a.case in ("many", "all"):
        print(f"{a.igs} extra instance groups, 3 zones (goal: no-op <= 150 calls)")
        lifecycle(a.kops, 3, a.igs, 0, True)
    if a.case in ("delete3", "all"):
        print("3 zones, +100 ms per call (goal: delete <= 4 s)")
        lifecycle(a.kops, 3, 0, 100, False)


if __name__ == "__main__":
    main()
