#!/bin/sh
# One heartbeat run of an agent, checked by replyguard and retried with its feedback.
#
# usage: heartbeat.sh -w WORKSPACE [-c CONFIG] [-n RETRIES] [-l LOGFILE] AGENT_COMMAND [ARG...]
#
#   -w WORKSPACE  the folder holding HEARTBEAT.md; the agent runs there
#   -c CONFIG     the verifier's JSON config file (else replyguard's defaults)
#   -n RETRIES    how many times a FAILed reply is sent back to the agent (default 2)
#   -l LOGFILE    append the log lines there (default: stderr)
#
# AGENT_COMMAND gets its prompt on stdin and prints its reply on stdout. The first prompt asks
# it to work through HEARTBEAT.md ($HEARTBEAT_PROMPT replaces it); after a FAIL the prompt is
# replyguard's feedback, which is also in $HEARTBEAT_FEEDBACK. $HEARTBEAT_ATTEMPT counts runs.
# Each reply is piped to `replyguard heartbeat` ($REPLYGUARD names another binary): exit 0
# means the reply may be delivered, 1 a FAIL (the agent runs again), 2 a usage or config error.
#
# The delivered reply goes to stdout. One log line per attempt, then a final one:
#   2026-05-03T06:00:04Z heartbeat attempt=1 status=failed category=goal_missed cost_usd=0.0
#   2026-05-03T06:00:09Z heartbeat final status=passed attempts=2
#
# Exit status: 0 when the reply may be delivered (passed, skipped, failed_open, flagged);
# 1 when it still FAILs after every retry (status exhausted; the last reply is printed);
# 2 on a usage or config error; the agent's own exit status when its first run fails. When a
# retry fails, the previous reply is delivered (status failed_open, reason agent_error), as
# replyguard itself does.
set -eu

usage() {
    echo "usage: heartbeat.sh -w WORKSPACE [-c CONFIG] [-n RETRIES] [-l LOGFILE]" \
        "AGENT_COMMAND [ARG...]" >&2
    exit 2
}

workspace=""
config=""
retries=2
logfile=""
while getopts "w:c:n:l:" option; do
    case "$option" in
    w) workspace=$OPTARG ;;
    c) config=$OPTARG ;;
    n) retries=$OPTARG ;;
    l) logfile=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$workspace" ] && [ "$#" -gt 0 ] || usage
case "$retries" in
'' | *[!0-9]*) echo "heartbeat.sh: -n takes a whole number, not '$retries'" >&2 && exit 2 ;;
esac

REPLYGUARD=${REPLYGUARD:-replyguard}
HEARTBEAT_PROMPT=${HEARTBEAT_PROMPT:-"Heartbeat: read HEARTBEAT.md in this folder and work \
through every open task listed there. Reply HEARTBEAT_OK only when nothing needs attention; \
otherwise report what you did."}
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT

log() {
    line="$(date -u +%Y-%m-%dT%H:%M:%SZ) heartbeat $*"
    if [ -n "$logfile" ]; then
        printf '%s\n' "$line" >>"$logfile"
    else
        printf '%s\n' "$line" >&2
    fi
}

# field JSON NAME: a string, number or null field of replyguard's one-line JSON output.
field() {
    printf '%s\n' "$1" | sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# run_agent PROMPT COMMAND [ARG...]: the agent's reply, run in the workspace, prompt on stdin.
run_agent() {
    input=$1
    shift
    printf '%s\n' "$input" | (cd "$workspace" && "$@")
}

# judge REPLY: replyguard's verdict JSON on stdout, its messages (the feedback) in $errors.
judge() {
    if [ -n "$config" ]; then
        printf '%s' "$1" | "$REPLYGUARD" heartbeat --workspace "$workspace" --config "$config" - \
            2>"$errors"
    else
        printf '%s' "$1" | "$REPLYGUARD" heartbeat --workspace "$workspace" - 2>"$errors"
    fi
}

attempt=1
prompt=$HEARTBEAT_PROMPT
HEARTBEAT_FEEDBACK=""
export HEARTBEAT_FEEDBACK HEARTBEAT_ATTEMPT
while :; do
    HEARTBEAT_ATTEMPT=$attempt
    if reply=$(run_agent "$prompt" "$@"); then code=0; else code=$?; fi
    if [ "$code" -ne 0 ]; then
        if [ "$attempt" -eq 1 ]; then
            log "attempt=1 status=agent_failed exit=$code"
            exit "$code"
        fi
        log "final status=failed_open reason=agent_error attempts=$attempt"
        printf '%s\n' "$delivered"
        exit 0
    fi
    delivered=$reply
    if verdict=$(judge "$reply"); then code=0; else code=$?; fi
    if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
        log "attempt=$attempt status=error exit=$code: $(tr '\n' ' ' <"$errors")"
        exit 2
    fi
    status=$(field "$verdict" status)
    log "attempt=$attempt status=$status category=$(field "$verdict" category)" \
        "cost_usd=$(field "$verdict" costUsd)"
    if [ "$code" -eq 0 ] && [ -s "$errors" ]; then
        # replyguard's own line: a fail-open and why (a missing key, a timeout), or a notice
        log "attempt=$attempt $(tr '\n' ' ' <"$errors" | sed 's/ *$//')"
    fi
    if [ "$code" -eq 0 ]; then
        log "final status=$status attempts=$attempt"
        printf '%s\n' "$reply"
        exit 0
    fi
    if [ "$attempt" -gt "$retries" ]; then
        log "final status=exhausted attempts=$attempt"
        printf '%s\n' "$reply"
        exit 1
    fi
    HEARTBEAT_FEEDBACK=$(cat "$errors")
    prompt=$HEARTBEAT_FEEDBACK
    attempt=$((attempt + 1))
done
