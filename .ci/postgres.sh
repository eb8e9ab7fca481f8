#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the test suite and prints, on stdout and
# nothing else, the line to eval:  export DATABASE_URL=postgres://postgres@127.0.0.1:PORT/loopchart
#
#   eval "$(bash .ci/postgres.sh)"
#
# Run as root on Debian. Installs PostgreSQL with apt when no initdb is found, because a
# fresh CI machine has nothing that was installed by hand. The cluster lives in a temp dir
# owned by `postgres` (initdb refuses to run as root), trusts 127.0.0.1 only, and listens on
# the first free port from $LOOPCHART_PG_PORT (default 54329) so it never collides with a
# system cluster on 5432 or with a previous run. Stop it with:
#   runuser -u postgres -- "$LOOPCHART_PG_BIN/pg_ctl" -D "$LOOPCHART_PG_DIR/data" stop -m fast
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
  local initdb
  initdb=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n "$initdb" ]]; then dirname "$initdb"; fi
}

BIN=$(find_bin)
if [[ -z "$BIN" ]]; then
  log "no initdb under /usr/lib/postgresql: installing postgresql with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends postgresql >&2
  BIN=$(find_bin)
  [[ -n "$BIN" ]] || { log "postgresql installed but no initdb found"; exit 1; }
fi
id postgres >/dev/null 2>&1 || { log "no postgres user (the apt package creates it)"; exit 1; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${LOOPCHART_PG_PORT:-54329}
for _ in $(seq 1 100); do
  port_in_use "$PORT" || break
  PORT=$((PORT + 1))
done
port_in_use "$PORT" && { log "no free port found"; exit 1; }

DIR=$(mktemp -d /tmp/loopchart-pg.XXXXXX)
chown postgres:postgres "$DIR"
chmod 700 "$DIR"
as_pg() { runuser -u postgres -- "$@"; }

log "initdb in $DIR/data ($BIN)"
as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$DIR/initdb.log" 2>&1 \
  || { cat "$DIR/initdb.log" >&2; exit 1; }

# The socket goes into the cluster's own dir: /var/run/postgresql may not exist without the
# system service, and a private dir cannot clash with another cluster's socket.
log "starting on 127.0.0.1:$PORT"
as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR" start >&2 \
  || { cat "$DIR/server.log" >&2; exit 1; }

as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres loopchart >&2

echo "export LOOPCHART_PG_DIR=$DIR LOOPCHART_PG_BIN=$BIN"
echo "export DATABASE_URL=postgres://postgres@127.0.0.1:$PORT/loopchart"
