#!/usr/bin/env python3
"""beacon.py - a hostile beacon sender for tests/netns/discovery.sh.

A beacon (transport/discovery.h) is 48 bytes: b"CDCG", the wire protocol
version and a tcp port (u16 little-endian each), then a CURVE public key in
Z85 (40 characters). It proves nothing: anyone on the segment can send one.

usage:
  beacon.py capture SOURCE_IP UDP_PORT TIMEOUT_S
      print (hex) the first beacon broadcast by SOURCE_IP within TIMEOUT_S.
  beacon.py send BIND_IP BROADCAST UDP_PORT TEMPLATE_HEX KEYS PORTS RATE SECONDS
      broadcast, from BIND_IP, beacons made from TEMPLATE_HEX (for its version)
      with each key of KEYS (comma-separated Z85 keys; "random": random keys,
      4096 of them in turn) at each tcp port of PORTS ("7001" or "7001-7070";
      as many keys as ports: key i on port i only), RATE beacons a second in
      all, for SECONDS. Prints how many it sent.
Every loop is bounded (by count or by the deadline).
"""
import random
import socket
import struct
import sys
import time

Z85 = ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
       ".-:+=^!/*?&<>()[]{}@%$#")


def capture(source, udp_port, timeout_s):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("", udp_port))
    deadline = time.monotonic() + timeout_s
    for _ in range(100000):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data, (address, _) = sock.recvfrom(512)
        except socket.timeout:
            break
        if address == source and len(data) == 48 and data[:4] == b"CDCG":
            print(data.hex())
            return 0
    print("no beacon from %s within %s s" % (source, timeout_s), file=sys.stderr)
    return 1


def ports_of(text):
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(text)]


def send(bind_ip, broadcast, udp_port, template, keys, ports, rate, seconds):
    version = bytes.fromhex(template)[4:6]
    rng = random.Random(24)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.bind((bind_ip, 0))
    fixed = None if keys == "random" else [k.encode() for k in keys.split(",")]
    # Random keys from a pool made beforehand: the sender must keep up with
    # its rate on a loaded 2-core machine (the coordinator keeps no memory
    # of refused keys, so 4096 distinct ones cost it what new ones would).
    pool = [] if fixed else ["".join(rng.choice(Z85) for _ in range(40)).encode()
                             for _ in range(4096)]
    targets = ports_of(ports)
    tick = 0.01  # send in bursts every 10 ms
    per_tick = max(1, int(rate * tick))
    sent, start = 0, time.monotonic()
    for step in range(int(seconds / tick) + 1):
        for _ in range(per_tick):
            if fixed:
                key = fixed[sent % len(fixed)]
            else:
                key = pool[sent % len(pool)]
            if fixed and len(fixed) == len(targets):  # key i on port i
                port = targets[sent % len(targets)]
            else:
                port = targets[(sent // (len(fixed) if fixed else 1)) % len(targets)]
            beacon = b"CDCG" + version + struct.pack("<H", port) + key
            try:
                sock.sendto(beacon, (broadcast, udp_port))
                sent += 1
            except OSError:
                pass  # a full socket buffer: that beacon is lost, as on a LAN
        wake = start + (step + 1) * tick
        now = time.monotonic()
        if wake > now:
            time.sleep(wake - now)
        if now - start >= seconds:
            break
    print(sent)
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "capture":
        return capture(argv[2], int(argv[3]), float(argv[4]))
    if len(argv) == 10 and argv[1] == "send":
        return send(argv[2], argv[3], int(argv[4]), argv[5], argv[6], argv[7],
                    float(argv[8]), float(argv[9]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
