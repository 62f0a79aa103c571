#!/usr/bin/env bash
# kops-rs and the real kops, side by side on the same moto behind the
# call-logging proxy (../shared/tools/side-by-side.sh): calls and seconds
# for apply, the no-op update and delete, in the configurations of issue 17:
#   1 zone, no latency; 3 zones at 100 ms per call; 100 instance groups.
# Needs the reference kops (../shared/tools/gokops/build.sh, ~10 minutes on
# 2 cores; KOPS_GO overrides its path). Without it, says how to build it
# and exits 0. A benchmark prints numbers; it asserts nothing.
#   bench/side_by_side.sh [KOPS_RS_BIN]   (default: a release build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shared=${SHARED_DIR:-../shared}
tool=$shared/tools/side-by-side.sh
go_kops=${KOPS_GO:-$HOME/.cache/kops-go/kops-go}
if [[ ! -x $tool ]]; then
  echo "side_by_side: $tool is not there; nothing to compare" >&2
  exit 0
fi
if [[ ! -x $go_kops ]]; then
  echo "side_by_side: no reference kops at $go_kops" >&2
  echo "  build it: KOPS_MIRROR=<git dir of kubernetes/kops> $shared/tools/gokops/build.sh" >&2
  exit 0
fi
bin=${1:-}
if [[ -z $bin ]]; then
  cargo build --release -p kops -p kops-nodeup >&2
  bin=$PWD/target/release/kops
fi
for args in "1 0 0" "3 0 100" "1 100 0"; do
  # shellcheck disable=SC2086
  KOPS_GO=$go_kops "$tool" "$bin" $args
done
