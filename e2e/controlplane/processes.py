"""Starting, recording, waiting for and stopping the processes of a local cluster.

Every process is started in its own session with its output in ``<state dir>/logs/<name>.log``;
their pids are written to ``<state dir>/processes.json`` so another process
(``scripts/controlplane.sh down``) can stop what ``up`` started. A pid is only signalled while
its command line still names the state dir, so a recycled pid is never killed: every binary we
start gets a flag naming a path under the state dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from controlplane.binaries import ControlPlaneError
from controlplane.pki import LOOPBACK

#: Ports ``free_port`` has handed out in this process: never the same one twice.
_HANDED_OUT: set[int] = set()
#: The lowest port ``free_port`` picks: above the well-known and common service ports.
_LOWEST_PORT = 20000


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on now and nothing else is likely to take.

    Binding port 0 would draw from the kernel's ephemeral range, which every outgoing connection
    on the machine also draws from: between this check and the server's own bind, a client's
    ``connect`` can take the port (fresh-clone CI saw etcd die with "bind: address already in
    use" on 58645). So the port is picked at random below that range, and never twice in one
    process, since callers often ask for several ports before starting anything.
    """
    ceiling = max(_ephemeral_range()[0], _LOWEST_PORT + 1000)
    for _ in range(1000):
        port = random.randrange(_LOWEST_PORT, ceiling)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise ControlPlaneError(f"no free TCP port on {host} in [{_LOWEST_PORT}, {ceiling})")


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default if unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


class Supervisor:
    """The processes of one state dir: spawned, recorded, waited for, stopped.

    Not thread-safe; one object per state dir and process. ``record_extra`` is merged into
    ``processes.json`` (the API server's URL, the node's network), which ``down`` and ``status``
    read from another process.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        ready_timeout: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.state_dir = state_dir
        self.ready_timeout = ready_timeout
        self._clock = clock
        self._sleep = sleep
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.record_extra: dict[str, object] = {}

    def log_path(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"

    def spawn(
        self, name: str, args: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``args`` in its own session, output appended to its log, and record it."""
        self.log_path(name).parent.mkdir(parents=True, exist_ok=True)
        with self.log_path(name).open("ab") as out:
            proc = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.state_dir,
                env=None if env is None else dict(env),
            )
        self.procs[name] = proc
        self.record()
        return proc

    def record(self) -> None:
        """Write the pids of the running processes (read by ``stop_recorded``)."""
        path = self.state_dir / "processes.json"
        # Earlier records count while their process still runs; the ones held here always do (a
        # process that has just been exec'd may not show its new command line in /proc yet).
        live = {
            name: pid
            for name, pid in read_recorded(self.state_dir).items()
            if is_ours(pid, self.state_dir)
        }
        live.update({name: proc.pid for name, proc in self.procs.items() if proc.poll() is None})
        if self.record_extra or live:
            path.write_text(json.dumps({"pids": live, **self.record_extra}, indent=2))

    def wait(self, name: str, ready: Callable[[], bool], *, what: str | None = None) -> None:
        """Poll ``ready`` until it is true; raise ControlPlaneError with the end of the log if
        the process exits or ``ready_timeout`` passes."""
        deadline = self._clock() + self.ready_timeout
        while True:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} while starting; end of "
                    f"{self.log_path(name)}:\n{self.log_tail(name)}"
                )
            if ready():
                return
            if self._clock() > deadline:
                raise ControlPlaneError(
                    f"{what or name} not ready after {self.ready_timeout:.0f} s; end of "
                    f"{self.log_path(name)}:\n{self.log_tail(name)}"
                )
            self._sleep(0.2)

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def detach(self) -> None:
        """Forget the processes without stopping them (``scripts/controlplane.sh up``): they
        keep running, and ``stop_recorded`` stops them later from their recorded pids."""
        for proc in self.procs.values():
            # The processes outlive this object on purpose; mark them so Popen does not warn.
            proc.returncode = 0
        self.procs.clear()


def read_recorded(state_dir: Path) -> dict[str, int]:
    try:
        data = json.loads((state_dir / "processes.json").read_text())
    except (OSError, ValueError):
        return {}
    pids = data.get("pids", {}) if isinstance(data, dict) else {}
    return {str(k): int(v) for k, v in pids.items()}


def read_record(state_dir: Path) -> dict[str, object]:
    """Everything ``processes.json`` holds besides the pids (empty when there is none)."""
    try:
        data = json.loads((state_dir / "processes.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_ours(pid: int, state_dir: Path | str) -> bool:
    """Whether ``pid`` is alive and its command line names ``state_dir`` (all ours do)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return not zombie and str(state_dir).encode() in cmdline


def pids_naming(state_dir: Path | str, executable: str) -> list[int]:
    """Live processes whose command line names ``state_dir`` and whose first argument ends in
    ``executable`` (containerd's shims, which containerd starts and we must stop after it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv0 = (proc / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.decode(errors="replace").endswith(executable) and is_ours(
            int(proc.name), state_dir
        ):
            found.append(int(proc.name))
    return found


def stop_pid(pid: int, state_dir: Path | str, *, grace: float) -> None:
    """SIGTERM ``pid`` if it is ours; SIGKILL after ``grace`` s; return once it is gone."""
    if not is_ours(pid, state_dir):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while is_ours(pid, state_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_ours(pid, state_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while is_ours(pid, state_dir):
            time.sleep(0.05)


def stop_process_group(proc: subprocess.Popen[bytes], *, grace: float = 20.0) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it spawned:
    SIGTERM to its group, SIGKILL after ``grace`` seconds. Used for operators run by tests."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stop_recorded(
    state_dir: Path, *, names: Sequence[str] | None = None, grace: float = 15.0
) -> list[str]:
    """Stop the processes recorded in ``state_dir/processes.json`` (from this or another
    process), last started first; only ``names`` when given. Returns the names that were
    running. The record is removed once no recorded process is left."""
    state_dir = state_dir.resolve()
    recorded = read_recorded(state_dir)
    stopped = []
    for name, pid in reversed(list(recorded.items())):
        if names is not None and name not in names:
            continue
        if is_ours(pid, state_dir):
            stopped.append(name)
            stop_pid(pid, state_dir, grace=grace)
    if names is None or not any(is_ours(pid, state_dir) for pid in recorded.values()):
        with contextlib.suppress(OSError):
            (state_dir / "processes.json").unlink()
    return stopped


def running_server(state_dir: Path) -> str | None:
    """The API server URL of a cluster recorded in ``state_dir`` whose processes all still run."""
    state_dir = state_dir.resolve()
    pids = read_recorded(state_dir)
    if pids and all(is_ours(pid, state_dir) for pid in pids.values()):
        return str(read_record(state_dir).get("server"))
    return None
