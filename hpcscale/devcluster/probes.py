"""Is a port free, is something listening: read from /proc and sockets, without side effects."""

from __future__ import annotations

import socket
from pathlib import Path


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def listening(port: int) -> list[str]:
    """Local addresses with a TCP socket listening on `port` (read from /proc, so probing
    leaves no "connection closed" noise in daemon logs)."""
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            addr, hexport = cols[1].split(":")
            if cols[3] == "0A" and int(hexport, 16) == port and len(addr) == width:
                found.append(_ip_from_proc(addr))
    return found


def _ip_from_proc(addr: str) -> str:
    raw = bytes.fromhex(addr)
    # /proc prints each 32-bit word in host (little-endian) order
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words)


def tcp_open(port: int) -> bool:
    return bool(listening(port))


def unix_open(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(str(path)) == 0
