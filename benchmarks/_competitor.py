"""Running a competitor's side of a benchmark in its own interpreter, and keeping best runs.

Competitors (Machin, Stable-Baselines3, rogue-net) live in throwaway virtual environments; a
benchmark script re-runs itself there with a worker flag and prints one JSON line as its last
output (``run_competitor``), or keeps it running and exchanges one JSON line per request
(``CompetitorWorker``) when the two sides must alternate step by step.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple


def run_competitor(python: str, script: str, args: List[str], side: str) -> Any:
    """Runs ``python script *args`` and returns the JSON of its last output line.

    Raises:
        RuntimeError: the competitor's side failed; the message ends with its stderr.
    """
    done = subprocess.run([python, script, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {side} side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class CompetitorWorker:
    """A competitor's interpreter kept running: one JSON line in per request, one JSON line out.

    The worker answers a first line when it is ready (kept as ``hello``); a reply holding
    ``"error"`` (its traceback) or the worker's exit raises ``RuntimeError`` naming the side.
    Use it as a context manager so that the worker ends with the benchmark.
    """

    def __init__(self, python: str, script: str, args: List[str], side: str) -> None:
        self.side = side
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen([python, script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, bufsize=1)
        try:
            self.hello = self._read()
        except BaseException:
            self.close()
            raise

    def request(self, **message: Any) -> Dict[str, Any]:
        """Sends ``message`` and returns the worker's reply."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            self._fail("it ended")
        return self._read()

    def _read(self) -> Dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._fail(f"it ended with status {self._proc.wait()}")
        reply = json.loads(line)
        if "error" in reply:
            self._fail(reply["error"])
        return reply

    def _fail(self, why: str) -> None:
        self._stderr.seek(0)
        raise RuntimeError(f"the {self.side} side failed: {why}\n{self._stderr.read()[-3000:]}")

    def close(self) -> None:
        """Asks the worker to quit and waits for it (killing it after 10 s)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            try:
                stream.close()
            except BrokenPipeError:
                pass

    def __enter__(self) -> "CompetitorWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


Figures = Dict[str, float]


def best_alternating(
    ours: Callable[[], Figures], theirs: Callable[[], Optional[Figures]], repeats: int, key: str = "rate"
) -> Tuple[Figures, Optional[Figures]]:
    """Alternates the two sides ``repeats`` times (so both meet the same machine load) and
    keeps each side's run with the highest ``key``; ``theirs`` may return None (skipped)."""
    best_ours: Optional[Figures] = None
    best_theirs: Optional[Figures] = None
    for _ in range(repeats):
        t = theirs()
        if t is not None and (best_theirs is None or t[key] > best_theirs[key]):
            best_theirs = t
        o = ours()
        if best_ours is None or o[key] > best_ours[key]:
            best_ours = o
    if best_ours is None:
        raise ValueError(f"best_alternating: repeats must be >= 1, got {repeats}")
    return best_ours, best_theirs
