"""One writer per shared file: an exclusive inter-process lock beside what is being built.

Two runs sharing ``runs/`` or the cache (two notebooks, a notebook and ``make run``) would
otherwise build the same artifact or convert the same weights at once, into the same temporary
paths. ``exclusive(target, what)`` holds ``fcntl.flock`` on ``.<target>.lock`` (hidden, so that a
listing of ``runs/`` shows artifacts only); the file records
the holder (pid, host, start time, what it builds) so that a second process says whom it waits
for. Callers take it only to write, then check again whether the holder already wrote what they
need: reading a finished artifact never needs the lock.

The wait has no time limit, on purpose: a legitimate holder may train a model for hours, and
giving up would mean either failing a run that only had to wait or building the same artifact
twice. A dead holder cannot block it: the kernel releases a flock lock when its process dies,
however it dies (even SIGKILL), so no lock file is ever stale and none is ever deleted (deleting
one while another process has it open would let two processes lock two different files). The
wait is interruptible: Ctrl-C (a notebook's interrupt) stops it. One caveat: a child the holder
forked (a DataLoader worker) shares its lock, which lasts until that child exits too; the printed
pid says whom to look for.

Without ``fcntl`` (Windows) the block runs unlocked, with a one-time notice; ``UNLOCKED`` counts it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

UNLOCKED: list[str] = []  # what ran without a lock on this platform, in this process


def lock_path(target: str | Path) -> Path:
    """The lock file of ``target``: ``.<name>.lock`` beside it."""
    return Path(target).with_name(f".{Path(target).name}.lock")


def is_lock_file(path: Path) -> bool:
    """Whether ``path`` is a lock file (``lock_path``'s naming): one to keep, never to delete."""
    return path.name.startswith(".") and path.name.endswith(".lock") and path.is_file()


@contextmanager
def exclusive(target: str | Path, what: str) -> Iterator[None]:
    """Hold the exclusive lock for ``target`` for the block, waiting (with one printed line
    naming the holder) while another process holds it. ``what`` says what the holder does."""
    if fcntl is None:
        if not UNLOCKED:
            print("[robustkit] this platform has no fcntl: runs sharing runs/ or the cache are not "
                  "locked against each other here; run one at a time")
        UNLOCKED.append(what)
        yield
        return
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[robustkit] {_holder(fd, path)}; this process waits for it (Ctrl-C stops waiting)",
                  flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                  "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # a later waiter must not name a holder that has left
    finally:
        os.close(fd)  # releases the lock (as the kernel does when a holder dies)


def _holder(fd: int, path: Path) -> str:
    """Who holds the lock, as its record says. The record is empty for the instant between a
    holder taking the lock and writing it, so an empty one is read again for up to half a second."""
    for _ in range(25):
        try:
            record = json.loads(os.pread(fd, 4096, 0))
            return f"pid {record['pid']} on {record['host']} is {record['what']} (since {record['since']})"
        except (ValueError, KeyError, TypeError):
            time.sleep(0.02)
    return f"another process holds {path}"


def holders(folder: str | Path) -> list[str]:
    """Who holds a lock under ``folder`` now (each holder as its record names it): the processes
    building an artifact there. Each lock is only tried, never waited for, and released at once."""
    if fcntl is None:
        if not UNLOCKED:
            print("[robustkit] this platform has no fcntl: whether another process is building under "
                  f"{folder} cannot be told here; make sure none is")
        UNLOCKED.append(f"checking {folder} for builders")
        return []
    found = []
    for path in sorted(p for p in Path(folder).rglob(".*.lock") if is_lock_file(p)):
        fd = os.open(path, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                found.append(_holder(fd, path))
        finally:
            os.close(fd)
    return found
