"""Registry: ids, duplicates, suggestions, import failures, default merging, and `gymverse.envs` entry points."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymverse.registry as registry
import pytest
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import RegistryError, deregister, list_envs, make, register, spec


class Knobs(Env):
    metadata = EnvMetadata(name="Knobs", family="regtest", domain="other", description="records its kwargs")

    def __init__(self, width: int = 1, height: int = 1, **env_kwargs: Any) -> None:
        super().__init__(**env_kwargs)
        self.width, self.height = width, height

    def _reset(self) -> tuple[str, dict[str, Any]]:
        return f"{self.width}x{self.height}", {}

    def _step(self, action: str) -> StepResult:
        return StepResult("ok", 0.0, True, False, {"success": True})

    def solve(self) -> str:
        return "ok"


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A private copy of the registry (built-ins loaded) that monkeypatch throws away after the test."""
    list_envs()  # load built-ins and installed plugins into the real registry first
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


@pytest.mark.usefixtures("clean_registry")
def test_register_make_merges_defaults_with_kwargs() -> None:
    register("regtest:Knobs", Knobs, width=3, height=4)
    env = make("regtest:Knobs", height=9, complexity=2)
    assert isinstance(env, Knobs)
    assert (env.width, env.height, env.complexity) == (3, 9, 2)
    assert env.spec_id == "regtest:Knobs"  # type: ignore[attr-defined]
    assert spec("regtest:Knobs").defaults == {"width": 3, "height": 4}  # make() did not mutate the defaults
    assert "regtest:Knobs" in list_envs("regtest")
    assert all(i.startswith("regtest:") for i in list_envs("regtest"))


@pytest.mark.usefixtures("clean_registry")
def test_duplicate_and_malformed_ids() -> None:
    register("regtest:Dup", Knobs)
    with pytest.raises(RegistryError, match="'regtest:Dup' is already registered"):
        register("regtest:Dup", Knobs)
    register("regtest:Dup", Knobs, override=True, width=2)
    assert make("regtest:Dup").width == 2  # type: ignore[attr-defined]
    for bad in ["NoFamily", "a:b:c", "fam:has space", ":x"]:
        with pytest.raises(ValueError, match="family:Name"):
            register(bad, Knobs)
    deregister("regtest:Dup")
    with pytest.raises(RegistryError, match="unknown env id"):
        spec("regtest:Dup")


def test_family_ids_are_domain_ids() -> None:
    from gymverse.core import DOMAINS
    from gymverse.registry import list_envs, list_specs

    for s in list_specs():
        cls = s.load()
        if s.id.startswith(("game:", "algorithm:", "logic:", "tool-use:")):
            assert s.family == cls.metadata.family == cls.metadata.domain, s.id  # type: ignore[attr-defined]
    assert {s.family for s in list_specs() if str(s.entry_point).startswith("gymverse.envs.")} <= set(DOMAINS)
    assert list_envs("tool-use") != [] and list_envs("tooluse") == []  # a family is spelled one way


def test_old_family_spellings_are_unknown_ids_that_name_the_current_id() -> None:
    # Earlier releases spelled families games/tooluse/tool_use; no alias table: the generic suggestion names the id.
    for old, current in [
        ("games:Mastermind", "game:Mastermind"),
        ("tooluse:FileTrail", "tool-use:FileTrail"),
        ("tool_use:FileTrail", "tool-use:FileTrail"),
    ]:
        with pytest.raises(RegistryError, match=f"unknown env id '{old}'; did you mean {current}[,?]"):
            make(old)


@pytest.mark.usefixtures("clean_registry")
def test_unknown_id_suggests_closest_ids() -> None:
    register("regtest:GuessTheWord", Knobs)
    with pytest.raises(RegistryError, match=r"did you mean .*game:GuessTheNumber") as err:
        make("game:GuessTheNumbr")
    assert "gymverse list" in str(err.value)
    with pytest.raises(RegistryError, match="regtest:GuessTheWord"):
        make("REGTEST:guesstheword")  # case-insensitive suggestion
    with pytest.raises(RegistryError) as err:
        make("zzz:Qqqqqqqqqq")
    assert "did you mean" not in str(err.value)


