"""Refuse every network connection that leaves this machine, in any Python process started with this on its path.

``nox -s docs`` puts this folder on ``PYTHONPATH`` for the builds that replay
recordings, with ``PROFILING_GUIDE_NO_NETWORK=1``: replay reads only files in
the repository, so a connection to anywhere but this machine (a Hub probe, a
download) is a bug, and the build stops at it with one line naming the
address. Loopback stays open: the notebook pages' kernels talk to the builder
over 127.0.0.1.
"""

import ipaddress
import os
import socket

if os.environ.get("PROFILING_GUIDE_NO_NETWORK") == "1":

    def _local(address) -> bool:
        if not isinstance(address, tuple):  # a Unix socket path
            return True
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return False  # a name to resolve: not this machine's business in replay

    class NetworkRefused(OSError):
        """A replay build tried to reach the network."""

    _connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def connect(self, address):
        if not _local(address):
            raise NetworkRefused(f"replay opened a connection to {address!r}: replay must read only local files")
        return _connect(self, address)

    def connect_ex(self, address):
        if not _local(address):
            raise NetworkRefused(f"replay opened a connection to {address!r}: replay must read only local files")
        return _connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _local((host if isinstance(host, str) else "",)):
            raise NetworkRefused(f"replay looked up {host!r}: replay must read only local files")
        return _getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
