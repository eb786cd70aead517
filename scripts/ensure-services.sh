#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer, starting them
# with the usual Debian commands when they do not. Fails with a clear message otherwise.
set -uo pipefail

pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_ready() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

wait_for() {  # wait_for <check-fn> <seconds>
  local fn=$1 deadline=$((SECONDS + $2))
  until $fn; do
    (( SECONDS >= deadline )) && return 1
    sleep 0.5
  done
}

if ! pg_ready; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting it" >&2
  if command -v pg_lsclusters >/dev/null 2>&1; then
    version=$(pg_lsclusters --no-header 2>/dev/null | awk 'NR==1 {print $1}')
    if [ -n "${version}" ]; then
      pg_ctlcluster --skip-systemctl-redirect "${version}" main start >&2 || true
    fi
  fi
  if ! wait_for pg_ready 30; then
    echo "error: could not start PostgreSQL on 127.0.0.1:5432 (tried pg_ctlcluster). Start it and rerun, or set DATABASE_URL." >&2
    exit 1
  fi
fi

if ! redis_ready; then
  echo "Redis is not answering on 127.0.0.1:6379; starting it" >&2
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >&2 || true
  fi
  if ! wait_for redis_ready 20; then
    echo "error: could not start Redis on 127.0.0.1:6379 (tried redis-server --daemonize yes). Start it and rerun." >&2
    exit 1
  fi
fi

# The suite's database: pytest-django creates test_agentclash from it.
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='agentclash'" 2>/dev/null | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE agentclash" >/dev/null
echo "services: PostgreSQL and Redis are up" >&2
