"""Tie a child process's life to its parent's: on Linux the child gets SIGKILL when the parent
dies, even by SIGKILL, so an attempt never outlives a crashed worker and overlaps its retry.

Only the direct child is covered; processes it starts in turn are not (a shell running a
single command execs it, so ``sh -c "cmd"`` is covered). Elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def kill_with_parent() -> None:
    """A ``preexec_fn``: ask the kernel to SIGKILL this process when its parent dies."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(137)
