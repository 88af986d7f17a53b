"""A small builder of ONNX graphs: named inputs, constants, one node per call, named outputs.

The exporter (``export_graph.py``) writes RogueNet's acting path op by op with it rather than tracing
the PyTorch module: the network plans its token layout on the host and runs Python loops over
buckets, which a trace would freeze at one batch's entity counts. Every size here is computed
inside the graph, so one file serves any number of observations and entities.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization; onnxruntime >= 1.14 runs it (tested: docs/guides/export-and-deploy.md)

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


class Graph:
    """Nodes, constants and the graph's inputs and outputs, in the order they were added.

    ``op`` returns the name of its (single) output; values are passed around by name.
    """

    def __init__(self) -> None:
        self.nodes: List[onnx.NodeProto] = []
        self.initializers: List[onnx.TensorProto] = []
        self.inputs: List[onnx.ValueInfoProto] = []
        self.outputs: List[onnx.ValueInfoProto] = []
        self._count = 0
        self._constants: Dict[Any, str] = {}

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def input(self, name: str, elem_type: int, shape: Sequence[Any]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, value: str, name: str, elem_type: int, shape: Sequence[Any]) -> None:
        self.nodes.append(helper.make_node("Identity", [value], [name], name=f"output {name}"))
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def const(self, value: Any, dtype: Any = None, hint: str = "const") -> str:
        """A constant (a numpy array, a number or a list); small ones are shared."""
        array = np.asarray(value, dtype=dtype)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        key = None
        if array.size <= 16:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._constants:
                return self._constants[key]
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))  # 0-d stays 0-d
        if key is not None:
            self._constants[key] = name
        return name

    def op(self, op_type: str, *inputs: Optional[str], hint: Optional[str] = None, **attrs: Any) -> str:
        out = self._name(hint or op_type)
        self.nodes.append(helper.make_node(op_type, ["" if i is None else i for i in inputs], [out],
                                           name=out, **attrs))
        return out

    def ops(self, op_type: str, *inputs: str, n_out: int, **attrs: Any) -> List[str]:
        """A node with ``n_out`` outputs."""
        outs = [self._name(op_type) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=outs[0], **attrs))
        return outs

    # ---------------------------------------------------------------- common shapes of ops

    def dim(self, value: str, axis: int) -> str:
        """``value.shape[axis]`` as an int64 scalar."""
        return self.op("Squeeze", self.op("Shape", value, start=axis, end=axis + 1), self.const([0], np.int64))

    def vec(self, *scalars: str) -> str:
        """int64 scalars -> a 1-D shape tensor."""
        return self.op("Concat", *[self.op("Unsqueeze", s, self.const([0], np.int64)) for s in scalars], axis=0)

    def unsqueeze(self, value: str, *axes: int) -> str:
        return self.op("Unsqueeze", value, self.const(list(axes), np.int64))

    def arange(self, n: str) -> str:
        """int64 ``[n]`` 0..n-1 (``n`` an int64 scalar)."""
        return self.op("Range", self.const(0, np.int64), n, self.const(1, np.int64))

    def cast(self, value: str, to: int) -> str:
        return self.op("Cast", value, to=to)

    def reduce_max(self, value: str, floor: int) -> str:
        """``max(value)`` of a 1-D int64 tensor as a scalar, at least ``floor`` (also when empty)."""
        padded = self.op("Concat", value, self.const([floor], np.int64), axis=0)
        return self.op("ReduceMax", padded, keepdims=0)

    def zeros(self, shape: str, dtype: Any = np.float32) -> str:
        """A tensor of zeros of the (1-D int64 tensor) ``shape``."""
        return self.op("ConstantOfShape", shape,
                       value=numpy_helper.from_array(np.zeros(1, dtype=dtype), "zero"))

    def linear(self, x: str, weight: np.ndarray, bias: Optional[np.ndarray], hint: str) -> str:
        """``x @ weight.T + bias`` (``weight`` as ``nn.Linear`` stores it, ``[out, in]``)."""
        y = self.op("MatMul", x, self.const(np.ascontiguousarray(weight.T), np.float32, hint + ".weight"), hint=hint)
        return y if bias is None else self.op("Add", y, self.const(bias, np.float32, hint + ".bias"))

    def model(self, name: str, metadata: Dict[str, str], opset: int = OPSET) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="entmachin")
        # IR 8 (onnx 1.10+, onnxruntime 1.10+) is enough for opset 17; newer onnx packages write newer IRs
        # that older runtimes refuse.
        model.ir_version = 8
        helper.set_model_props(model, metadata)
        onnx.checker.check_model(model, full_check=True)
        return model
