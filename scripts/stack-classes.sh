#!/usr/bin/env bash
# Runs a command once per stack position class, for A/B timing on this machine.
#
#   scripts/stack-classes.sh [--runs N] COMMAND [ARG...]
#   e.g. scripts/stack-classes.sh --runs 2 target/release/kumi bench bw --max-size 128 --reps 3 --rep-ms 30
#
# Why: where a rank's stack falls within a 64-byte cache line decided the
# small-message streaming rate by up to 40 % (docs/BENCHMARKS.md, session
# 19): one position of four was slow, and address randomization picks the
# position anew every run, so an A/B of a few runs could compare different
# positions rather than the two builds. This runs COMMAND with randomization
# off (`setarch -R`, inherited by every rank `kumi run` starts), where the
# stack moves only with the size of the environment, and pads the
# environment (a variable STACK_PAD of 0, 16, 32 and 48 bytes) to step
# it through the four positions. Each run's output is prefixed with its
# class. A build whose figures do not depend on the class is comparable in
# a handful of ordinary runs; one that has a slow class is not.
set -euo pipefail
runs=1
if [ "${1:-}" = --runs ]; then
    runs=${2:?--runs takes a number}
    shift 2
fi
if [ $# -eq 0 ]; then
    sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
command -v setarch >/dev/null || { echo "stack-classes: setarch (util-linux) is needed" >&2; exit 1; }
for pad in 0 16 32 48; do
    for _ in $(seq "$runs"); do
        STACK_PAD=$(printf '%*s' "$pad" '' | tr ' ' x) setarch -R "$@" 2>&1 |
            sed "s/^/[pad $pad] /"
    done
done
