#!/usr/bin/env python3
"""Listening ports for the daemons the tests start (Slurm labs, the real
control plane and its Nodes): `python3 tests/lib/ports.py N` prints N
distinct ports, one line, space-separated.

Why not bind(0): the kernel hands out ports from the ephemeral range, the
same range every outgoing connection on this host draws from, and a port
is only found free, not kept: between this program's answer and the
daemon's bind (seconds, for slurmctld under AddressSanitizer) another lab's
allocation or any client's connect() can take it. Two labs started within a
second then got into each other's way. So the ports come from below the
ephemeral range (20000-29999, then 10300-19999 once those are all taken: no
outgoing connection is given one of those, and Kubernetes' NodePort range
starts at 30000), and each one handed out is
written into a host-wide reservation list under a lock, so that no other
caller gets it for RESERVE_S seconds, by which time its daemon listens on
it (a port still taken then fails the bind test below).

A lab restarts its daemons (slurmd, slurmrestd, slurmctld) and the port is
unbound for that moment; a lab that outlived a 600 s lease could then see
another lab's daemon take it, and one lab's slurmctld talk to the other
lab's slurmd. So a caller that names an owner (--owner DIR: the lab's or
the cluster's folder) keeps its ports for OWNED_S seconds, long past any
test, and gives them back when it stops (--release DIR); a lab that died
without stopping frees them when OWNED_S ends.
"""

import fcntl
import json
import os
import random
import socket
import sys
import time

LOW, HIGH = 20000, 29999
# Handed out only once 20000-29999 has none free: a registration benchmark
# of more than 9,000 nodes keeps a port per node. Above the control plane's
# own ports (10250-10259) and below the ephemeral range.
SPILL_LOW, SPILL_HIGH = 10300, 19999
RESERVE_S = 600
OWNED_S = 3 * 3600
STATE = os.environ.get("SLURMOP_TEST_PORTS", "/tmp/slurmop-test-ports-%d.json" % os.getuid())


def bindable(port):
    """True when nothing on this host listens on or is bound to port (TCP,
    any address): a bind to the wildcard address fails for either."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def load(now):
    """{port: (until, owner)} of the reservations still held."""
    try:
        with open(STATE) as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return {}
    held = {}
    for k, v in raw.items():
        until, owner = (v, "") if isinstance(v, (int, float)) else (v.get("until", 0), v.get("owner", ""))
        if until > now:
            held[int(k)] = (until, owner)
    return held


def save(held):
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump({str(p): {"until": u, "owner": o} for p, (u, o) in held.items()}, f)
    os.replace(tmp, STATE)


def locked(fn):
    with open(STATE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return fn()


def reserve(n, owner="", now=None):
    now = time.time() if now is None else now

    def take():
        held = load(now)
        got = []
        for low, high in ((LOW, HIGH), (SPILL_LOW, SPILL_HIGH)):
            candidates = [p for p in range(low, high + 1) if p not in held]
            random.shuffle(candidates)
            for p in candidates:
                if len(got) == n:
                    break
                if bindable(p):
                    got.append(p)
        if len(got) < n:
            raise SystemExit("ports.py: only %d of %d free ports in %d-%d and %d-%d" %
                             (len(got), n, LOW, HIGH, SPILL_LOW, SPILL_HIGH))
        for p in got:
            held[p] = (now + (OWNED_S if owner else RESERVE_S), owner)
        save(held)
        return got
    return locked(take)


def release(owner, now=None):
    """Drops owner's reservations; returns how many there were."""
    now = time.time() if now is None else now

    def drop():
        held = load(now)
        mine = [p for p, (_, o) in held.items() if o == owner]
        for p in mine:
            del held[p]
        save(held)
        return len(mine)
    return locked(drop)


USAGE = "usage: ports.py N [--owner DIR] | ports.py --release DIR"


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--release":
        release(os.path.abspath(args[1]))
        return
    owner = ""
    if len(args) == 3 and args[1] == "--owner":
        owner = os.path.abspath(args[2])
        args = args[:1]
    if len(args) != 1 or not args[0].isdigit() or int(args[0]) < 1:
        raise SystemExit(USAGE)
    print(" ".join(str(p) for p in reserve(int(args[0]), owner)))


if __name__ == "__main__":
    main()
