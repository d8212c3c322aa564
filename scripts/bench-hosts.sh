#!/usr/bin/env bash
# Two test "hosts" made of network namespaces, for benchmarking kumi's network
# transport beside MPICH and Open MPI over TCP between the same two hosts:
#
#   scripts/bench-hosts.sh kumi bench pingpong --vs mpich,openmpi
#
# Creates namespaces kb-10.253.0.1, kb-10.253.0.2, ... joined by a bridge in
# another namespace (addresses exist only inside them), runs the given command
# inside the first one with --hosts and --rsh added, and removes everything on
# exit. KB_HOSTS sets the number of hosts (default 2), KB_SLOTS the ranks per
# host (default 1). The --rsh helper accepts ssh-style options (MPICH's hydra and Open MPI's
# rsh agent pass some) and maps a host name to its namespace. Needs root.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench-hosts.sh: needs root (ip netns)" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: scripts/bench-hosts.sh kumi bench <kernel> [options]" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/kumi-bench-hosts.XXXXXX)
nhosts=${KB_HOSTS:-2}; slots=${KB_SLOTS:-1}
case "$nhosts$slots" in *[!0-9]*) echo "bench-hosts.sh: KB_HOSTS and KB_SLOTS are counts" >&2; exit 2 ;; esac
[ "$nhosts" -ge 1 ] && [ "$nhosts" -le 200 ] && [ "$slots" -ge 1 ] || { echo "bench-hosts.sh: KB_HOSTS must be 1..200, KB_SLOTS at least 1" >&2; exit 2; }
hosts=(); for i in $(seq 1 "$nhosts"); do hosts+=("10.253.0.$i"); done
h1=${hosts[0]}; sw=kb-sw-$$
cleanup() {
    for h in "${hosts[@]}"; do
        ns=kb-$h
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
for h in "${hosts[@]}"; do
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
list=$(printf "%s:$slots," "${hosts[@]}")
ip netns exec "kb-$h1" "${cmd[@]}" --hosts "${list%,}" --rsh "$work/rsh"
