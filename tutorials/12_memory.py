"""Tutorial 12: memory: a policy that remembers what it saw earlier in the episode.

    python tutorials/12_memory.py            # Recall and Conveyor with and without memory (about three minutes)
    python tutorials/12_memory.py --smoke    # tiny runs: checks that everything runs

A feed-forward policy acts on the observation in front of it and forgets everything else. Games hide
things: a cue shown once, a unit seen and then out of sight. What you learn:

1. **A game a feed-forward policy cannot win.** ``Recall`` shows a coloured cue at the first step only;
   four steps later the player must name its colour. At the choosing step the observation is the same
   whatever the cue was, so a feed-forward policy scores ``1 / 4`` in expectation, however long it trains.
2. **``model.memory``** puts a recurrent state after RogueNet's trunk: ``{kind: gru, size: 32}`` (or
   ``lstm``), one state per game row, carried from step to step and reset where an episode begins. PPO
   and A2C train it over whole sequences of ``frame.sequence_length`` steps (it must divide
   ``rollout.n_steps``), from the state stored with each sequence's first row; the critic is the policy's
   own network (``model.critic: shared``). ``entmachin train Recall`` runs the bundled config.
3. **Everything that acts carries the state**: the runner's evaluations and ``entmachin eval``, ``entmachin
   play`` (the agent's advice at the choosing step comes from the state it kept since the cue), checkpoints
   and ``--resume``, and ``entmachin export``: the ONNX graph takes ``memory`` and ``episode_start`` and gives
   ``memory_out``, and ``OnnxPolicy`` keeps one state per game (``act(obs, game=KEY)``, ``reset(KEY)`` when
   that game's episode begins) or per batch row (``act_batch``).
4. **What memory does not do yet** is refused by name rather than run without it: DQN, symmetries and
   overlapped collection (section 4 shows one). Behaviour cloning trains a network with memory on sequences
   of recorded episodes, ``entmachin record --policy RUN_DIR`` carries its state, self-play's snapshots keep
   their own, and matches against opponents (``log.eval_opponents``, ``entmachin eval --opponent``, leagues)
   keep a state per game and seat.
5. **A state per entity** (``memory.per_entity: true``): ``Conveyor``'s items show their kind once, on
   arrival, and are sorted later in a random order. A state per game row cannot tell the alike items apart;
   a state per entity id, kept from one appearance to its next (``Observation(ids=...)`` names them), can;
   the exported graph takes and gives each entity's state, and ``OnnxPolicy`` keeps them by id per game.

Result of the full run (seed 0, one torch thread, a two-core machine): with memory 1.000 over 1,000
episodes after 20,480 steps (about 20 s); the same config without memory 0.250 (its bound is 0.25); the
exported policy 1.000 on the same episodes. Conveyor after 32,768 steps (about 40 s each):
1.000 with a state per entity (the exported policy too), 0.680 with a state per game row only (it can count
the kinds still on the belt, not tell the items apart).
"""
from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any, Dict, List, Optional

from entmachin.deploy import OnnxPolicy
from entmachin.env.examples import Conveyor, Recall
from entmachin.frame import evaluate
from entmachin.run import train
from entmachin.run.config import ConfigError
from entmachin.run.export import export_run

SMOKE = ["train.total_steps=640", "log.eval_interval=640", "log.eval_episodes=4"]


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny runs")
    parser.add_argument("--run-dir", default=None, help="where the runs go (default: a temporary directory)")
    args = parser.parse_args(argv)
    root = args.run_dir or tempfile.mkdtemp(prefix="entmachin-memory-")
    budget = SMOKE if args.smoke else []
    episodes = 20 if args.smoke else 1000
    out: Dict[str, Any] = {}

    print("1. Recall without memory: the choosing step looks the same whatever the cue was")
    plain = train("Recall", overrides=[*budget, "model.memory=null", "frame.sequence_length=null"], progress=False,
                  run_dir=os.path.join(root, "feed-forward"))
    out["feed_forward"] = evaluate(plain, Recall, episodes, seed=1).mean
    print(f"   mean return {out['feed_forward']:.3f} over {episodes} episodes (the bound: 0.25)")

    print("2. The bundled config: model.memory {kind: gru, size: 32}, frame.sequence_length 5")
    run_dir = os.path.join(root, "memory")
    frame = train("Recall", overrides=budget, progress=False, run_dir=run_dir)
    out["memory"] = evaluate(frame, Recall, episodes, seed=1).mean
    print(f"   mean return {out['memory']:.3f} over {episodes} episodes")

    print("3. Shipped: the state is the graph's input and output; OnnxPolicy keeps it per game")
    policy = OnnxPolicy(export_run(run_dir).path)
    out["deployed"] = policy.evaluate(Recall, episodes, seed=1).mean
    env = Recall()
    env.seed(2)
    for game in range(3):  # one game at a time through act(): reset() begins its episode
        policy.reset()
        obs = env.reset()
        while not obs.done:
            obs = env.act(policy.act(obs))
        print(f"   game {game}: reward {obs.reward:.0f}")
    print(f"   the exported policy: mean return {out['deployed']:.3f} over {episodes} episodes")

    print("4. What does not carry a state yet is refused by its setting")
    try:
        train("Recall", overrides=[*budget, "rollout.overlap=true"], progress=False,
              run_dir=os.path.join(root, "refused"))
    except ConfigError as e:
        out["refused"] = str(e)
        print(f"   {e}")

    print("5. A state per entity: Conveyor's items look alike once they have arrived; only their ids tell them apart")
    for name, overrides in (("per game row", ["model.memory.per_entity=false"]), ("per entity", [])):
        run_dir = os.path.join(root, f"conveyor-{name.split()[-1]}")
        frame = train("Conveyor", overrides=[*budget, *overrides], progress=False, run_dir=run_dir)
        out[f"conveyor {name}"] = evaluate(frame, Conveyor, episodes, seed=1).mean
        print(f"   a state {name}: mean return {out[f'conveyor {name}']:.3f} over {episodes} episodes (the "
              "feed-forward bound: 0.5)")
    shipped = OnnxPolicy(export_run(run_dir).path)  # each game's entities kept by id, as the run kept them
    out["conveyor deployed"] = shipped.evaluate(Conveyor, episodes, seed=1).mean
    print(f"   exported with its entity states: mean return {out['conveyor deployed']:.3f} over {episodes} episodes")
    return out


if __name__ == "__main__":
    main()
