"""Entry point of a measurement worker process: `python -m ansor.measure.worker REQ_FD RESP_FD THREADS MEMORY_MB`.

    parent --request (pickled dict) over REQ_FD--> worker: build / run / verify --answer over RESP_FD--> parent

A worker never outlives its parent (the tuner), even one SIGKILLed while the worker is busy in a
long build, a long run or a hung kernel: see `_die_with_parent`.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time

_WATCH_PERIOD_S = 0.5


def _no_reader(resp_fd: int) -> bool:
    """True when nobody can read our answers any more: the parent, which alone holds the read end
    of the response pipe, is gone (the write end of a pipe without readers polls as POLLERR)."""
    if not hasattr(select, "poll"):
        return False
    p = select.poll()
    p.register(resp_fd, 0)  # POLLERR / POLLHUP are always reported
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))


def _die_with_parent(resp_fd: int) -> None:
    """Make this process end when its parent does.

    1. Linux: prctl(PR_SET_PDEATHSIG, SIGKILL) -- the kernel SIGKILLs us the moment the parent
       dies, whatever we are doing (even stuck in C code holding the GIL). It fires when the
       *thread* that spawned us exits, not only the process: `LocalMeasurer` spawns its worker
       from the thread that measures (the tuner's main thread under `ansor tune`), and
       `FeatureExtractor` from its pool threads, which live until its `close()` -- which then
       kills these workers anyway. A measurer reused from another thread after the spawning one
       exited just finds its worker dead and restarts it (`_Worker.request`).
    2. The parent may have died before the prctl (during our start-up): then our parent pid has
       already changed to a reaper's (checked around the prctl), or, if it changed before we read
       it, the response pipe has no reader left. Either way, exit at once. (A parent pid of 1 alone
       proves nothing: the tuner may be PID 1 in a container.)
    3. A daemon thread polls both every 0.5 s and exits the process when either changes: for
       systems without PDEATHSIG and for subreapers. It needs the GIL, so it is a fallback only.
    """
    ppid = os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
            print(f"ansor worker: prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}",
                  file=sys.stderr)
    if os.getppid() != ppid or _no_reader(resp_fd):
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(_WATCH_PERIOD_S)
            if os.getppid() != ppid or _no_reader(resp_fd):
                os._exit(0)

    threading.Thread(target=watch, name="ansor-parent-watchdog", daemon=True).start()


def main(argv: list[str]) -> None:
    req_fd, resp_fd, threads, memory_mb = (int(a) for a in argv[1:5])
    _die_with_parent(resp_fd)  # first thing: the parent may die while we start

    from multiprocessing.connection import Connection

    from ansor.measure.measurer import _worker_main

    from ansor import config

    config.IN_WORKER = True  # code that can poison the process exits instead (targets/cuda/runtime.py)
    _worker_main(Connection(req_fd, writable=False), Connection(resp_fd, readable=False), threads, memory_mb)


if __name__ == "__main__":
    main(sys.argv)
