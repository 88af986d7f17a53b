"""The ``entmachin`` command: YAML-configured runs, tensorboard, checkpoints of a run, evaluation.

The top layer: it may import every other layer and nothing imports it.
"""
