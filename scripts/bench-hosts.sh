#!/usr/bin/env bash
# Two test "hosts" made of network namespaces, for benchmarking kumi's network
# transport beside MPICH and Open MPI over TCP between the same two hosts:
#
#   scripts/bench-hosts.sh kumi bench pingpong --vs mpich,openmpi
#
# Creates namespaces kb-10.253.0.1 and kb-10.253.0.2 joined by a bridge in a
# third namespace (addresses exist only inside them), runs the given command
# inside the first one with --hosts and --rsh added, and removes everything on
# exit. The --rsh helper accepts ssh-style options (MPICH's hydra and Open MPI's
# rsh agent pass some) and maps a host name to its namespace. Needs root.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench-hosts.sh: needs root (ip netns)" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: scripts/bench-hosts.sh kumi bench <kernel> [options]" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/kumi-bench-hosts.XXXXXX)
h1=10.253.0.1; h2=10.253.0.2; sw=kb-sw-$$
cleanup() {
    for ns in "kb-$h1" "kb-$h2"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    ip netns del "$sw" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
i=0
for h in $h1 $h2; do
    i=$((i + 1))
    ns=kb-$h
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "kbh$i-$$" type veth peer name "kbs$i-$$"
    ip link set "kbh$i-$$" netns "$ns"
    ip link set "kbs$i-$$" netns "$sw"
    ip -n "$ns" link set "kbh$i-$$" name eth0
    ip -n "$ns" addr add "$h/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$sw" link set "kbs$i-$$" master br0
    ip -n "$sw" link set "kbs$i-$$" up
done

cat > "$work/rsh" <<'RSH'
#!/bin/sh
# ssh-compatible: skip options, then HOST COMMAND...
while [ $# -gt 0 ]; do
    case "$1" in
        -o|-p|-l|-i|-F) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
host=$1; shift
exec ip netns exec "kb-$host" sh -c "$*"
RSH
chmod +x "$work/rsh"

cmd=("$@")
# A bare `kumi` means the one built in this checkout, or $KUMI_BIN (a copy that
# a concurrent `cargo build` cannot replace in the middle of a run).
if [ "${cmd[0]}" = kumi ]; then cmd[0]="${KUMI_BIN:-$here/../target/release/kumi}"; fi
ip netns exec "kb-$h1" "${cmd[@]}" --hosts "$h1:1,$h2:1" --rsh "$work/rsh"