@pytest.mark.usefixtures("clean_registry")
def test_failing_module_reports_its_own_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "regtest_broken_mod.py").write_text("raise RuntimeError('database of levels is corrupt (42)')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "regtest_broken_mod", raising=False)
    register("regtest:Broken", "regtest_broken_mod:Env")
    with pytest.raises(RegistryError, match=r"importing 'regtest_broken_mod' failed: RuntimeError: database .*\(42\)"):
        make("regtest:Broken")
    register("regtest:NoAttr", "json:NoSuchEnv")
    with pytest.raises(RegistryError, match="has no attribute 'NoSuchEnv'"):
        make("regtest:NoAttr")
    register("regtest:NoColon", "json")
    with pytest.raises(RegistryError, match="must look like 'module:attr'"):
        make("regtest:NoColon")
    register("regtest:NotEnv", dict)  # type: ignore[arg-type]  # deliberately not an env factory
    with pytest.raises(RegistryError, match="returned dict, not a gymverse Env"):
        make("regtest:NotEnv")


PLUGIN_ENV_SRC = """
from gymverse.core import Env, EnvMetadata, StepResult

class Tiny(Env):
    metadata = EnvMetadata(name="Tiny", family="plugfam", domain="other", description="plugin env")

    def __init__(self, width=1, **kw):
        super().__init__(**kw)
        self.width = width

    def _reset(self):
        return f"tiny {self.width}", {}

    def _step(self, action):
        return StepResult("ok", 1.0, True, False, {"success": True})

    def solve(self):
        return "ok"
"""


def _write_plugin(root: Path, dist: str, entry_points: str, modules: dict[str, str]) -> None:
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[gymverse.envs]\n{entry_points}\n")
    for name, src in modules.items():
        (root / f"{name}.py").write_text(src)


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch, clean_registry: None) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    before = set(sys.modules)
    yield monkeypatch
    for name in set(sys.modules) - before:
        if name.startswith("regplug_"):
            del sys.modules[name]


def test_entry_point_plugins_register_families(tmp_path: Path, plugin_env: pytest.MonkeyPatch) -> None:
    knobs = "from gymverse.registry import register\n"
    _write_plugin(
        tmp_path,
        "regplug_dist",
        "fn = regplug_fn:install\nmod = regplug_mod",
        {
            "regplug_fn": knobs + "def install():\n    register('plugfam:ByCall', 'regplug_cls:Tiny', width=7)\n",
            "regplug_mod": knobs + "register('plugfam:ByImport', 'regplug_cls:Tiny')\n",
            "regplug_cls": PLUGIN_ENV_SRC,
        },
    )
    plugin_env.syspath_prepend(str(tmp_path))
    ids = list_envs("plugfam")
    assert ids == ["plugfam:ByCall", "plugfam:ByImport"]
    assert "game:GuessTheNumber" in list_envs()  # built-ins still load alongside plugins
    assert spec("plugfam:ByCall").defaults == {"width": 7}
    env = make("plugfam:ByCall")
    assert env.reset(seed=0)[0] == "tiny 7"
    assert type(env).__module__ == "regplug_cls"


def test_failing_entry_point_names_itself(tmp_path: Path, plugin_env: pytest.MonkeyPatch) -> None:
    _write_plugin(tmp_path, "regplug_bad", "badplug = regplug_missing_dep", {
        "regplug_missing_dep": "import regplug_this_does_not_exist\n",
    })  # fmt: skip
    plugin_env.syspath_prepend(str(tmp_path))
    with pytest.raises(
        RegistryError, match=r"entry point 'badplug' \(regplug_missing_dep\).*regplug_this_does_not_exist"
    ):
        list_envs()


def test_check_env_ids_names_the_problem() -> None:
    from gymverse.registry import check_env_ids

    check_env_ids(["game:GuessTheNumber", "tool-use:UnitConversion"])
    with pytest.raises(ValueError, match=r"unknown env id\(s\) \['game:Nope'\]"):
        check_env_ids(["game:Nope"])
    with pytest.raises(ValueError, match=r"\['games:GuessTheNumber'\]; 'games:GuessTheNumber': did you mean game:Gue"):
        check_env_ids(["games:GuessTheNumber", "tool-use:UnitConversion"])
    with pytest.raises(ValueError, match="env ids repeat"):
        check_env_ids(["game:GuessTheNumber", "game:GuessTheNumber"])
    with pytest.raises(ValueError, match="at least one"):
        check_env_ids([])
