#!/usr/bin/env python3
"""bench_idle: are normal requests still answered, and how fast, while
many idle or slow connections from one address are open?

    tests/bench/bench_idle.py [--bin build-bench/gatehouse] [--conns 2000]
        [--requests 200] [--cap N] [--threads N] [--legacy]

Starts gatehouse on loopback (mock model, nothing else), measures GET
/healthz from 127.0.0.1 on fresh connections, then opens --conns
connections from 127.0.0.2 (half send nothing, half the start of a request
head and then one byte a second) and measures again while they are open.
Prints, for each phase, how many requests were answered within the
per-request timeout (5 s) and their latency (p50, p99, max).

--cap sets server.max_connections_per_address (default: gatehouse's
default; 0 turns it off, so every connection is held by the front);
--threads sets server.threads. --legacy writes a config without the
options older gatehouse builds do not know, to measure them the same way.
Loopback only; every loop is bounded in count and time. Python 3 stdlib.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def start(binary, cap, threads, legacy, head_ms):
    d = tempfile.mkdtemp(prefix="gh-bench-idle-")
    server = {"listen": "127.0.0.1:0"}
    if threads:
        server["threads"] = threads
    if not legacy:
        server["head_timeout_ms"] = head_ms
        if cap is not None:
            server["max_connections_per_address"] = cap
    cfg = {"server": server, "database": {"path": "gh.db"},
           "providers": {"offline": {"type": "mock", "default": "ok"}},
           "agents": {"assistant": {"provider": "offline", "model": "m"}},
           "policies": {"default": {"agents": ["*"], "tools": {"allow": ["*"]}}}}
    path = os.path.join(d, "gatehouse.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = open(os.path.join(d, "out"), "w+")
    err = open(os.path.join(d, "err"), "w+")
    p = subprocess.Popen([binary, "serve", "--config", path], cwd=d, stdout=out, stderr=err)
    deadline = time.time() + 30
    while time.time() < deadline:
        out.seek(0)
        m = re.search(r"listening on http://[^:]+:(\d+)", out.read())
        if m:
            return p, int(m.group(1)), d
        if p.poll() is not None:
            break
        time.sleep(0.05)
    err.seek(0)
    raise SystemExit("gatehouse did not start:\n" + err.read()[-2000:])


def one_request(port, timeout):
    t0 = time.perf_counter()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(max(0.01, timeout - (time.perf_counter() - t0)))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        s.close()
    except OSError:
        return None
    if not buf.startswith(b"HTTP/1.1 200"):
        return None
    return (time.perf_counter() - t0) * 1000.0


def measure(port, n, timeout):
    lat = []
    for _ in range(n):
        ms = one_request(port, timeout)
        if ms is not None:
            lat.append(ms)
    return lat


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def report(label, n, lat):
    print("%-44s answered %4d/%-4d  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms"
          % (label, len(lat), n, pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan")))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-bench", "gatehouse"))
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--cap", type=int, default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--head-ms", type=int, default=10000)
    ap.add_argument("--legacy", action="store_true")
    a = ap.parse_args()

    proc, port, d = start(a.bin, a.cap, a.threads, a.legacy, a.head_ms)
    socks, slow = [], []
    stop = threading.Event()
    try:
        report("no other connections", a.requests, measure(port, a.requests, a.timeout))
        refused = 0
        t0 = time.time()
        for i in range(a.conns):
            if time.time() - t0 > 60:
                break
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                refused += 1
                s.close()
                continue
            if i % 2:
                try:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
                    slow.append(s)
                except OSError:
                    refused += 1
                    s.close()
                    continue
            socks.append(s)

        def dribble():
            # one byte a second on each slow connection, for as long as the
            # measurement runs (bounded by the stop event)
            while not stop.wait(1.0):
                for s in slow:
                    try:
                        s.send(b"o", socket.MSG_DONTWAIT)
                    except OSError:
                        pass

        t = threading.Thread(target=dribble, daemon=True)
        t.start()
        time.sleep(0.5)
        label = "%d idle/slow connections from 127.0.0.2" % len(socks)
        report(label, a.requests, measure(port, a.requests, a.timeout))
        stop.set()
        t.join(5)
        print("  (connections the OS refused at connect: %d)" % refused)
    finally:
        stop.set()
        for s in socks:
            s.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
