#!/usr/bin/env bash
# The nightly regression job (README, "Nightly regression recipe"): tonight's server judged
# against the screened history of earlier nights, one command every night. MODEL is the served
# model name, ENDPOINT its URL (http://127.0.0.1:8000/v1), NIGHTLY_SET more --set flags.
# Night 1 (no earlier night yet) records the history and passes; later nights are judged night
# against night: pass on no change detected, fail on 1 (regressed) and 5 (not comparable: the load,
# trace or server configuration changed), warn and pass on 4 (inconclusive: night 2, with one
# earlier night, always; later, a busy host or nights that differ). 2: bad input.
nightly() {
    local night="results/nightly-${NIGHT:-$(date +%F)}" code
    harness gate scenarios/endpoint.yaml --set target.model="${MODEL:?the served model name}" \
        --set "target.endpoints=[{url: ${ENDPOINT:-http://127.0.0.1:8000/v1}}]" ${NIGHTLY_SET:-} \
        --history 'results/nightly-*/b*' -o "$night" --budget-min "${BUDGET_MIN:-30}"
    code=$?
    case $code in
        0) echo "nightly: passed ($night/gate.md)" ;;
        1) echo "::error::nightly: REGRESSED ($night/gate.md)" ;;
        4) echo "::warning::nightly: inconclusive, $night/gate.md says why" ;;
        5) echo "::error::nightly: NOT COMPARABLE, the load, trace or configuration changed ($night/gate.md)" ;;
        *) echo "::error::nightly: the gate could not run (exit $code)" ;;
    esac
    if [ "$code" = 4 ]; then return 0; fi
    return "$code"
}
nightly  # a function, so that pasted into a shell it returns its code instead of closing it
