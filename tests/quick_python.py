"""Running a Python program as a user does, quickly: a warm ``python`` for child processes, or this process.

Many tests run the command line or a chapter as a child process, to check what
a user sees: the exit status, the one line on stderr, the files written.
Importing torch, numpy, pandas and matplotlib costs each such child about two
seconds of CPU, most of its test's time. Two ways save it:

* :func:`quick_python` returns the path of an executable that runs
  ``python script.py ...``, ``python -m module ...`` and ``python -c code``
  (each with ``-u`` or not) with the caller's arguments, environment, working directory, standard
  streams and exit status, each in a fork of one server process that imported
  those four packages once. Everything else (the guide itself, Triton, the
  extras, a ``sitecustomize`` on ``PYTHONPATH``) the child imports as a fresh
  interpreter would, from its own ``PYTHONPATH``. What differs from a fresh
  interpreter: the four preloaded packages are the server's, whatever the
  child's ``PYTHONPATH`` says, and environment variables that they read as
  they are imported are the server's; a test about those runs
  ``sys.executable``. ``PG_FRESH_PYTHON=1`` makes the executable run the real
  interpreter instead, for a run of the suite with every child fresh; other
  arguments than the three forms above (``python -``, ``-i``, ...) go to the
  real interpreter too.
* :func:`run_here` runs a script in this process, as sphinx-gallery runs the
  chapters in a docs build: a fresh ``__main__`` namespace, the given
  arguments, environment and working directory, stdout and stderr captured
  (``sys.__stdout__`` and ``sys.__stderr__`` too, not the file descriptors),
  warnings shown as a fresh interpreter shows them, an uncaught exception
  given to ``sys.excepthook`` (the guide's prints a GuideError in one line)
  and exit status 1, as ``python`` does; then torch's compiled graphs and
  matplotlib's figures are reset for the next.

One server of each kind per test run, started on first use by whichever
xdist worker comes first (``tests/conftest.py`` gives the workers one folder
for them) and stopped as that worker exits. Each run is a fork of a
*supervisor* (a fork of the single-threaded server), which forks the run
itself, waits for it, and sends its exit status back; if the caller goes away
(a test's timeout killed it), the supervisor kills the run.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import io
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

#: Imported once by the server, before any run: what nearly every child imports.
PRELOADED = ("torch", "numpy", "pandas", "matplotlib.pyplot")
FRESH_ENV = "PG_FRESH_PYTHON"
_LENGTH = 8  # bytes of the request's length, before its JSON

_CLIENT = """#!{python} -SE
# The test suite's quick python (tests/quick_python.py): runs its arguments in a fork of a warm server.
import os, socket, sys
SOCKET, REAL = {socket!r}, {python!r}
args = sys.argv[1:]
unbuffered = args[:1] == ["-u"]
if unbuffered:
    args = args[1:]
plain = args and (args[0] in ("-c", "-m") and len(args) > 1 or not args[0].startswith("-"))
if os.environ.get({fresh!r}) or not plain:
    os.execv(REAL, [REAL, *(["-u"] if unbuffered else []), *args])
import json
fds = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect(SOCKET)
except OSError:
    os.execv(REAL, [REAL, *(["-u"] if unbuffered else []), *args])
env = dict(os.environ, **({{"PYTHONUNBUFFERED": "1"}} if unbuffered else {{}}))
request = json.dumps({{"argv": args, "cwd": os.getcwd(), "env": env, "fds": fds}}).encode()
socket.send_fds(conn, [len(request).to_bytes({length}, "big") + request], fds)
answer = b""
while True:
    chunk = conn.recv(64)
    if not chunk:
        break
    answer += chunk
if not answer:
    sys.stderr.write("quick python: the server ended the run without an exit status\\n")
    sys.exit(70)
code = int(answer)
if code < 0:
    signal_number = -code
    import signal
    signal.signal(signal_number, signal.SIG_DFL)
    os.kill(os.getpid(), signal_number)
