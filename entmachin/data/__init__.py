"""Entity datasets on disk: record episodes once, read them back part by part (pyarrow, numpy side).

It stands beside the layers, as ``entmachin.deploy`` does: it imports the environment layer and
``ragged``'s numpy side, never torch, so a recorder in an environment worker stays light. The run
layer imports it; no layer below does. ``pip install 'entmachin[data]'`` adds pyarrow.
"""
from entmachin.data.dataset import DESCRIPTION, FORMAT, Dataset, DatasetError, DatasetWriter
from entmachin.data.rows import Rows, concat_rows

__all__ = ["DESCRIPTION", "FORMAT", "Dataset", "DatasetError", "DatasetWriter", "Rows", "concat_rows"]
