#!/usr/bin/env python3
"""AWS calls per operation of kops-rs through ../shared/tools/awsproxy.py in
front of moto (../shared/tools/moto_patched.py), for the goals of issue 15:
  - 1-zone private cluster with a bastion: calls of a no-op `update cluster`
  - N extra instance groups (default 100): calls of the no-op
  - 3 zones, `delete cluster --yes` at 100 ms per call: seconds
Prints calls per step, the no-op's calls per AWS operation, and seconds.
Asserts nothing. BENCH_LOGS=DIR keeps each step's output and its calls
with their times (DIR/<cluster>-<step>.log and .calls).

usage: bench/aws_calls.py [KOPS_BINARY] [--case one|many|delete3|all] [--igs 100]
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Env:
    """moto + awsproxy, both stopped by close()."""

    def __init__(self, latency_ms, tmp):
        port = free_port()
        self.moto = subprocess.Popen([PY, os.path.join(TOOLS, "moto_patched.py"), "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        self.log = os.path.join(tmp, "calls.jsonl")
        open(self.log, "w").close()
        self.proxy = subprocess.Popen([PY, os.path.join(TOOLS, "awsproxy.py"), "--upstream", url, "--port", "0",
                                       "--latency-ms", str(latency_ms), "--log", self.log],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proxy.stdout.readline().split()
        self.env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{line[1]}", AWS_ACCESS_KEY_ID="test",
                        AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
                        AWS_EC2_METADATA_DISABLED="true", KUBECONFIG=os.path.join(tmp, "kubeconfig"))

    def ops(self):
        return [op for op, _ in self.timed_ops()]

    def timed_ops(self):
        """(operation, time its answer was sent) of every call so far."""
        with open(self.log) as f:
            return [(d["op"], d.get("t", 0.0)) for d in (json.loads(l) for l in f if l.strip())]

    def close(self):
        for p in (self.proxy, self.moto):
            p.kill()
            p.wait()


def lifecycle(kops, zones, igs, latency_ms, verbose):
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(latency_ms, tmp)
        try:
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kops", nargs="?", default=os.path.join(ROOT, "target/debug/kops"))
    ap.add_argument("--case", default="all", choices=["one", "many", "delete3", "all"])
    ap.add_argument("--igs", type=int, default=100)
    a = ap.parse_args()
    print(f"binary: {a.kops}")
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
