#!/usr/bin/env bash
# Installs Debian's chromium for the browser suite (test:browser). Run as root; idempotent and
# quiet: a machine that already has /usr/bin/chromium returns at once. .ci/run starts it in the
# background before `npm ci` and waits for it just before the browser suite.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
# Waits for the dpkg lock: .ci/postgres.sh may be installing with apt at the same time.
apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >/dev/null
test -x /usr/bin/chromium
