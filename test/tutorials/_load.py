"""Loading a tutorial script as a module namespace (its ``main`` is called with ``--smoke``)."""
import pathlib
import runpy

TUTORIALS = pathlib.Path(__file__).resolve().parents[2] / "tutorials"


def load_tutorial(name):
    """The globals of ``tutorials/<name>`` run as a module (``run_name="tutorial"``: no ``main()`` call)."""
    return runpy.run_path(str(TUTORIALS / name), run_name="tutorial")
