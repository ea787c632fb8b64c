"""Capture frames on network interfaces and count IPv4 traffic per (source, destination).

Usage: python sniff.py IFACE[,IFACE...] OUT.json  (as root, inside the interfaces' namespace).
Writes OUT.json.ready once capturing, and the summary to OUT.json on SIGTERM:
{iface: {"ipv4": {"src>dst": [frames, bytes]}, "other": frames, "dropped": n}}.
Only headers are read (frames are truncated to 64 bytes), so it keeps up with bulk traffic.
"""

import json
import os
import select
import signal
import socket
import struct
import sys

ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SOL_PACKET, PACKET_STATISTICS = 263, 6

names, out = sys.argv[1].split(","), sys.argv[2]
socks = {}
for name in names:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    s.bind((name, 0))
    s.setblocking(False)
    socks[s] = name
summary = {name: {"ipv4": {}, "other": 0, "dropped": 0} for name in names}
stop = False


def on_term(signum, frame):
    """Stop capturing (SIGTERM): the summary is written on the way out."""
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
with open(out + ".ready", "w") as f:
    f.write(str(os.getpid()))
buf = bytearray(64)


def drain(s):
    """Count every frame waiting on socket `s`."""
    entry = summary[socks[s]]
    while True:
        try:
            size = s.recv_into(buf, len(buf), socket.MSG_TRUNC)  # the frame's real length
        except BlockingIOError:
            return
        if buf[12:14] == b"\x08\x00":  # IPv4
            key = f"{socket.inet_ntoa(buf[26:30])}>{socket.inet_ntoa(buf[30:34])}"
            frames, nbytes = entry["ipv4"].get(key, (0, 0))
            entry["ipv4"][key] = (frames + 1, nbytes + size)
        else:
            entry["other"] += 1


while not stop:
    ready, _, _ = select.select(list(socks), [], [], 0.1)
    for s in ready:
        drain(s)
for s, name in socks.items():
    drain(s)
    _, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    summary[name]["dropped"] = drops
with open(out + ".tmp", "w") as f:
    json.dump(summary, f)
os.replace(out + ".tmp", out)
