#!/usr/bin/env bash
# The unit tests alone (test/unit: pure functions; no database server, control plane or browser,
# nothing installed), for a quick run while developing. Builds the tests first when a source file is
# newer than the last build. `npm run test:unit`; `npm run check` runs lint and the type check before it.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=build/.unit-build-stamp
if [ ! -f "$stamp" ] || [ -n "$(find src test ormconfig.ts tsconfig.json tsconfig.test.json package-lock.json -newer "$stamp" -print -quit)" ]; then
  npx nest build -p tsconfig.test.json
  touch "$stamp"
fi
mapfile -t files < <(find build/test/unit -name '*.test.js' | sort)
[ ${#files[@]} -gt 0 ] || { echo "no unit tests under build/test/unit"; exit 1; }
exec env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 node --test --test-concurrency=2 "${files[@]}"
