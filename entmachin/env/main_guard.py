"""Telling a user whose script lacks ``if __name__ == "__main__":`` what to add.

Under the ``spawn`` and ``forkserver`` start methods every new process imports the main script
(as ``__mp_main__``) before it runs anything. A script that creates a ``ParallelEnvList`` at its
top level, outside the guard, therefore creates one again inside each worker while that worker
is still starting, and Python stops it with a ``RuntimeError`` about the "bootstrapping phase"
and ``freeze_support()``: the parent only sees its worker exit with code 1. Both sides are
handled here: :func:`refuse_while_bootstrapping` raises a clear error in the worker, and
:func:`unguarded_main_line` lets the parent say which line of which script needs the guard.
:func:`start_forkserver` starts the ``forkserver`` start method's server so that a SIGTERM to
the process group does not kill it.
"""
from __future__ import annotations

import ast
import multiprocessing as mp
import signal
import sys
import threading
from types import FrameType
from typing import Optional, Tuple

GUARD = 'if __name__ == "__main__":'


def guard_advice(start_method: str, script: str, line: int) -> str:
    """What to add, for an error message."""
    return (
        f"under start_method={start_method!r} every worker first imports the main script {script}, which "
        f"creates a ParallelEnvList at line {line} outside an `{GUARD}` block, so each worker tried to start "
        f"workers of its own while it was starting. Put the script's entry point under the guard:\n\n"
        f"    {GUARD}\n        main()   # or the code that creates and uses the ParallelEnvList\n"
    )


def refuse_while_bootstrapping() -> None:
    """Raises ``RuntimeError`` when called while this process imports the main script to start.

    ``multiprocessing`` marks a starting ``spawn`` / ``forkserver`` process with
    ``_inheriting`` (its own check, ``spawn._check_not_importing_main``, reads the same flag).
    """
    if getattr(mp.current_process(), "_inheriting", False):
        raise RuntimeError(
            f"ParallelEnvList was created while this process ({mp.current_process().name}) was starting and "
            f"importing the main script: the script creates it outside an `{GUARD}` block. Put the script's "
            "entry point under that guard"
        )


def unguarded_main_line(frame: Optional[FrameType]) -> Optional[Tuple[str, int]]:
    """``(script, line)`` if the call stack from ``frame`` runs the main script's top level
    outside a ``__name__`` test, else ``None`` (also when the source cannot be read)."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__file__", None) is None:
        return None  # an interactive session or ``python -c``: workers do not import it
    main_globals = vars(main)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is main_globals):
        frame = frame.f_back
    if frame is None:
        return None
    script, line = frame.f_code.co_filename, frame.f_lineno
    try:
        with open(script, encoding="utf-8") as f:
            tree = ast.parse(f.read(), script)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.lineno <= line <= (node.end_lineno or node.lineno) and any(
            isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test)
        ):
            return None
    return script, line


def start_forkserver() -> None:
    """Starts multiprocessing's fork server (once per process) so that it ignores SIGTERM.

    The server is a process of the caller's group: a SIGTERM sent to the whole group (a job
    scheduler, a container stop) would kill it, and the parent would then read every worker
    it forked as dead (exit code 255) while they are alive and ignore the signal themselves.
    An ignored signal stays ignored across ``exec``; the server still exits with its parent.
    Called from another thread it cannot change signal handlers: call it first from the main
    thread where a ``ParallelEnvList`` is built elsewhere. Does nothing on a platform without
    the ``forkserver`` start method.
    """
    from multiprocessing import forkserver

    if "forkserver" not in mp.get_all_start_methods():
        return

    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGTERM, previous)
