#!/usr/bin/env bash
# Instructions per message (per round trip for pingpong) on the small-message paths, through the MPI C ABI
# and through the Rust API: the same fixed-count loops (probe.c and
# examples/probe.rs) run under valgrind's callgrind, two ranks on this host.
#
#   scripts/count-instructions.sh [pingpong|rate|barrier|allreduce|iallreduce|allgather|iallgather|gather|gatherv|scatter|scatterv|bcast|reduce ...]   (default: pingpong rate)
#   scripts/count-instructions.sh --path [kernel ...]
#
# Counts are exact and repeatable, unlike times on a noisy machine, so they
# show what a change to the hot path costs or saves before any timing: a
# change that adds instructions per message shows here as a number, not as
# a drift inside the noise. Waiting loops spin a varying number of times, so
# compare the entry points' inclusive counts minus the engine's wait
# (`Engine::wait`, `Engine::wait_until`), and the whole-rank totals of `rate`,
# whose receiver rarely waits. Needs valgrind (apt-get install valgrind).
#
# --path counts per instruction instead (callgrind --dump-instr) and keeps
# those executed once per message or round trip (0.9 to 1.1 times): the
# message's own path, without the wait loop's passes, which vary from run to
# run. It prints them per function on ranks 0 and 1, and
# their total: what a change to the small-message path saves shows there
# even when the waiting around it hides it from the inclusive counts. (The
# total includes a receive's set-up, which overlaps the message's transfer.)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "count-instructions: install valgrind first" >&2; exit 1; }
path=0
if [ "${1:-}" = --path ]; then
    path=1
    shift
fi
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(pingpong rate)
cargo build --release --workspace -q
cargo build --release -q -p kumi --example probe
out=$(mktemp -d /tmp/kumi-count.XXXXXX)
trap 'rm -rf "$out"' EXIT
target/release/kumi cc -O2 crates/kumi-bench/c/probe.c -o "$out/probe_c"
for k in "${kernels[@]}"; do
    case $k in
        pingpong) count=20000; msgs=$count; unit="round trip (a send and a receive on each rank)" ;;
        rate) count=300; msgs=$((64 * count)); unit="message" ;;
        barrier|allreduce|iallreduce|allgather|iallgather|gather|gatherv|scatter|scatterv|bcast|reduce) count=20000; msgs=$count; unit="call" ;;
        *) echo "count-instructions: unknown kernel $k (pingpong, rate, barrier, allreduce, iallreduce, allgather, iallgather, gather, gatherv, scatter, scatterv, bcast, reduce)" >&2; exit 2 ;;
    esac
    for side in c rust; do
        prog=$out/probe_c
        [ $side = rust ] && prog=target/release/examples/probe
        if [ $path = 1 ]; then
            target/release/kumi run -n 2 valgrind --tool=callgrind --dump-instr=yes \
                --compress-pos=no --compress-strings=no \
                --callgrind-out-file="$out/$side.$k.%q{KUMI_RANK}" "$prog" "$k" "$count" >/dev/null 2>&1
            # Rank 1 is the receiver of `rate`; rank 0 the root of the rooted
            # collectives.
            for rank in 0 1; do
            printf '== %s %s, rank %d: instructions executed once per %s, by function\n' "$side" "$k" "$rank" "$unit"
            python3 -c '
import re, sys, collections
f, n = sys.argv[1], float(sys.argv[2])
cost = collections.defaultdict(collections.Counter)
fn, skip = None, False
for line in open(f):
    line = line.rstrip("\n")
    if line.startswith("fn="):
        fn, skip = line[3:], False
    elif line.startswith("calls="):
        skip = True  # the next cost line is the call, inclusive
    elif not line.startswith(("cfn=", "cob=", "cfl=", "cfi=")):
        m = re.match(r"^(0x[0-9a-f]+) \d+ (\d+)$", line)
        if m and fn:
            if skip:
                skip = False
            else:
                cost[fn][m.group(1)] += int(m.group(2))
rows = []
for fn, c in cost.items():
    once = sum(v for v in c.values() if 0.9 <= v / n <= 1.1) / n
    if once >= 2:
        rows.append((once, fn))
for once, fn in sorted(rows, reverse=True):
    print(f"  {once:8.1f}  {fn[:100]}")
print(f"  {sum(r[0] for r in rows):8.1f}  in all")
' "$out/$side.$k.$rank" "$msgs"
            done
            continue
        fi
        target/release/kumi run -n 2 valgrind --tool=callgrind \
            --callgrind-out-file="$out/$side.$k.%q{KUMI_RANK}" "$prog" "$k" "$count" >/dev/null 2>&1
        for rank in 0 1; do
            f=$out/$side.$k.$rank
            total=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
            printf '== %s %s, rank %d: %.0f instructions per %s in all\n' "$side" "$k" "$rank" \
                "$(awk -v t="$total" -v n="$msgs" 'BEGIN { print t / n }')" "$unit"
            # Inclusive counts per message of the entry points and the engine's
            # main steps (functions inlined into their callers do not appear).
            callgrind_annotate --inclusive=yes "$f" 2>/dev/null | python3 -c '
import re, sys
n = int(sys.argv[1])
want = re.compile(r"(^P?MPI_[A-Za-z]+$|Comm::(send_on|recv_on|isend_on)$|raw::(wait_all|irecv_contig|recv_contig|send_contig)$|Engine::(wait|wait_until|start_send|post_recv|on_frame|complete_eager|progress)$|Comm>::(allreduce_at|barrier)$|Comm::(gather|gatherv|scatter|scatterv|gather_segments|scatter_segments|gatherv_segments|scatterv_segments)$|coll::shm::(allreduce|barrier|gather|scatter)$|Transport>::(poll|try_send)$)")
seen = set()
for line in sys.stdin:
    m = re.match(r"^\s*([0-9,]+) \([ 0-9.]+%\)\s+\S*?:(.+?) \[", line)
    if not m:
        continue
    name = m.group(2)
    if not want.search(name) or name in seen:
        continue
    seen.add(name)
    short = re.sub(r"^.*?((Comm|raw|Engine)::|Transport>::)", r"\1", name)
    x = int(m.group(1).replace(",", "")) / n
    if x >= 1:
        print(f"  {x:8.1f}  {short}")
' "$msgs"
        done
    done
done
