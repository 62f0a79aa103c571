#!/usr/bin/env python3
"""AWS API calls and wall time of `update cluster --yes` (first apply), a
no-op `update cluster`, and `delete cluster --yes`, against a local
moto_server, for a minimal cluster and one spread over 6 zones.
Prints numbers; asserts nothing.

usage: bench/aws_lifecycle.py [KOPS_BINARY]
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b bench@kops-rs\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto():
    moto = os.environ.get("MOTO_SERVER") or os.path.join(ROOT, ".venv/bin/moto_server")
    port = free_port()
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return proc, url
        except Exception:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("moto_server did not start")


def run(kops, args, env):
    t = time.perf_counter()
    p = subprocess.run([kops, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if p.returncode not in (0, 2):
        raise SystemExit(f"kops {' '.join(args)} failed:\n{p.stderr}")
    m = re.search(r"(\d+) AWS calls", p.stderr)
    return elapsed, int(m.group(1)) if m else -1


def main():
    kops = sys.argv[1] if len(sys.argv) > 1 else None
    if kops is None:
        release = os.path.join(ROOT, "target/release/kops")
        kops = release if os.path.exists(release) else os.path.join(ROOT, "target/debug/kops")
    proc, url = start_moto()
    try:
        env = dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="testing",
                   AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
        print(f"binary: {kops}\nmoto:   {url}\n")
        print(f"{'cluster':24s} {'step':18s} {'calls':>6s} {'seconds':>8s}")
        cases = [("minimal", "private", "us-east-1a"),
                 ("six-zones", "private", "us-east-1a,us-east-1b,us-east-1c,us-east-1d,us-east-1e,us-east-1f")]
        for name, topology, zones in cases:
            with tempfile.TemporaryDirectory() as tmp:
                state = f"file://{tmp}/state"
                key = os.path.join(tmp, "id.pub")
                with open(key, "w") as f:
                    f.write(KEY)
                cluster = f"{name}.bench.example.com"
                subprocess.run([kops, "create", "cluster", cluster, "--zones", zones, "--topology", topology,
                                "--bastion", "--networking", "cilium", "--ssh-public-key", key, "--state", state,
                                # kops' default Ubuntu 24.04 image is not among moto's AMIs.
                                "--image", "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721"],
                               env=env, check=True, capture_output=True)
                for step, args in [("first apply", ["update", "cluster", cluster, "--yes"]),
                                   ("no-op update", ["update", "cluster", cluster]),
                                   ("delete", ["delete", "cluster", cluster, "--yes", "--interval", "200ms"])]:
                    seconds, calls = run(kops, [*args, "--state", state], env)
                    print(f"{cluster:24s} {step:18s} {calls:6d} {seconds:8.2f}")
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
