#!/usr/bin/env python3
"""connection_cost.py - what a stranger's connections cost a worker (docs/security.md).

Starts cdcgemm-worker on tcp loopback (with CURVE, or plaintext), opens N raw
TCP connections that each speak just enough ZMTP 3 to make libzmq allocate a
frame, sends that frame's bytes but one (so it is never complete and never
handed to the mechanism), keeps the connections open, and reads the worker's
VmRSS from /proc/PID/status before and after.

Attacks (--attack):
  frame      greeting, then one frame of --frame-bytes (default: 4 MiB, the
             largest ZMQ_MAXMSGSIZE admits) all sent but its last byte. With
             CURVE this is a handshake command frame: what anyone can cause
             before authenticating. Without CURVE the NULL handshake is
             completed first (READY), then a message frame.
  oversize   greeting, then a frame header announcing --frame-bytes (use more
             than ZMQ_MAXMSGSIZE): libzmq must drop the connection, allocating
             nothing.
  junk       --frame-bytes of random bytes, no valid greeting.
  idle       the greeting alone: what an open handshake costs.

Usage (from the source tree, after building into build/):
  python3 bench/connection_cost.py --curve --connections 100
  python3 bench/connection_cost.py --connections 100
  python3 bench/connection_cost.py --curve --attack oversize --frame-bytes 67108864
"""
import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def greeting(mechanism):
    # ZMTP 3.0: signature, version 3.0, mechanism (20 bytes), as-server 0, filler.
    return (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" +
            mechanism.ljust(20, b"\x00") + b"\x00" + b"\x00" * 31)


def ready_command():
    # NULL mechanism READY with Socket-Type DEALER (ZMTP 3.0 command frame).
    name, value = b"Socket-Type", b"DEALER"
    body = (bytes([5]) + b"READY" + bytes([len(name)]) + name +
            struct.pack(">I", len(value)) + value)
    return bytes([0x04, len(body)]) + body


def frame_header(size, command):
    return bytes([0x06 if command else 0x02]) + struct.pack(">Q", size)


def attack(port, args, curve):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    if args.attack == "junk":
        try:
            conn.sendall(os.urandom(args.frame_bytes))
        except OSError:
            pass  # refused: the worker closed the connection
        return conn
    conn.sendall(greeting(b"CURVE" if curve else b"NULL"))
    conn.recv(64)  # the worker's greeting
    if args.attack == "idle":
        return conn
    if not curve:
        conn.sendall(ready_command())
    conn.sendall(frame_header(args.frame_bytes, curve))
    if args.attack == "frame":
        chunk = os.urandom(1 << 16)
        left = args.frame_bytes - 1
        try:
            while left > 0:
                n = min(left, len(chunk))
                conn.sendall(chunk[:n])
                left -= n
        except OSError:
            pass  # refused (a frame over ZMQ_MAXMSGSIZE): the worker closed it
    return conn


def still_open(conns):
    """Connections the worker has not closed: reading finds no end of stream."""
    alive = 0
    for conn in conns:
        conn.setblocking(False)
        try:
            while conn.recv(65536):
                pass  # the worker's greeting or READY
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--curve", action="store_true")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--attack", choices=["frame", "oversize", "junk", "idle"], default="frame")
    parser.add_argument("--frame-bytes", type=int, default=4 << 20)
    parser.add_argument("--port", type=int, default=47231)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="cdc-conncost-")
    cmd = [f"{args.build}/cdcgemm-worker", "--bind", f"tcp://127.0.0.1:{args.port}",
           "--threads", "1", "--log", "warn"]
    if args.curve:
        os.mkdir(f"{tmp}/allow")
        subprocess.run([f"{args.build}/cdcgemm-keygen", f"{tmp}/worker"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([f"{args.build}/cdcgemm-keygen", f"{tmp}/allow/coord"], check=True,
                       stdout=subprocess.DEVNULL)
        cmd += ["--curve-secret", f"{tmp}/worker_secret", "--curve-allow", f"{tmp}/allow"]
    worker = subprocess.Popen(cmd)
    try:
        time.sleep(1.0)
        before = rss_kib(worker.pid)
        start = time.time()
        conns = [attack(args.port, args, args.curve) for _ in range(args.connections)]
        time.sleep(2.0)
        after = rss_kib(worker.pid)
        alive = still_open(conns)
        print(f"{'CURVE' if args.curve else 'plaintext'} attack={args.attack} "
              f"frame={args.frame_bytes} connections={args.connections} "
              f"open_after={alive} sent_in={time.time() - start - 2.0:.1f}s "
              f"VmRSS before={before / 1024:.1f} MiB after={after / 1024:.1f} MiB "
              f"delta={(after - before) / 1024:.1f} MiB "
              f"per_connection={(after - before) / max(1, args.connections):.0f} KiB")
        for conn in conns:
            conn.close()
    finally:
        worker.terminate()
        worker.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
