"""Tie a task process's life to its worker's: on Linux the process gets SIGKILL when the worker
dies, even by SIGKILL, so an attempt never outlives a crashed worker and overlaps its retry.

The death signal is set by ``setpriv --pdeathsig KILL`` (util-linux), which then execs the
command in the same process. No Python code runs between fork and exec: running any (a
``preexec_fn``) in a process whose gRPC threads hold locks crashes the child now and then.
Only the direct child is covered; processes it starts in turn are not (a shell running a
single command execs it, so ``sh -c "cmd"`` is covered). Where ``setpriv`` is missing the
command runs without a death signal.
"""

from __future__ import annotations

import functools
import shutil
import sys


@functools.cache
def death_signal_prefix() -> tuple[str, ...]:
    """The argv prefix that makes the command die with its parent, or () where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return ()
    setpriv = shutil.which("setpriv")
    return (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()
