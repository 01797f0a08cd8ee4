"""Entry point of a measurement worker process: `python -m ansor._worker REQ_FD RESP_FD THREADS MEMORY_MB`.

    parent --request (pickled dict) over REQ_FD--> worker: build / run / verify --answer over RESP_FD--> parent
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection

from .measure import _worker_main


def main(argv: list[str]) -> None:
    req_fd, resp_fd, threads, memory_mb = (int(a) for a in argv[1:5])
    os.environ["ANSOR_WORKER"] = "1"  # code that can poison the process exits instead (gpu_lowering.py)
    _worker_main(Connection(req_fd, writable=False), Connection(resp_fd, readable=False), threads, memory_mb)


if __name__ == "__main__":
    main(sys.argv)