sys.exit(code)
"""

#: What a server made for torch.compile imports besides: its compiler, which imports Triton as the test
#: process's environment says (TRITON_INTERPRET included). For commands whose Triton is not under test.
COMPILER = ("torch._dynamo", "torch._inductor.compile_fx")
_clients: dict[bool, Path] = {}
_shared: Path | None = None


def share_servers_in(folder: Path) -> None:
    """Keep the servers in ``folder``: processes that share it (the xdist workers of a run) share them."""
    global _shared
    _shared = folder


def quick_python(*, compiler: bool = False) -> str:
    """The path of the quick ``python`` (see the module docstring); starts its server on first use.

    ``compiler=True``: a server that has also imported torch.compile's
    compiler (:data:`COMPILER`, about two seconds more for each chapter that
    compiles), for commands whose Triton and extras are not what the test is about.
    The process that starts a server stops it as it exits; a process still
    using it then gets the real interpreter from the same path.
    """
    if compiler in _clients:
        return str(_clients[compiler])
    folder = (_shared or Path(tempfile.mkdtemp(prefix="pg-quick-python-"))) / ("compiler" if compiler else "plain")
    folder.mkdir(parents=True, exist_ok=True)
    sock, client = folder / "server.sock", folder / "python"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _answers(sock):
            _start(sock, client, compiler, remove_folder=_shared is None)
    _clients[compiler] = client
    return str(client)


def _answers(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


def _start(sock: Path, client: Path, compiler: bool, *, remove_folder: bool) -> None:
    sock.unlink(missing_ok=True)
    server = subprocess.Popen([sys.executable, __file__, str(sock), *(COMPILER if compiler else ())],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    ready = server.stdout.readline()
    if ready.strip() != "ready":
        raise RuntimeError(f"the quick python server did not start (it said {ready!r})")
    client.write_text(_CLIENT.format(python=sys.executable, socket=str(sock), fresh=FRESH_ENV, length=_LENGTH))
    client.chmod(0o755)
    atexit.register(_stop, server, sock, remove_folder)


def _stop(server: subprocess.Popen, sock: Path, remove_folder: bool) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
    sock.unlink(missing_ok=True)
    if remove_folder:
        shutil.rmtree(sock.parent.parent, ignore_errors=True)


# ------------------------------------------------------------------ the server
def serve(sock_path: str, *more: str) -> None:
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in (*PRELOADED, *more):
        importlib.import_module(name)
    # What the runs inherit stays put: the cycle collector's full passes in a run skip it, and its
    # pages are not copied by a pass that touches every object (Python's advice for a server that forks).
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, _reap)  # waited for, their CPU time counts in the test process's children
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    base_path = _base_sys_path()
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _supervise(conn, base_path)
        conn.close()


def _reap(*_) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _base_sys_path() -> list[str]:
    """The server's ``sys.path`` less its script's folder and its ``PYTHONPATH``: what every run starts from."""
    own = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    here = os.path.dirname(os.path.abspath(__file__))
    return [p for p in sys.path[1:] if p and os.path.abspath(p) not in own and os.path.abspath(p) != here]


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    size = int.from_bytes(data[:_LENGTH], "big")
    data = data[_LENGTH:]
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the caller went away before its request was read")
        data += chunk
    return json.loads(data), fds


def _supervise(conn: socket.socket, base_path: list[str]) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        request, fds = _receive(conn)
    except (OSError, EOFError, ValueError):
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in zip(request["fds"], fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in request["fds"]:
                os.close(fd)
        _run(request, base_path)  # never returns
    for fd in fds:
        os.close(fd)
    done = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([done, conn], [], [])
        if done in ready:
            break
        if not conn.recv(1):  # the caller is gone: so is its run
            os.kill(pid, signal.SIGKILL)
            break
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(str(os.waitstatus_to_exitcode(status)).encode())
    finally:
        os._exit(0)


# ------------------------------------------------------------- one run, as python runs it
def _fresh_warning_filters() -> None:
    """The warning filters of a fresh interpreter run without ``-W`` or ``PYTHONWARNINGS``."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category, append=True)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


def _show_uncaught() -> None:
    """Give the exception being handled to ``sys.excepthook``, less the frames of this module and runpy."""
    kind, exc, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    sys.excepthook(kind, exc, tb)


def _run(request: dict, base_path: list[str]) -> None:
    import builtins
    import io
    import types

    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = request["argv"]
    user_path = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        raw = io.open(fd, "rb" if fd == 0 else "wb", buffering=0 if unbuffered and fd > 0 else -1, closefd=False)
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict" if fd < 2 else "backslashreplace",
                                  line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
                                  write_through=unbuffered and fd > 0)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    _fresh_warning_filters()
    code = 0
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[:] = ["", *user_path, *base_path]
            _sitecustomize()
            main = types.ModuleType("__main__")
            main.__builtins__ = builtins
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[:] = [os.getcwd(), *user_path, *base_path]
            _sitecustomize()
            runpy._run_module_as_main(argv[1], alter_argv=True)  # what ``python -m`` calls
        else:
            script = os.path.abspath(argv[0])
            sys.argv = list(argv)
            sys.path[:] = [os.path.dirname(script), *user_path, *base_path]
            _sitecustomize()
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        _show_uncaught()
        code = 1
    try:
        import atexit as _atexit

        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()  # waits for the run's threads, as python does at exit
        _atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 120  # as python exits when it cannot flush its output
    os._exit(code)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _sitecustomize() -> None:
    """Import the ``sitecustomize`` the run's ``sys.path`` finds, as a fresh interpreter's ``site`` does."""
    import importlib

    sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError as err:
        if err.name != "sitecustomize":
            raise


# ------------------------------------------------------------------ in this process
def run_here(script: str | Path, *args: str, env: dict | None = None,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``python script args`` run in this process (see the module docstring); ``env`` replaces the environment."""
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_streams = sys.__stdout__, sys.__stderr__
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [str(script), *args]
        sys.__stdout__, sys.__stderr__ = out, err  # what the guide sends "to the console" is the process's too
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            _fresh_warning_filters()
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
                warnings.formatwarning(message, category, filename, lineno, line))
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as stop:
                code = _exit_code(stop.code)
            except Exception:
                _show_uncaught()
                code = 1
    finally:
        sys.argv = saved_argv
        sys.__stdout__, sys.__stderr__ = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        _reset_between_scripts()
    return subprocess.CompletedProcess([sys.executable, str(script), *args], code, out.getvalue(), err.getvalue())


def _reset_between_scripts() -> None:
    """What sphinx-gallery resets between chapters: torch's compiled graphs, matplotlib's figures and settings."""
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib

        sys.modules["matplotlib.pyplot"].close("all")
        matplotlib.rcdefaults()


if __name__ == "__main__":
    serve(sys.argv[1], *sys.argv[2:])
