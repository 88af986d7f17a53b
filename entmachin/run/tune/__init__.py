"""``entmachin tune``: hyperparameter studies on Optuna over the run config's ``tune:`` section.

``section.py`` declares the section (imported by the config, with no Optuna); ``space.py`` checks the
searched keys against the config's own declarations and turns a trial's values into its config;
``study.py`` runs a study (optuna is imported there only, from the ``tune`` extra).
"""
