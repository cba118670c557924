#!/usr/bin/env bash
# Installs and starts the service on its embedded SQLite default (data in ./data unless CAS_DATA_DIR says otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-fund --no-audit
fi
npm run build
exec env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 node --max-semi-space-size=4 dist/main.js
