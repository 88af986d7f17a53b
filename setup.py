import re

from setuptools import find_packages, setup

# The version is written once, in entmachin/__init__.py.
VERSION = re.search(r'^__version__ = "([^"]+)"', open("entmachin/__init__.py", encoding="utf-8").read(), re.M).group(1)

setup(
    name="entmachin",
    version=VERSION,
    description="Reinforcement learning for entity-based environments: ragged entity "
    "observations, Machin-style frames and a pure-PyTorch RogueNet.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["entmachin", "entmachin.*"]),
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.6",  # torch.nn.utils.get_total_norm / clip_grads_with_norm_
        "numpy>=1.22",  # numpy 1 and 2
        "dill>=0.3",
        "tensorboard>=2.10",
        "pyyaml>=6.0",
        "tqdm>=4.60",
        "matplotlib>=3.6",
    ],
    extras_require={
        "test": [
            "pytest>=7.3", "hypothesis>=6.50", "gymnasium>=0.29",
            # test_pettingzoo_adapter (skipped without it): from_pettingzoo on PettingZoo's own
            # rps_v2 and generated_agents_parallel_v0 and a ParallelEnv subclass; tested with 1.27.0.
            # pettingzoo.classic imports pygame at import time (no display is opened).
            "pettingzoo>=1.24", "pygame>=2.5",
            # test_export: parity of exported policies (the export extra's packages); test/data: datasets.
            "onnx>=1.14", "onnxruntime>=1.15", "pyarrow>=14,<26",
            # test_schema: `entmachin schema` checked with a JSON Schema validator (draft 2020-12).
            "jsonschema>=4.18",
            # test_tune: the tune extra's packages (studies on SQLite, and on PostgreSQL where its server is installed).
            "optuna>=4.0", "psycopg[binary]>=3.1",
        ],
        # Optional: ragged-buffer's RaggedBuffer* values are then accepted and converted. Its
        # wheels stop at Python 3.11 (and numpy 1); entmachin's own arrays need neither.
        "ragged-buffer": ['ragged-buffer>=0.4.8,<0.5; python_version < "3.12"'],
        # from_gymnasium / GymnasiumVecEnv, and `env.name: gymnasium:ID` in run configs (gymnasium.make).
        "gymnasium": ["gymnasium>=0.29"],
        "ray": ["ray==2.60.0"],  # RayEnvList: environment workers as Ray actors (rollout.workers)
        # entmachin export (onnx writes the graph) and entmachin.deploy (onnxruntime runs it, no torch).
        # onnxruntime 1.15.0, the oldest with wheels for Python 3.11, runs the exported graphs (opset 17).
        "export": ["onnx>=1.14", "onnxruntime>=1.15"],
        # entmachin.data: datasets of episodes as Parquet parts (entmachin record / relabel). pyarrow 26 refuses
        # numpy 1 (which ragged-buffer needs) at import; 25 runs on numpy 1 and 2.
        "data": ["pyarrow>=14,<26"],
        # entmachin tune: Optuna's TPE sampler and pruners over the config's tune: section; its RDB storage on
        # SQLite (nothing to start), or PostgreSQL shared by several machines (psycopg: SQLAlchemy's driver for
        # postgresql:// URLs). MySQL: add pymysql and give a mysql+pymysql:// URL.
        "tune": ["optuna>=4.0", "psycopg[binary]>=3.1"],
        # The documentation site (mkdocs build): Material's theme, the API reference from the docstrings
        # (a method that overrides a documented one shows its base's docstring; ruff lays out long
        # signatures), and selenium for the test that opens the built site in headless Chromium
        # (Debian's chromium and chromium-driver, which pip cannot install).
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings>=0.26", "mkdocstrings-python>=1.12",
                 "griffe-inherited-docstrings>=1.1", "ruff>=0.5", "selenium>=4.20"],
    },
    entry_points={"console_scripts": ["entmachin = entmachin.run.cli:main"]},
    package_data={"entmachin.run": ["configs/*.yaml"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
