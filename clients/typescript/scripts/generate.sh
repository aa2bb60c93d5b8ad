#!/usr/bin/env bash
# Regenerate the API's types from the OpenAPI document `tzpush api` serves:
#   scripts/generate.sh PYTHON [OUT]   (OUT defaults to src/schema.ts)
# `--check` as OUT compares a fresh generation with the committed src/schema.ts instead, and
# fails (with the diff) when they differ: `make lint` runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${1:?usage: generate.sh PYTHON [OUT|--check]}
out=${2:-src/schema.ts}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" scripts/dump_openapi.py >"$tmp/openapi.json"
target=$out
[[ $out == --check ]] && target=$tmp/schema.ts
node_modules/.bin/openapi-typescript "$tmp/openapi.json" -o "$target" --root-types --root-types-no-schema-prefix --default-non-nullable false >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
if [[ $out == --check ]]; then
  diff -u src/schema.ts "$target" || {
    echo "clients/typescript/src/schema.ts differs from what tzpush api serves:" \
      "run make client-types and commit it" >&2
    exit 1
  }
fi
