#!/bin/bash
# mariadb-entrypoint.sh: the entrypoint of slurmop's MariaDB image (Debian's
# mariadb-server), for the database of an Accounting (slurmdbd). It takes the
# basic settings of the official image's environment, and only those:
#
#   MARIADB_ROOT_PASSWORD (or MYSQL_ROOT_PASSWORD)  root's password; or
#   MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1             root without one
#   MARIADB_DATABASE (MYSQL_DATABASE)               a database to create
#   MARIADB_USER, MARIADB_PASSWORD (MYSQL_*)        a user to create, with all
#                                                   rights on that database
#   *_FILE variants of the passwords                read from a file (a Secret)
#
# On the first start (no database in /var/lib/mysql, a volume) it creates the
# system tables, then the settings above, with a server that listens on no
# port; then, and on every later start, it runs the command (default
# `mariadbd`) as the mysql user (uid 999, as in the official image), on
# 0.0.0.0:3306. Arguments starting with '-' are options for mariadbd. The
# environment is read at the first start only, as in the official image.
set -euo pipefail

log() { printf '[%s] mariadb-entrypoint: %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# env_or_file NAME...: the value of the first NAME or NAME_FILE that is set.
env_or_file() {
    local n
    for n in "$@"; do
        if [ -n "${!n:-}" ]; then printf '%s' "${!n}"; return; fi
        local f=${n}_FILE
        if [ -n "${!f:-}" ]; then cat "${!f}"; return; fi
    done
}

# sql_str S: S as an SQL string literal.
sql_str() { local s=${1//\\/\\\\}; s=${s//\'/\\\'}; printf "'%s'" "$s"; }
sql_id() { local s=${1//\`/\`\`}; printf '`%s`' "$s"; }

if [ "${1:0:1}" = - ]; then set -- mariadbd "$@"; fi

DATADIR=/var/lib/mysql
if [ "${1:-}" = mariadbd ] || [ "${1:-}" = mysqld ]; then
    if [ "$(id -u)" = 0 ]; then
        mkdir -p "$DATADIR" /run/mysqld
        chown mysql:mysql "$DATADIR" /run/mysqld
    fi
    if [ ! -d "$DATADIR/mysql" ]; then
        root_pw=$(env_or_file MARIADB_ROOT_PASSWORD MYSQL_ROOT_PASSWORD)
        allow_empty=${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-${MYSQL_ALLOW_EMPTY_PASSWORD:-}}
        if [ -z "$root_pw" ] && [ -z "$allow_empty" ]; then
            log "error: the database is not initialized and no root password is set"
            log "set MARIADB_ROOT_PASSWORD (or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1)"
            exit 1
        fi
        db=$(env_or_file MARIADB_DATABASE MYSQL_DATABASE)
        user=$(env_or_file MARIADB_USER MYSQL_USER)
        pw=$(env_or_file MARIADB_PASSWORD MYSQL_PASSWORD)
        log "initializing $DATADIR"
        as=()
        [ "$(id -u)" != 0 ] || as=(--user=mysql)
        mariadb-install-db "${as[@]}" --datadir="$DATADIR" --skip-test-db --auth-root-authentication-method=normal \
            --skip-name-resolve >/dev/null
        # A server on its socket only, for the set-up statements.
        sock=/run/mysqld/init.sock
        mariadbd "${as[@]}" --datadir="$DATADIR" --skip-networking --socket="$sock" --skip-log-error &
        init_pid=$!
        for _ in $(seq 300); do
            mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1 && break
            kill -0 "$init_pid" 2>/dev/null || { log "error: the server did not start"; exit 1; }
            sleep 0.1
        done
        {
            echo "SET @@SESSION.SQL_LOG_BIN=0;"
            echo "DELETE FROM mysql.global_priv WHERE User='' OR (User='root' AND Host NOT IN ('localhost'));"
            echo "CREATE USER IF NOT EXISTS 'root'@'%';"
            echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
            echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_str "$root_pw");"
            echo "ALTER USER 'root'@'%' IDENTIFIED BY $(sql_str "$root_pw");"
            if [ -n "$db" ]; then echo "CREATE DATABASE IF NOT EXISTS $(sql_id "$db");"; fi
            if [ -n "$user" ]; then
                echo "CREATE USER $(sql_str "$user")@'%' IDENTIFIED BY $(sql_str "$pw");"
                if [ -n "$db" ]; then echo "GRANT ALL ON $(sql_id "$db").* TO $(sql_str "$user")@'%';"; fi
            fi
            echo "FLUSH PRIVILEGES;"
        } | mariadb --socket="$sock" -uroot
        mariadb-admin --socket="$sock" -uroot ${root_pw:+--password="$root_pw"} shutdown
        wait "$init_pid" || true
        log "initialized${db:+ (database $db)}${user:+ (user $user)}"
    fi
    if [ "$(id -u)" = 0 ]; then set -- "$@" --user=mysql; fi
fi
exec "$@"
