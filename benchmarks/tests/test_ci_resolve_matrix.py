"""`.ci/resolve_matrix.py` without the network: Python selection, uv's messages, and who a failing row blames."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[2] / ".ci" / "resolve_matrix.py"
_SPEC = importlib.util.spec_from_file_location("resolve_matrix", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
rm = importlib.util.module_from_spec(_SPEC)
sys.modules["resolve_matrix"] = rm  # dataclasses look their module up
_SPEC.loader.exec_module(rm)


def test_pythons_from_requires_python_and_wheel_tags() -> None:
    assert rm.pythons_for("<3.11,>=3.8", ["oat_llm-0.2.4-py3-none-any.whl"]) == (["3.10"], "<3.11,>=3.8")
    assert rm.pythons_for("<3.13,>=3.10", ["verl-0.9.1-py3-none-any.whl", "verl-0.9.1.tar.gz"])[0] == [
        "3.10", "3.11", "3.12",
    ]  # fmt: skip
    wheels = [f"openrlhf-0.11.2-cp3{m}-cp3{m}-manylinux1_x86_64.whl" for m in (10, 11)]
    assert rm.pythons_for(">=3.10", wheels) == (["3.10", "3.11"], ">=3.10; wheels for 3.10, 3.11")
    assert rm.pythons_for(">=3.13", ["x-1-py3-none-any.whl"])[0] == []


def test_names_versions_and_uv_messages() -> None:
    assert rm._name_version("flash_attn-2.8.3.tar.gz") == ("flash-attn", "2.8.3")
    assert rm._name_version("rl_square-0.0.2-py3-none-any.whl") == ("rl-square", "0.0.2")
    hit = rm._NO_WHEELS.search(
        "cause: Because llguidance{platform_machine == 'x86_64'}>=1.7.0,<=1.7.6 has no usable wheels and only"
    )
    assert hit is not None
    assert (hit.group(1), hit.group(2)) == ("llguidance", ">=1.7.0,<=1.7.6")
    hit = rm._NO_WHEELS.search("Because deepspeed==0.16.8 has no usable wheels and oat-llm>=0.2.4 depends on")
    assert hit is not None
    assert (hit.group(1), hit.group(2)) == ("deepspeed", "==0.16.8")
    stderr = "warning: x\nerror: No solution found when resolving dependencies\n  cause: Because a==1 depends on b\n"
    assert rm._reason(stderr) == "Because a==1 depends on b"


def wheel(path: Path, name: str, *requires: str) -> Path:
    """A wheel holding only its METADATA (what `first_party_closure` reads)."""
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{name.replace('-', '_')}-0.1.0.dist-info/METADATA", meta)
    return path


def fw_wheels(tmp_path: Path) -> dict[str, Path]:
    return {
        "gymverse-core": wheel(tmp_path / "core.whl", "gymverse-core", "numpy>=1.26"),
        "gymverse-adapter-fw": wheel(
            tmp_path / "fw.whl", "gymverse-adapter-fw", "gymverse-core", "fw==1.0; extra == 'fw'"
        ),
    }


def test_a_row_brings_every_gymverse_distribution_its_requirements_need(tmp_path: Path) -> None:
    # what broke the oat row when the built-in envs left core: the adapter needs a member that is on no index
    wheels = {
        "gymverse-core": wheel(tmp_path / "core.whl", "gymverse-core", "numpy>=1.26"),
        "gymverse-envs": wheel(tmp_path / "envs.whl", "gymverse-envs", "gymverse-core==0.1.0"),
        "gymverse-server": wheel(tmp_path / "server.whl", "gymverse-server", "gymverse-core"),
        "gymverse-adapter-fw": wheel(
            tmp_path / "fw.whl", "gymverse-adapter-fw", "gymverse-core", "gymverse-envs ; extra == 'fw'",
            "gymverse-server[x]>=0.1 ; extra == 'remote'",
        ),
    }  # fmt: skip
    assert rm.first_party_closure(("gymverse-adapter-fw[fw]",), wheels) == [
        "gymverse-adapter-fw[fw]", "gymverse-core", "gymverse-envs",
    ]  # fmt: skip
    assert rm.first_party_closure(("gymverse-adapter-fw",), wheels) == ["gymverse-adapter-fw", "gymverse-core"]


FW = rm.Framework("fw", "fw", "1.0", ("fw==1.0",), ("gymverse-core", "gymverse-adapter-fw[fw]"), "fw 1.0")


@pytest.mark.parametrize(
    ("alone", "both", "status"),
    [
        (
            rm.Resolution(True, packages={"torch": "2.6.0"}),
            rm.Resolution(True, packages={"torch": "2.6.0"}),
            "resolved",
        ),
        (rm.Resolution(True), rm.Resolution(False, "Because gymverse pins torch"), "FAILED (GymVerse)"),
        (rm.Resolution(False, "fw's own pins"), rm.Resolution(False, "fw's own pins"), "framework unresolvable"),
    ],
)
def test_a_row_blames_gymverse_only_when_the_framework_alone_resolves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, alone: Any, both: Any, status: str
) -> None:
    answers = iter([alone, both])
    monkeypatch.setattr(rm, "compile_env", lambda *args, **kwargs: next(answers))
    wheels = fw_wheels(tmp_path)
    row = rm.run_row(FW, "3.10", ">=3.10", wheels, 5.0, tmp_path)
    assert row.status == status
    assert row.reason == (
        "" if status == "resolved" else (both.reason if status.startswith("FAILED") else alone.reason)
    )


def test_a_source_only_package_that_only_gymverse_brings_fails_the_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def fake(requirements: list[str], python: str, work: Path, timeout: float, sdists: dict[str, Any]) -> Any:
        if any("gymverse" in r for r in requirements):
            sdists["llama-cpp-python"] = ("llama-cpp-python", "0.3.7", [], None)
        return rm.Resolution(True, packages={"x": "1"})

    monkeypatch.setattr(rm, "compile_env", fake)
    wheels = fw_wheels(tmp_path)
    row = rm.run_row(FW, "3.10", ">=3.10", wheels, 5.0, tmp_path)
    assert row.status == "FAILED (GymVerse)"
    assert "llama-cpp-python" in row.reason
