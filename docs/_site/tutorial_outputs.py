"""Records what each tutorial prints on a whole run, for its page: ``tutorials/outputs/<stem>.txt``.

    python docs/_site/tutorial_outputs.py                 # every tutorial (minutes each, on one thread)
    python docs/_site/tutorial_outputs.py 12_memory       # one

Each runs as ``python tutorials/<file>`` in a fresh temporary directory, on one torch thread. The
file's first line says how it was made (entmachin's version, Python, torch, the seconds it took);
paths of the checkout and of the temporary directory are written relative, so the pages show
nothing of the machine that recorded them.
"""
from __future__ import annotations

import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

from pages import OUTPUTS, ROOT, tutorials


def clean(text: str, workdir: str) -> str:
    """``text`` with the checkout's and the working directory's absolute paths made relative."""
    for prefix in (os.path.realpath(workdir), workdir):
        text = text.replace(prefix + os.sep, "").replace(prefix, ".")
    return text.replace(str(ROOT) + os.sep, "")


def header(seconds: float) -> str:
    import torch

    import entmachin

    return (f"# printed by a whole run (entmachin {entmachin.__version__}, Python {platform.python_version()}, "
            f"torch {torch.__version__}, one thread, {seconds:.0f} s)")


def record(path: pathlib.Path) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(path)], cwd=workdir, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{path.name} failed (exit status {done.returncode}):\n{done.stderr[-3000:]}")
        OUTPUTS.mkdir(exist_ok=True)
        out = OUTPUTS / f"{path.stem}.txt"
        out.write_text(header(seconds) + "\n" + clean(done.stdout, workdir), encoding="utf-8")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    names = set(sys.argv[1:] if argv is None else argv)
    for path in tutorials():
        if not names or path.stem in names:
            print(f"{path.name}: {record(path)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
