#!/usr/bin/env bash
# `npm ci` from the committed package-lock.json, once per version of it (a stamp in
# node_modules holds the lockfile's hash), then `tsc`: dist/ has the client and its tests.
#   scripts/deps.sh [--no-build]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# One at a time: test workers running in parallel would otherwise install over each other.
exec 9>.deps.lock
flock 9
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ "$(cat node_modules/.tzpush-lock-sha256 2>/dev/null)" != "$want" ]]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >node_modules/.tzpush-lock-sha256
fi
[[ ${1:-} == --no-build ]] && exit 0
# Built once per version of the sources: a second test worker never rewrites dist/ under a
# node --test that is reading it.
built=$(cat package-lock.json tsconfig.json src/*.ts test/*.ts | sha256sum | cut -d' ' -f1)
if [[ "$(cat dist/.tzpush-build-sha256 2>/dev/null)" != "$built" ]]; then
  node_modules/.bin/tsc -p .
  echo "$built" >dist/.tzpush-build-sha256
fi
