#!/usr/bin/env bash
# Lints the committed openapi.json: Redocly (recommended rules, warnings as errors: redocly.yaml) and
# Spectral (spectral:oas: .spectral.yaml). Exits non-zero on any Redocly problem or Spectral error.
set -uo pipefail
cd "$(dirname "$0")/.."
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
status=0
doc=${1:-openapi.json}
out=$(npx --no-install redocly lint "$doc" --config redocly.yaml --format=stylish 2>&1) || status=1
printf '%s\n' "$out" | grep -v '[║╔╚]' | grep -v '^npm warn'
npx --no-install spectral lint "$doc" --ruleset .spectral.yaml --fail-severity error 2>&1 | grep -v '^npm warn'
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
