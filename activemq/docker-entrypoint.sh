#!/bin/sh
# Start the tzpush broker in the foreground as PID 1 (docker stop = SIGTERM = graceful stop).
# Same command line as `tzpush services up` (devstack/processes.py), except where STOMP listens.
#
# Whoever reaches an open broker can redirect pending pushes, so there is no anonymous access and
# no default password: TZPUSH_STOMP__LOGIN and TZPUSH_STOMP__PASSCODE are required, and the broker
# listens on all interfaces with them. STOMP_LOOPBACK_ONLY=1 is the one exception: it listens on
# 127.0.0.1 only (reachable from inside the container or with `--network host`), anonymous unless
# credentials are given too.
set -eu

CONF=${ACTIVEMQ_CONF:-/opt/tzpush-activemq/conf}
BASE=${ACTIVEMQ_BASE:-/opt/tzpush-activemq/base}
DATA=${ACTIVEMQ_DATA:-/var/lib/activemq/data}
LOGIN=${TZPUSH_STOMP__LOGIN:-}
PASSCODE=${TZPUSH_STOMP__PASSCODE:-}
CREDENTIALS="$DATA/credentials.properties"

refuse() {
    echo "tzpush-activemq: $*" >&2
    exit 78 # EX_CONFIG
}

case "${STOMP_LOOPBACK_ONLY:-}" in
    1 | true | yes) HOST=127.0.0.1 ;;
    "" | 0 | false | no) HOST=0.0.0.0 ;;
    *) refuse "STOMP_LOOPBACK_ONLY must be 1 (listen on 127.0.0.1 only) or unset" ;;
esac

# A value of the credentials file: printable ASCII on one line (Java reads .properties as
# ISO-8859-1) and no `${` or `#{` (Spring would expand them). The refusal names the variable,
# never its value.
NL='
'
check_value() { # NAME VALUE
    case "$2" in
        *"$NL"*) refuse "$1 must be printable ASCII on one line" ;;
        *'${'* | *'#{'*) refuse "$1 must not contain \${ or #{ (Spring would expand it)" ;;
    esac
    if printf '%s' "$2" | LC_ALL=C grep -q '[^ -~]'; then
        refuse "$1 must be printable ASCII on one line"
    fi
}

# Java .properties escaping for a value: backslashes, and a leading space (else dropped).
escape_value() {
    printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/^ /\\ /'
}

if [ -n "$LOGIN" ] && [ -n "$PASSCODE" ]; then
    check_value TZPUSH_STOMP__LOGIN "$LOGIN"
    check_value TZPUSH_STOMP__PASSCODE "$PASSCODE"
    login=$(escape_value "$LOGIN")
    passcode=$(escape_value "$PASSCODE")
    # In a 0600 file, never on the command line (ps shows that to everyone).
    rm -f "$CREDENTIALS"
    (
        umask 077
        printf 'tzpush.auth.anonymous=false\ntzpush.stomp.login=%s\ntzpush.stomp.passcode=%s\n' \
            "$login" "$passcode" >"$CREDENTIALS"
    )
elif [ -n "$LOGIN" ]; then
    refuse "TZPUSH_STOMP__PASSCODE is not set (TZPUSH_STOMP__LOGIN is): set both"
elif [ -n "$PASSCODE" ]; then
    refuse "TZPUSH_STOMP__LOGIN is not set (TZPUSH_STOMP__PASSCODE is): set both"
elif [ "$HOST" = 127.0.0.1 ]; then
    rm -f "$CREDENTIALS" # anonymous, on loopback only
else
    refuse "refusing to start without STOMP credentials: set TZPUSH_STOMP__LOGIN and" \
        "TZPUSH_STOMP__PASSCODE (or STOMP_LOOPBACK_ONLY=1 to listen on 127.0.0.1 only)"
fi

# shellcheck disable=SC2086  # JAVA_OPTS is a list of options
exec java ${JAVA_OPTS:-} \
    -Dactivemq.home=/usr/share/activemq \
    -Dactivemq.base="$BASE" \
    -Dactivemq.conf="$CONF" \
    -Dactivemq.data="$DATA" \
    -Dactivemq.classpath="$CONF" \
    -Dlog4j.configuration="file:$CONF/log4j.properties" \
    -Dtzpush.stomp.host="$HOST" \
    -Dtzpush.stomp.port="${STOMP_PORT:-61613}" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$CONF/activemq.xml"
