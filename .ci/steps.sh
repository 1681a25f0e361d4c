# Timed CI steps with a budget, sourced by .ci/run (and tests/core/test_ci_budget.py):
#   step NAME COMMAND...   runs COMMAND, prints its time; on failure prints the table and exits with its status
#   summary                the table of the steps so far, slowest first, and the whole run's time
#   check_budget           exit 3 with one line naming the slowest steps when the run took over BUDGET_S
# BUDGET_S: ELMOC_CI_BUDGET_S (seconds), default 4200: the tenth session measured the steps at about
# 3,410 s on a fresh clone of this 2-core box (docs/results.md), 13 minutes under it.
BUDGET_S=${ELMOC_CI_BUDGET_S:-4200}
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
    if [ "$rc" -ne 0 ]; then
        echo "=== ci: $name FAILED (exit $rc) after ${CI_TIMES[-1]} s"
        summary
        exit "$rc"
    fi
    echo "=== ci: $name passed in ${CI_TIMES[-1]} s"
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
