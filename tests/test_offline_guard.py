"""The replay build's network guard (docs/_offline/sitecustomize.py) refuses the network and keeps loopback.

The docs build replays every chapter with the guard on (noxfile.py ``build_site``): chapter 4, which loads
Liger's layer through ``kernels`` live, stops that build if its replay reaches for the network.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

GUARD = Path(__file__).resolve().parents[1] / "docs" / "_offline"


def run_guarded(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PROFILING_GUIDE_NO_NETWORK": "1", "PYTHONPATH": str(GUARD)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_a_connection_off_this_machine_is_refused_in_one_line():
    result = run_guarded("import socket; socket.create_connection(('93.184.216.34', 443), timeout=2)")
    assert result.returncode != 0
    assert "NetworkRefused: replay" in result.stderr and "93.184.216.34" in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("replay must read only local files")


def test_a_name_lookup_is_refused():
    result = run_guarded("import socket; socket.getaddrinfo('huggingface.co', 443)")
    assert "NetworkRefused: replay looked up 'huggingface.co'" in result.stderr


def test_loopback_stays_open_for_the_notebook_kernels():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        result = run_guarded(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5).close(); print('ok')")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
