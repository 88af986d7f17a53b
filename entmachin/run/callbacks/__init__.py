"""Callbacks: code a training run calls at documented events, entmachin's own features and users' alike.

A callback is an object with any of these methods (:class:`Callback` has them all, doing nothing); a
run calls them in this order, each callback in the order of the run's list::

    on_start(run)                once, when the run is built (and resumed), before its first rollout
    after_rollout(run, stats)    after each rollout is collected, before the update trains on it
    after_update(run, stats)     after each update; run.state counts the iteration (stats: the rollout's)
    on_evaluation(run, record)   after each evaluation, the final one included (record: its eval.json entry)
    on_checkpoint(run, env_steps) after each checkpoint is published
    on_end(run, result)          once, when the run has ended with its final evaluation and checkpoint
    close(run)                   once, however the run ends (errors included): let go of what on_start took

``run`` is the :class:`~entmachin.run.runner.Runner`: ``run.config`` (the ``RunConfig``), ``run.state``
(``env_steps``, ``iterations``, ``episodes``, ``recent_returns``, ``evals``, ``best``: the counters a checkpoint
saves), ``run.frame`` (the algorithm and its networks), ``run.envs``, ``run.writer`` (tensorboard's
``SummaryWriter``; one that writes nothing on data-parallel ranks other than 0), ``run.run_dir``, ``run.lead``
(this process writes the run directory) and ``run.stop(reason)``: the run ends after the current iteration
as a finished run does (final evaluation and checkpoint), and ``TrainResult.reason`` says why.
``stats`` is a :class:`~entmachin.frame.collector.RolloutStats`.

Users name theirs in ``train.callbacks`` (``pkg.mod:Class`` or ``{class: pkg.mod:Class, kwargs: {...}}``; entmachin's
own by bare name, as ``StopWhen``) or pass instances to :func:`entmachin.run.train`. A user's callback that raises
stops the run with a :class:`CallbackError` naming it, the event and the step; the checkpoints already published
stay whole. entmachin's own (evaluation, checkpoints, tensorboard, the progress bar, the self-play pool,
behaviour cloning's validation) run first and raise their own errors.
"""
from entmachin.run.callbacks.base import EVENTS, Callback, CallbackError, Callbacks, load_callbacks
from entmachin.run.callbacks.stop import StopWhen

__all__ = ["Callback", "CallbackError", "Callbacks", "EVENTS", "load_callbacks", "StopWhen"]
