"""``arrdict``: a ``dict`` for trees of arrays, tensors and ragged values.

Keys are strings, reachable as items or attributes; nested plain dicts become arrdicts.
Indexing with anything other than a string is forwarded to every leaf (ragged arrays via
:func:`entmachin.ragged.arrays.take`), and ``.to(...)`` to every leaf that has it. ``arrdict``
is a container for data (observations, batches, model outputs), never for configs or records.

Example:
    >>> batch = arrdict(obs={"Robot": np.zeros((4, 3))}, reward=np.ones(4))
    >>> batch.obs.Robot.shape, batch["reward"].shape
    ((4, 3), (4,))
    >>> batch[1:3].obs.Robot.shape
    (2, 3)
    >>> batch
    arrdict:
    obs       arrdict:
              Robot    ndarray((4, 3), float64)
    reward    ndarray((4,), float64)

This module never imports torch.
"""

from typing import Any, Callable, Dict, Iterable, List

from entmachin.ragged import trees
from entmachin.ragged.arrays import is_ragged_array, n_features, n_items, n_sequences, take

__all__ = ["arrdict"]


def _convert(value: Any) -> Any:
    return arrdict(value) if type(value) is dict else value


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str):
        raise TypeError(
            f"{where}: arrdict keys must be str, got {type(key).__name__} {key!r} "
            "(other keys index every leaf instead)"
        )


def _index_leaf(value: Any, index: Any) -> Any:
    return take(value, index) if is_ragged_array(value) else value[index]


def _describe(value: Any) -> str:
    """One-line summary of a leaf: its type, shape and dtype rather than its values."""
    if is_ragged_array(value):
        return (
            f"{type(value).__name__}(n_sequences={n_sequences(value)}, "
            f"n_items={n_items(value)}, n_features={n_features(value)})"
        )
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and type(value).__name__ != "RaggedTensor":
        device = getattr(value, "device", None)
        where = f", {device}" if device is not None and str(device) != "cpu" else ""
        return f"{type(value).__name__}({tuple(shape)}, {dtype}{where})"
    return repr(value)


class arrdict(dict):  # noqa: N801 - named like the builtin it extends
    """A ``dict`` with attribute access whose operations reach every leaf of the tree.

    * ``d.obs`` is ``d["obs"]``; ``d.obs = x`` sets ``d["obs"]``; ``del d.obs`` deletes it.
      Names of dict methods (``items``, ``keys``, ...) and of arrdict methods (``map``, ``to``)
      are only reachable as items.
    * Plain ``dict`` values (on construction, assignment and ``update``) become arrdicts.
    * ``d[index]`` with a non-str index (int, slice, array, tensor, ...) returns a new arrdict
      with every leaf indexed; ``d[index] = other`` writes ``other``'s leaves into every leaf.
    * ``d.to(...)`` calls ``.to(...)`` on every leaf that has it; ``d.map(fn)`` applies ``fn``.
    * ``repr`` prints the tree with shapes and dtypes instead of values.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.update(*args, **kwargs)

    # --------------------------------------------------------------------- item access

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return dict.__getitem__(self, key)
        return arrdict({k: _index_leaf(v, key) for k, v in self.items()})

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"{key!r} is not a key of this arrdict; keys are {list(self.keys())}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, str):
            dict.__setitem__(self, key, _convert(value))
            return
        if not isinstance(value, dict):
            raise TypeError(
                f"arrdict[index] = value: value must be a dict/arrdict with the same keys "
                f"{list(self.keys())}, got {type(value).__name__}"
            )
        if set(value.keys()) != set(self.keys()):
            raise ValueError(
                f"arrdict[index] = value: value has keys {sorted(value.keys())}, "
                f"expected {sorted(self.keys())}"
            )
        for k, leaf in self.items():
            leaf[key] = value[k]  # nested arrdicts recurse through this same method

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Like ``dict.update``, converting nested plain dicts and checking keys are str."""
        for key, value in dict(*args, **kwargs).items():
            _check_key(key, "arrdict")
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        """Like ``dict.setdefault``: sets ``key`` to ``default`` (a plain dict becomes an arrdict) unless it is
        present, and returns its value. A ``key`` that is not a str raises ``TypeError``."""
        _check_key(key, "arrdict.setdefault")
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def copy(self) -> "arrdict":
        """Returns a shallow copy (nested arrdicts are copied too, leaves are shared)."""
        return self.map(lambda leaf: leaf)

    def __or__(self, other: Any) -> "arrdict":
        if not isinstance(other, dict):
            return NotImplemented
        merged = self.copy()
        merged.update(other)
        return merged

    def __ior__(self, other: Any) -> "arrdict":
        self.update(other)
        return self

    # ---------------------------------------------------------------- attribute access

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__") and name in self:
            return dict.__getitem__(self, name)
        raise AttributeError(
            f"arrdict has no attribute or key {name!r}; keys are {list(self.keys())}"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name):
            raise AttributeError(
                f"arrdict: {name!r} is a method name; assign with d[{name!r}] = ... instead"
            )
        self[name] = value

    def __delattr__(self, name: str) -> None:
        if name not in self:
            raise AttributeError(
                f"arrdict has no attribute or key {name!r}; keys are {list(self.keys())}"
            )
        del self[name]

    def __dir__(self) -> Iterable[str]:
        return sorted(set(dir(type(self))) | {k for k in self.keys() if k.isidentifier()})

    # ------------------------------------------------------------------------ the tree

    def map(self, fn: Callable[[Any], Any]) -> "arrdict":
        """Returns a new arrdict of the same tree with ``fn`` applied to every leaf."""
        return arrdict(
            {k: v.map(fn) if isinstance(v, arrdict) else fn(v) for k, v in self.items()}
        )

    def to(self, *args: Any, **kwargs: Any) -> "arrdict":
        """Calls ``.to(*args, **kwargs)`` on every leaf that has it; other leaves are kept."""
        return self.map(lambda v: v.to(*args, **kwargs) if hasattr(v, "to") else v)

    def leaves(self, prefix: str = "") -> Dict[str, Any]:
        """Returns ``{dotted.path: leaf}`` for every leaf, depth first in key order; ``prefix`` is put before
        every path as it is (end it with ``.`` to get ``prefix.path``)."""
        return {prefix + ".".join(path): leaf for path, leaf in trees.leaves(self)}

    def __reduce__(self) -> Any:
        return (arrdict, (dict(self),))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__reduce__()

    def _lines(self) -> List[str]:
        width = max((len(k) for k in self.keys()), default=0) + 4
        lines = []
        for k, v in self.items():
            head = k.ljust(width)
            if isinstance(v, arrdict):
                body = v._lines() if v else []
                lines.append(f"{head}arrdict:" + ("" if body else " {}"))
                lines.extend(" " * width + line for line in body)
            else:
                lines.append(f"{head}{_describe(v)}")
        return lines

    def __repr__(self) -> str:
        lines = self._lines()
        return "arrdict:\n" + "\n".join(lines) if lines else "arrdict: {}"

    __str__ = __repr__


# The package re-exports the class under the module's own name, so ``entmachin.ragged.arrdict``
# resolves to the class; naming the package as its home lets dill find it by reference.
arrdict.__module__ = "entmachin.ragged"
