#!/usr/bin/env bash
# Installs the Restate server (BSL 1.1; about 441 MB with its binary) into .cache/restate-server,
# outside node_modules and package.json, so `npm ci` and `npm test` never need it. Idempotent:
# a second run with the binary in place does nothing. The distributed suite
# (`npm run test:distributed`) finds the binary there, or at $LOOPCHART_RESTATE_SERVER.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.7.12
prefix=.cache/restate-server
bin="$prefix/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"
if [ -x "$bin" ] && [ "$(cat "$prefix/version" 2>/dev/null)" = "$version" ]; then exit 0; fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-save --no-audit --no-fund --no-package-lock \
  "@restatedev/restate-server@$version" >/dev/null
[ -x "$bin" ] || { echo "restate.sh: $bin missing after install" >&2; exit 1; }
echo "$version" >"$prefix/version"
echo "restate-server $version installed in $prefix" >&2
