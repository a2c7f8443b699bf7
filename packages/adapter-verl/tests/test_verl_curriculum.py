"""Complexity evolution through the named curriculum actor, and its checkpoint round trip."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest

GUESS = "game:GuessTheNumber"


def episodes(kit: Any, tokenizer: Any, seeds: list[int], **cfg: Any) -> list[Any]:
    config = kit.make_config(**cfg)
    server = kit.ScriptedServer(tokenizer)

    async def main() -> list[Any]:
        loops = [kit.make_agent_loop(config, server, tokenizer) for _ in seeds]
        params = {"temperature": 1.0, "logprobs": True}
        return list(await asyncio.gather(*(lp.run(dict(params), **kit.row(GUESS, s)) for lp, s in zip(loops, seeds))))

    return asyncio.run(main())


def curriculum_state(**section: Any) -> Any:
    """The core `CurriculumState` a ``gymverse`` config section describes (what the actor runs)."""
    from gymverse.curriculum import CurriculumState
    from gymverse_verl.curriculum import curriculum_config
    from gymverse_verl.settings import GymVerseSettings

    return CurriculumState.from_config(curriculum_config(GymVerseSettings.from_dict(section)))


def outcomes(env_id: str, flags: list[bool], tag: str) -> list[Any]:
    from gymverse.curriculum import EpisodeOutcome

    return [EpisodeOutcome(f"{env_id}-{tag}-{i}", env_id, f) for i, f in enumerate(flags)]


def test_curriculum_state_rules_and_round_trip() -> None:
    from gymverse.curriculum import EpisodeConfig

    section = {"evolution": True, "horizon": {"kind": "stepwise", "rounds": [2, 4], "interval": 2}}
    st = curriculum_state(**section)
    assert st.episode_config("a:X") == EpisodeConfig(1, 2)
    for step in range(3):
        st.record(outcomes("a:X", [True, True, True, False, True], f"s{step}"))
        st.record(outcomes("b:Y", [False] * 4, f"s{step}"))
        st.end_step()
    assert st.episode_config("a:X") == EpisodeConfig(2, 4)
    assert st.levels() == {"a:X": 2, "b:Y": 1}  # b:Y is already at the floor
    assert st.history[0]["env_id"] == "a:X" and st.history[0]["new_level"] == 2
    clone = curriculum_state(**section)
    clone.load_state_dict(st.state_dict())
    assert clone.state_dict() == st.state_dict()
    off = curriculum_state(evolution=False, max_turns=7)
    off.record(outcomes("a:X", [True] * 9, "s"))
    off.end_step()
    assert off.episode_config("a:X") == EpisodeConfig(None, 7)
    val = curriculum_state(evolution=True, eval_level=3, eval_max_turns=5)
    assert val.episode_config("a:X", validation=True) == EpisodeConfig(3, 5)


def test_settings_reject_typos() -> None:
    from gymverse_verl.settings import GymVerseSettings

    with pytest.raises(ValueError, match="evolutoin"):
        GymVerseSettings.from_dict({"evolutoin": True})
    with pytest.raises(ValueError, match="kind"):
        GymVerseSettings.from_dict({"horizon": {"rounds": [1]}})


@pytest.mark.usefixtures("ray_cluster")
def test_evolution_changes_level_at_next_reset(kit: Any, tokenizer: Any) -> None:
    from gymverse_verl.curriculum import curriculum_service
    from gymverse_verl.settings import GymVerseSettings

    cfg: dict[str, Any] = {
        "evolution": True,
        "actor_name": f"cur-{uuid.uuid4().hex[:8]}",
        "curriculum": {"promote_patience": 2},
    }
    first = episodes(kit, tokenizer, [1, 2, 3], **cfg)
    assert {o.extra_fields["complexity"] for o in first} == {1}
    assert all("between 1 and 10." in kit_prompt(tokenizer, o) for o in first)
    # two named handles are one actor: every agent-loop worker sees the same levels
    a, b = curriculum_service(GymVerseSettings(**cfg)), curriculum_service(GymVerseSettings(**cfg))
    # the agent loops recorded each finished episode once; the trainer closes the step (once per step)
    report = a.end_step()
    assert report.episodes == 3 and report.success == {GUESS: 1.0}
    episodes(kit, tokenizer, [4, 5, 6], **cfg)
    a.end_step()
    assert b.levels() == {GUESS: 2}
    second = episodes(kit, tokenizer, [1, 2, 3], **cfg)
    assert {o.extra_fields["complexity"] for o in second} == {2}
    assert not any("between 1 and 10." in kit_prompt(tokenizer, o) for o in second)  # a wider range at level 2
    assert all(o.extra_fields["success"] for o in second)
    # validation rows run at the fixed evaluation level and are not counted
    val_row = kit.row(GUESS, 7)
    val_row["extra_info"]["split"] = "val"
    config = kit.make_config(**cfg)
    server = kit.ScriptedServer(tokenizer)

    async def validate() -> Any:  # agent loops are built inside the worker's running event loop
        return await kit.make_agent_loop(config, server, tokenizer).run({}, **val_row)

    val = asyncio.run(validate())
    assert val.extra_fields["complexity"] == 1 and "between 1 and 10." in kit_prompt(tokenizer, val)
    assert a.end_step().episodes == 3  # the three level-2 episodes, not the validation one
    a.stop()


def kit_prompt(tokenizer: Any, out: Any) -> str:
    return tokenizer.decode(out.prompt_ids)


@pytest.mark.usefixtures("ray_cluster")
def test_checkpoint_round_trip_restores_curriculum(
    kit: Any, tokenizer: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gymverse_verl import CHECKPOINT_FILE
    from gymverse_verl.settings import GymVerseSettings
    from gymverse_verl.trainer import GymVersePPOTrainer
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    name = f"cur-{uuid.uuid4().hex[:8]}"
    section = {"evolution": True, "actor_name": name, "horizon": {"kind": "stepwise", "rounds": [3, 6], "interval": 2}}
    config = OmegaConf.create(
        {
            "trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto", "resume_from_path": None},
            "gymverse": section,
        }
    )

    def fake_save(self: Any) -> None:  # verl's own save (actor/critic/dataloader) needs GPUs workers
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(tmp_path, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(self.global_steps))

    def fake_load(self: Any) -> None:
        self.global_steps = int((tmp_path / "latest_checkpointed_iteration.txt").read_text())

    monkeypatch.setattr(PPOTrainer, "_save_checkpoint", fake_save)
    monkeypatch.setattr(PPOTrainer, "_load_checkpoint", fake_load)

    def trainer() -> Any:
        t = object.__new__(GymVersePPOTrainer)
        t.config, t.gymverse = config, GymVerseSettings.from_dict(section)
        return t

    t = trainer()
    service = t._curriculum
    for step in range(3):
        service.record(outcomes(GUESS, [True] * 4, f"s{step}") + outcomes("game:Other", [False, True], f"s{step}"))
        service.end_step()
    saved = service.state_dict()
    t.global_steps = 3
    t._save_checkpoint()
    assert os.path.exists(tmp_path / "global_step_3" / CHECKPOINT_FILE)
    service.stop()  # a new run: the actor starts fresh

    fresh = trainer()
    assert fresh._curriculum.levels() == {}
    fresh._load_checkpoint()
    assert fresh.global_steps == 3
    restored = fresh._curriculum.state_dict()
    assert restored == saved and restored["controller"]["envs"][GUESS]["level"] == 2
    assert restored["horizon"]["step"] == 3
    out = episodes(kit, tokenizer, [8], **section)[0]
    assert out.extra_fields["complexity"] == 2 and out.extra_fields["horizon"] == 6
    fresh._curriculum.stop()
