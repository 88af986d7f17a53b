"""The environments' state in a checkpoint: written signed, unpickled only when trusted.

A checkpoint keeps the environments and the collector's episodes in progress as one ``dill`` pickle
(only a pickle holds an arbitrary environment), signed with this user's key
(:mod:`entmachin.run.signing`). On resume, :func:`read` unpickles it only when that signature holds,
or when the user says ``--trust-checkpoint``; otherwise it says which file was not restored and why,
and the run goes on with fresh episodes. Under ``torchrun`` the ranks' states (each rank's signed
blob and generators) are one JSON list (:func:`entmachin.run.distributed.ranks_from_bytes`); a list
that is not JSON (damaged, or pickled by an older entmachin) is unpickled only under
``--trust-checkpoint`` (:func:`read_ranks`).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

import dill

from entmachin.run import signing
from entmachin.run.distributed import ranks_from_bytes

__all__ = ["PURPOSE", "write", "read", "read_ranks"]

logger = logging.getLogger(__name__)

PURPOSE = "envs"  # what the environments' state is signed for
_ASK = "If you trust who wrote it, resume with --trust-checkpoint"


def write(envs: Any, collector: Any) -> Optional[bytes]:
    """The signed state of ``envs`` and ``collector``'s episodes; None (having said why) when they
    cannot be pickled or the key cannot sign."""
    try:
        return signing.sign(dill.dumps({"envs": envs.get_state(), "collector": collector.snapshot()}), PURPOSE)
    except signing.SignatureError as e:
        logger.warning("checkpoint: the environments' state is not kept, since it cannot be signed (%s); a resumed "
                       "run restarts their episodes", e)
    except Exception as e:
        logger.warning("checkpoint: the environments cannot be pickled (%s: %s); a resumed run restarts their "
                       "episodes", type(e).__name__, e)
    return None


def read(blob: bytes, path: Optional[str], trust: bool) -> Optional[Dict[str, Any]]:
    """The state :func:`write` wrote, unpickled only when this user's key signed it or ``trust``;
    None, having said why, when it is not restored."""
    try:
        payload = signing.verify(blob, PURPOSE)
    except signing.SignatureError as e:
        if not trust:
            logger.warning("resume: %s is not restored: %s. Unpickling it could run any code its author put in it, "
                           "so the environments restart their episodes (models, optimisers and counters are "
                           "restored). %s", path, e, _ASK)
            return None
        logger.warning("resume: --trust-checkpoint: unpickling %s although %s", path, e)
        payload = signing.payload(blob)
    try:
        return dill.loads(payload)
    except Exception as e:  # an environment that does not unpickle: restart its episodes
        logger.warning("resume: the environments' state in %s could not be restored (%s: %s); they restart their "
                       "episodes", path, type(e).__name__, e)
        return None


def read_ranks(blob: bytes, path: Optional[str], trust: bool) -> List[Dict[str, Any]]:
    """Every rank's state in a checkpoint (``[]``, having said why: every rank restarts)."""
    try:
        return ranks_from_bytes(blob)
    except (ValueError, UnicodeDecodeError):
        pass
    if not trust:
        logger.warning("resume: %s is not restored: it is not the JSON this entmachin writes (damaged, or a pickle "
                       "from an older entmachin, and unpickling could run any code its author put in it); every rank "
                       "restarts its environments and generators. %s", path, _ASK)
        return []
    logger.warning("resume: --trust-checkpoint: unpickling %s", path)
    try:
        return list(dill.loads(blob))
    except Exception as e:
        logger.warning("resume: %s could not be unpickled (%s: %s); every rank restarts its environments and "
                       "generators", path, type(e).__name__, e)
        return []
