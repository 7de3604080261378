#!/usr/bin/env bash
# The official postgres image's start-up, in short: on the first start (an
# empty $PGDATA) initdb with POSTGRES_USER/POSTGRES_PASSWORD, a temporary
# server on the socket only, CREATE DATABASE POSTGRES_DB, the scripts of
# /docker-entrypoint-initdb.d, stop; then the real server on every address.
set -Eeo pipefail

if [ "${1:0:1}" = '-' ]; then
  set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
  exec "$@"
fi
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_USER:=postgres}"
  : "${POSTGRES_DB:=$POSTGRES_USER}"
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
    echo 'Error: Database is uninitialized and superuser password is not specified.' >&2
    echo '       Set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust).' >&2
    exit 1
  fi
  pwfile=()
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    pw="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pw"
    pwfile=(--pwfile="$pw")
  fi
  # shellcheck disable=SC2086
  initdb --username="$POSTGRES_USER" "${pwfile[@]}" $POSTGRES_INITDB_ARGS >/dev/null
  rm -f "${pw:-}"
  auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
  printf '\nhost all all all %s\n' "$auth" >> "$PGDATA/pg_hba.conf"
  printf "\nlisten_addresses = '*'\n" >> "$PGDATA/postgresql.conf"

  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start
  export PGUSER="$POSTGRES_USER" PGPASSWORD="${POSTGRES_PASSWORD:-}"
  psql=(psql -v ON_ERROR_STOP=1 --no-password --no-psqlrc --dbname postgres)
  if [ "$POSTGRES_DB" != postgres ]; then
    "${psql[@]}" -q --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  psql+=(--dbname "$POSTGRES_DB")
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) "${psql[@]}" -f "$f" ;;
      *.sql.gz) gunzip -c "$f" | "${psql[@]}" ;;
      *) ;;
    esac
  done
  unset PGPASSWORD
  pg_ctl -D "$PGDATA" -m fast -w stop
  echo 'PostgreSQL init process complete; ready for start up.'
fi
exec "$@"
