# Timed CI steps with a budget, sourced by .ci/run (and tests/core/test_ci_budget.py):
#   step NAME COMMAND...   runs COMMAND, prints its time; on failure prints the table and exits with its status
#   step_beside NAME COMMAND...
#                          starts COMMAND in the background, its output to a log file (not interleaved with
#                          the steps that run meanwhile); the step runs beside the next ones
#   step_join NAME         waits for that step, prints its log, records its time (start to its own end) as
#                          "NAME (beside)";
#                          on failure prints the table and exits with its status
#   summary                the table of the steps so far, slowest first, and the whole run's time
#   check_budget           exit 3 with one line naming the slowest steps when the run took over BUDGET_S
# BUDGET_S: ELMOC_CI_BUDGET_S (seconds), default 2700, the 45 minutes the project allows CI (issue 43.4);
# the fresh-clone figures behind it are in docs/results.md ("CI steps").
BUDGET_S=${ELMOC_CI_BUDGET_S:-2700}
case $BUDGET_S in
    ''|*[!0-9]*) echo "ci: error: ELMOC_CI_BUDGET_S must be a whole number of seconds, got '$BUDGET_S'" >&2; exit 2;;
esac
CI_T0=$(date +%s)
CI_NAMES=()
CI_TIMES=()
_ci_by_time() {  # "seconds name" lines, slowest first
    local i
    for i in "${!CI_NAMES[@]}"; do echo "${CI_TIMES[$i]} ${CI_NAMES[$i]}"; done | sort -rn
}
summary() {
    echo "=== ci: step times"
    _ci_by_time | while read -r t name; do printf '%6d s  %s\n' "$t" "$name"; done
    printf '%6d s  %s\n' "$(( $(date +%s) - CI_T0 ))" "the whole run (budget ${BUDGET_S} s)"
}
step() {
    local name=$1 t0 rc=0
    shift
    t0=$(date +%s)
    echo "=== ci: $name"
    "$@" || rc=$?
    CI_NAMES+=("$name")
    CI_TIMES+=("$(( $(date +%s) - t0 ))")
    _ci_end "$name" "$rc"
}
_ci_end() {  # NAME RC: "passed", or "FAILED", the steps beside waited for, the table, exit RC
    local name=$1 rc=$2
    if [ "$rc" -ne 0 ]; then
        echo "=== ci: $name FAILED (exit $rc) after ${CI_TIMES[-1]} s"
        _ci_join_all
        summary
        exit "$rc"
    fi
    echo "=== ci: $name passed in ${CI_TIMES[-1]} s"
}
_ci_join_all() {  # a failed step still lets the steps beside it end (and stop their SLURM clusters) first
    local name
    for name in "${!CI_BESIDE_PID[@]}"; do
        echo "=== ci: waiting for $name, which runs beside, before exiting"
        _ci_wait_beside "$name" || echo "=== ci: $name FAILED too (exit $?)"
    done
}
declare -A CI_BESIDE_PID=() CI_BESIDE_LOG=() CI_BESIDE_T0=()
step_beside() {
    local name=$1
    shift
    CI_BESIDE_LOG[$name]=$(mktemp "${TMPDIR:-/tmp}/elmoc-ci-step.XXXXXX")
    CI_BESIDE_T0[$name]=$(date +%s)
    echo "=== ci: $name started beside the next steps (its output follows when it ends)"
    # its time ends when it ends (the first line of the log file's ".end"), not when it is joined
    ( rc=0; "$@" || rc=$?; date +%s > "${CI_BESIDE_LOG[$name]}.end"; exit "$rc" ) > "${CI_BESIDE_LOG[$name]}" 2>&1 &
    CI_BESIDE_PID[$name]=$!
}
_ci_wait_beside() {  # NAME: wait for it, print its output, record its time; returns its status
    local name=$1 rc=0
    wait "${CI_BESIDE_PID[$name]}" || rc=$?
    unset "CI_BESIDE_PID[$name]"
    CI_NAMES+=("$name (beside)")
    CI_TIMES+=("$(( $(cat "${CI_BESIDE_LOG[$name]}.end" 2>/dev/null || date +%s) - CI_BESIDE_T0[$name] ))")
    echo "=== ci: $name (ran beside the steps above; its output)"
    cat "${CI_BESIDE_LOG[$name]}"
    rm -f "${CI_BESIDE_LOG[$name]}" "${CI_BESIDE_LOG[$name]}.end"
    return "$rc"
}
step_join() {
    local name=$1 rc=0
    [ -n "${CI_BESIDE_PID[$name]:-}" ] || { echo "ci: error: step_join '$name': no such step_beside" >&2; exit 2; }
    _ci_wait_beside "$name" || rc=$?
    _ci_end "$name" "$rc"
}
check_budget() {
    local total slowest
    total=$(( $(date +%s) - CI_T0 ))
    if [ "$total" -gt "$BUDGET_S" ]; then
        slowest=$(_ci_by_time | head -n 3 | awk '{t = $1; $1 = ""; printf "%s%s (%d s)", (NR > 1 ? ", " : ""), substr($0, 2), t}')
        echo "ci: error: the whole run took ${total} s, over the budget of ${BUDGET_S} s (ELMOC_CI_BUDGET_S);" \
            "slowest steps: ${slowest}; make them faster, or raise the budget with measurements" >&2
        exit 3
    fi
    echo "=== ci: all steps passed in ${total} s (budget ${BUDGET_S} s)"
}
