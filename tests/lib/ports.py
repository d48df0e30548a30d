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
ephemeral range (20000-29999: no outgoing connection is given one of those,
and Kubernetes' NodePort range starts at 30000), and each one handed out is
written into a host-wide reservation list under a lock, so that no other
caller gets it for RESERVE_S seconds, by which time its daemon listens on
it (a port still taken then fails the bind test below).
"""

import fcntl
import json
import os
import random
import socket
import sys
import time

LOW, HIGH = 20000, 29999
RESERVE_S = 600
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


def reserve(n, now=None):
    now = time.time() if now is None else now
    with open(STATE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(STATE) as f:
                held = {int(k): v for k, v in json.load(f).items()}
        except (OSError, ValueError):
            held = {}
        held = {p: t for p, t in held.items() if t > now}
        candidates = [p for p in range(LOW, HIGH + 1) if p not in held]
        random.shuffle(candidates)
        got = []
        for p in candidates:
            if len(got) == n:
                break
            if bindable(p):
                got.append(p)
        if len(got) < n:
            raise SystemExit("ports.py: only %d of %d free ports in %d-%d" % (len(got), n, LOW, HIGH))
        for p in got:
            held[p] = now + RESERVE_S
        tmp = STATE + ".tmp"
        with open(tmp, "w") as f:
            json.dump({str(p): t for p, t in held.items()}, f)
        os.replace(tmp, STATE)
    return got


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        raise SystemExit("usage: ports.py N")
    print(" ".join(str(p) for p in reserve(int(sys.argv[1]))))


if __name__ == "__main__":
    main()
