"""A script that creates a ParallelEnvList without ``if __name__ == "__main__":`` is told what to add."""
import multiprocessing as mp
import os
import pathlib
import subprocess
import sys

import pytest

from entmachin.env import ParallelEnvList
from entmachin.env.main_guard import unguarded_main_line

ROOT = pathlib.Path(__file__).resolve().parents[2]  # this checkout's entmachin, not an installed one
SCRIPT = """\
from entmachin.env import ParallelEnvList
from entmachin.env.examples.move_to_origin import MoveToOrigin

envs = ParallelEnvList(MoveToOrigin, 2, 1, start_method={start_method!r})
envs.close()
"""


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_a_script_without_the_guard_is_told_which_line_needs_it(tmp_path, start_method):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(start_method=start_method))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    message = done.stderr[done.stderr.rindex("EnvWorkerError: "):]
    assert "worker 0 (environments 0..1, pid" in message and "exited with code 1" in message, done.stderr
    assert (f"under start_method='{start_method}' every worker first imports the main script {script}, which "
            f"creates a ParallelEnvList at line 4 outside an `if __name__ == \"__main__\":` block") in message
    assert 'Put the script\'s entry point under the guard:\n\n    if __name__ == "__main__":\n        main()' in message
    # The worker's own error says the same, instead of Python's bootstrapping message.
    assert "ParallelEnvList was created while this process (ParallelEnvList-worker-0) was starting" in done.stderr


def test_a_guarded_or_interactive_caller_gets_no_advice(tmp_path, monkeypatch):
    script = tmp_path / "guarded.py"
    script.write_text('import sys\nif __name__ == "__main__":\n    frame = sys._getframe()\n')
    main = type(sys)("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
    assert unguarded_main_line(main.frame) is None
    script.write_text("import sys\nframe = sys._getframe()\n")
    exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
    assert unguarded_main_line(main.frame) == (str(script), 2)
    del main.__file__  # python -c or an interactive session: workers never import it
    assert unguarded_main_line(main.frame) is None


def test_creating_one_while_the_process_bootstraps_raises(monkeypatch):
    monkeypatch.setattr(mp.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(RuntimeError, match=r"ParallelEnvList was created while this process \(MainProcess\) was "
                       r"starting and importing the main script: .*`if __name__ == \"__main__\":` block"):
        ParallelEnvList(lambda: None, 1, 1)
