#!/bin/sh
# Start the tzpush broker in the foreground as PID 1 (docker stop = SIGTERM = graceful stop).
# Same command line as shared/services.py, except that STOMP listens on all interfaces.
set -eu

CONF=${ACTIVEMQ_CONF:-/opt/tzpush-activemq/conf}
BASE=${ACTIVEMQ_BASE:-/opt/tzpush-activemq/base}
DATA=${ACTIVEMQ_DATA:-/var/lib/activemq/data}

# Credentials go in a file, never on the command line (ps shows that to everyone). A value must
# not contain a backslash or a newline (Java .properties).
if [ -n "${TZPUSH_STOMP__LOGIN:-}" ]; then
    umask 077
    printf 'tzpush.auth.anonymous=false\ntzpush.stomp.login=%s\ntzpush.stomp.passcode=%s\n' \
        "$TZPUSH_STOMP__LOGIN" "${TZPUSH_STOMP__PASSCODE:-}" >"$DATA/credentials.properties"
else
    rm -f "$DATA/credentials.properties"
fi

# shellcheck disable=SC2086  # JAVA_OPTS is a list of options
exec java ${JAVA_OPTS:-} \
    -Dactivemq.home=/usr/share/activemq \
    -Dactivemq.base="$BASE" \
    -Dactivemq.conf="$CONF" \
    -Dactivemq.data="$DATA" \
    -Dactivemq.classpath="$CONF" \
    -Dlog4j.configuration="file:$CONF/log4j.properties" \
    -Dtzpush.stomp.host=0.0.0.0 \
    -Dtzpush.stomp.port="${STOMP_PORT:-61613}" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$CONF/activemq.xml"
