"""Resolution matrix: does GymVerse install into the environment a lab already has for each RL framework?

For each framework this resolves, for Linux x86-64 (glibc 2.35, PyPI's CUDA builds of torch), the framework at
its released pins plus the GymVerse wheels built from this checkout (core + that adapter, with its framework extra),
at the oldest and newest Python the framework supports within GymVerse's 3.10-3.12. Nothing from the workspace
applies: a fresh ``uv pip compile --no-config`` per row, no ``[tool.uv]`` overrides, no dependency-metadata of ours.

Source-only packages (no wheel on PyPI: flash-attn, deepspeed, ...) are built on the lab's GPU machine, never here:
the resolver is run with ``--only-binary :all:``, and for each source-only package the framework itself requires
the metadata its sdist declares (its ``PKG-INFO``) is handed to uv instead of building it. Every row is resolved
twice, the framework alone and with GymVerse, so the table tells apart:

* ``resolved``            the framework's environment plus GymVerse resolves;
* ``FAILED (GymVerse)``   the framework alone resolves but not with GymVerse, or GymVerse adds a source-only
                          package: a bug in GymVerse's metadata; the script exits 1;
* ``framework unresolvable``  the framework's own pins cannot be satisfied even without GymVerse (reported with
                          uv's reason; not GymVerse's to fix, so it does not fail the run).

Usage: ``python3 .ci/resolve_matrix.py [--row NAME ...] [--timeout SECONDS] [--json PATH]``. Prints one progress
line per resolution, then the table; writes the table as JSON (default ``benchmarks/results/resolve_matrix.json``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GYMVERSE_PYTHONS = ("3.10", "3.11", "3.12")  # what every GymVerse package supports
# glibc 2.35 (Ubuntu 22.04), what GPU nodes run: vLLM's own dependencies (llguidance, ...) ship manylinux_2_31 wheels
# only, so an older platform tag would make every vLLM row fail for a reason no lab has.
PLATFORM = "x86_64-manylinux_2_35"
SIMPLE = "https://pypi.org/simple"
SdistMeta = tuple[str, str, list[str], "str | None"]  # name, version, Requires-Dist, Requires-Python
# Built from this checkout: workspace members by --package, the adapters with their own uv project by path.
WORKSPACE_MEMBERS = (
    "gymverse-core",
    "gymverse-envs",
    "gymverse-eval",
    "gymverse-gem",
    "gymverse-tools",
    "gymverse-sandbox",
    "gymverse-server",
    "gymverse-viewer",
    "gymverse-vector",
    "gymverse-synth",
    "gymverse-train",
    "gymverse",
    "gymverse-adapter-verl",
)
BUILDS = {
    "gymverse-core": "packages/gymverse-core",
    "gymverse-envs": "packages/gymverse-envs",
    "gymverse-eval": "packages/gymverse-eval",
    "gymverse-gem": "packages/gymverse-gem",
    "gymverse-tools": "packages/gymverse-tools",
    "gymverse-sandbox": "packages/gymverse-sandbox",
    "gymverse-server": "packages/gymverse-server",
    "gymverse-viewer": "packages/gymverse-viewer",
    "gymverse-vector": "packages/gymverse-vector",
    "gymverse-synth": "packages/gymverse-synth",
    "gymverse-train": "packages/gymverse-train",
    "gymverse": "packages/gymverse",
    "gymverse-adapter-verl": "packages/adapter-verl",
    "gymverse-adapter-openrlhf": "packages/adapter-openrlhf",
    "gymverse-adapter-oat": "packages/adapter-oat",
    "gymverse-adapter-rl2": "packages/adapter-rl2",
}


@dataclass(frozen=True)
class Framework:
    name: str
    project: str  # PyPI project whose Requires-Python picks the Pythons
    version: str
    requirements: tuple[str, ...]  # what the lab has installed
    gymverse: tuple[str, ...]  # GymVerse distributions (with extras) added to the lab's environment
    label: str
    pythons: tuple[str, ...] | None = None  # None: the oldest and newest that `project` supports


FRAMEWORKS = (
    Framework(
        "oat", "oat-llm", "0.2.4", ("oat-llm==0.2.4", "dm-launchpad", "vllm==0.8.4"),
        ("gymverse-core", "gymverse-adapter-oat[oat]"), "oat-llm 0.2.4 + dm-launchpad + vllm 0.8.4",
    ),
    Framework(
        "verl", "verl", "0.9.1", ("verl[vllm]==0.9.1",), ("gymverse-core", "gymverse-adapter-verl[verl]"),
        "verl[vllm] 0.9.1",
    ),
    Framework(
        "openrlhf", "openrlhf", "0.11.2", ("openrlhf[vllm]==0.11.2",),
        ("gymverse-core", "gymverse-adapter-openrlhf[openrlhf]"), "openrlhf[vllm] 0.11.2",
    ),
    Framework(
        "rl2", "rl-square", "0.0.2", ("rl-square==0.0.2",), ("gymverse-core", "gymverse-adapter-rl2[rl2]"),
        "rl-square 0.0.2",
    ),
    # No framework: `pip install gymverse` with every extra of core, synth and train, at each supported Python.
    Framework(
        "gymverse", "", "", (),
        ("gymverse", "gymverse-core[ray]", "gymverse-tools[search,mcp]", "gymverse-vector[ray]",
         "gymverse-synth[local,seeds]", "gymverse-eval[embeddings]", "gymverse-train[lora,smollm2,plots]"),
        "gymverse, every extra (no framework)", GYMVERSE_PYTHONS,
    ),
)  # fmt: skip


@dataclass
class Resolution:
    ok: bool
    reason: str = ""
    packages: dict[str, str] = field(default_factory=dict)
    source_only: list[str] = field(default_factory=list)  # name==version resolved from sdist metadata
    seconds: float = 0.0


@dataclass
class Row:
    framework: str
    label: str
    python: str
    python_range: str
    status: str
    reason: str
    n_packages: int
    torch: str
    vllm: str
    source_only: list[str]
    seconds: float


def _log(msg: str) -> None:
    print(f"[resolve-matrix {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_")) or k == "UV_CACHE_DIR"}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


# ----------------------------------------------------------------------------------------------- PyPI metadata
def _simple_files(project: str) -> list[dict[str, object]]:
    req = urllib.request.Request(f"{SIMPLE}/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        files: list[dict[str, object]] = json.load(resp)["files"]
    return files


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _name_version(filename: str) -> tuple[str, str] | None:
    """(normalized project name, version) of a wheel or sdist file name."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return (_norm(parts[0]), parts[1]) if len(parts) >= 5 else None
    m = re.match(r"^(.+)-([^-]+)\.(tar\.gz|zip)$", filename)
    return (_norm(m.group(1)), m.group(2)) if m else None


def _release_files(project: str, version: str) -> list[dict[str, object]]:
    want = (_norm(project), version)
    return [f for f in _simple_files(project) if _name_version(str(f["filename"])) == want]


def supported_pythons(project: str, version: str) -> tuple[list[str], str]:
    """GymVerse's Pythons that `project==version` supports, from its files' metadata on PyPI."""
    files = _release_files(project, version)
    if not files:
        raise RuntimeError(f"{project} {version} is not on PyPI")
    return pythons_for(str(files[0].get("requires-python") or ""), [str(f["filename"]) for f in files])


def pythons_for(requires_python: str, filenames: list[str]) -> tuple[list[str], str]:
    """GymVerse's Pythons allowed by `requires_python` and, when a release ships only version-specific wheels,
    their cpXY tags; plus a short description of both."""
    from packaging.specifiers import SpecifierSet

    wheels = [w for w in filenames if w.endswith(".whl")]
    tags: set[str] | None = None
    if wheels and not any(re.search(r"-(py3\d*|py2\.py3|cp3\d+-abi3)-", w) for w in wheels):
        tags = {f"3.{m}" for w in wheels for m in re.findall(r"-cp3(\d+)-", w)}
    spec = SpecifierSet(requires_python)
    pythons = [p for p in GYMVERSE_PYTHONS if spec.contains(p) and (tags is None or p in tags)]
    shown = requires_python or "any"
    if tags is not None:
        shown += f"; wheels for {', '.join(sorted(tags, key=lambda v: int(v.split('.')[1])))}"
    return pythons, shown


def sdist_metadata(name: str, version_spec: str) -> SdistMeta:
    """(name, version, Requires-Dist, Requires-Python) that the newest matching sdist declares in its PKG-INFO."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    spec = SpecifierSet(version_spec)
    candidates: list[tuple[Version, dict[str, object]]] = []
    for f in _simple_files(name):
        fn = str(f["filename"])
        nv = None if fn.endswith(".whl") else _name_version(fn)
        if nv is None or nv[0] != _norm(name) or f.get("yanked"):
            continue
        try:
            v = Version(nv[1])
        except InvalidVersion:
            continue
        if spec.contains(v, prereleases=bool(version_spec and "==" in version_spec)):
            candidates.append((v, f))
    if not candidates:
        raise RuntimeError(f"no sdist of {name}{version_spec} on PyPI")
    version, f = max(candidates, key=lambda c: c[0])
    with urllib.request.urlopen(str(f["url"]), timeout=120) as resp:
        data = resp.read()
    text = ""
    if str(f["filename"]).endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            member = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO"))
            text = zf.read(member).decode("utf-8", "replace")
    else:
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            member_info = next(m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            extracted = tf.extractfile(member_info)
            text = extracted.read().decode("utf-8", "replace") if extracted else ""
    headers = text.split("\n\n", 1)[0].splitlines()
    requires = [h.split(":", 1)[1].strip() for h in headers if h.startswith("Requires-Dist:")]
    py = next((h.split(":", 1)[1].strip() for h in headers if h.startswith("Requires-Python:")), None)
    return name, str(version), requires, py


# ----------------------------------------------------------------------------------------------- resolution
_NO_WHEELS = re.compile(
    r"(?:all versions of )?\b([A-Za-z0-9][A-Za-z0-9._-]*?)(?:\{[^}]*\})?"  # name, then uv's {marker} if any
    r"((?:==|>=|<=|~=|>|<|!=)[^\s,]+(?:,\s?[<>=!~]+[^\s,]+)*)?"  # version range
    r" (?:has|have) no usable wheels"
)


def compile_env(
    requirements: list[str], python: str, work: Path, timeout: float, known_sdists: dict[str, SdistMeta]
) -> Resolution:
    """``uv pip compile`` of `requirements` at `python` for Linux x86-64, wheels only except the source-only
    packages whose sdist metadata is supplied (added to `known_sdists` as they are met)."""
    start = time.monotonic()
    used: list[str] = []
    for _ in range(12):  # each round may discover one more source-only package
        config = work / "uv.toml"
        lines = []
        for name, version, requires, py in known_sdists.values():
            lines += ["[[dependency-metadata]]", f"name = {json.dumps(name)}", f"version = {json.dumps(version)}"]
            lines.append(f"requires-dist = {json.dumps(requires)}")
            if py:
                lines.append(f"requires-python = {json.dumps(py)}")
            lines.append("")
        config.write_text("\n".join(lines), encoding="utf-8")
        (work / "requirements.in").write_text("\n".join(requirements) + "\n", encoding="utf-8")
        (work / "constraints.txt").write_text(
            "".join(f"{n}=={v}\n" for n, v, _, _ in known_sdists.values()), encoding="utf-8"
        )
        cmd = [
            "uv", "pip", "compile", "--no-config", "--config-file", str(config),
            "requirements.in", "-c", "constraints.txt",
            "--python-version", python, "--python-platform", PLATFORM, "--only-binary", ":all:",
            "--no-header", "--no-annotate", "--quiet", "--output-file", "resolved.txt",
        ]  # fmt: skip
        for name in known_sdists:
            cmd += ["--no-binary", name]
        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            return Resolution(False, f"timed out after {timeout:.0f} s", seconds=time.monotonic() - start)
        try:
            proc = subprocess.run(
                cmd, cwd=work, env=_uv_env(), capture_output=True, text=True, timeout=remaining, check=False
            )
        except subprocess.TimeoutExpired:
            return Resolution(False, f"timed out after {timeout:.0f} s", seconds=time.monotonic() - start)
        if proc.returncode == 0:
            packages = {}
            for line in (work / "resolved.txt").read_text(encoding="utf-8").splitlines():
                m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==\s*([^\s;]+)| @ (\S+))", line)
                if m:
                    packages[_norm(m.group(1))] = m.group(2) or "(local wheel)"
            used = [f"{n}=={packages[n]}" for n in known_sdists if n in packages]
            return Resolution(True, packages=packages, source_only=used, seconds=time.monotonic() - start)
        stderr = proc.stderr
        hit = _NO_WHEELS.search(stderr)
        if hit and _norm(hit.group(1)) not in known_sdists:
            name = _norm(hit.group(1))
            try:
                known_sdists[name] = sdist_metadata(name, hit.group(2) or "")
            except Exception as err:  # reported in the table
                reason = f"{name} has no wheel and its sdist metadata could not be read: {err}"
                return Resolution(False, reason, seconds=time.monotonic() - start)
            _log(f"    {name}: source-only, using its sdist's declared metadata ({known_sdists[name][1]})")
            continue
        return Resolution(False, _reason(stderr), seconds=time.monotonic() - start)
    return Resolution(False, "too many source-only packages", seconds=time.monotonic() - start)


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("warning:")]
    for line in lines:
        if line.startswith("cause:") or line.startswith("╰─▶"):
            return line.removeprefix("cause:").removeprefix("╰─▶").strip()
    return lines[0].removeprefix("error:").strip() if lines else "uv failed without a message"


def build_wheels(out: Path) -> dict[str, Path]:
    """`uv build --wheel` of every GymVerse package from this checkout."""
    wheels = {}
    for dist, path in BUILDS.items():
        cmd = ["uv", "build", "--wheel", "--out-dir", str(out), "--quiet"]
        cmd += ["--package", dist] if dist in WORKSPACE_MEMBERS else [path]
        subprocess.run(cmd, cwd=ROOT, env=_uv_env(), check=True, timeout=300)
        stem = dist.replace("-", "_")
        wheels[dist] = max(out.glob(f"{stem}-*.whl"), key=lambda p: p.stat().st_mtime)
    return wheels


def first_party_closure(requirements: tuple[str, ...], wheels: dict[str, Path]) -> list[str]:
    """`requirements` (``name[extras]``) plus every GymVerse distribution they need, read from the built wheels'
    Requires-Dist (with the requested extras): none of them is on the index, so each must come as a wheel URL."""
    out = {r.split("[")[0]: r for r in requirements}
    todo = list(requirements)
    while todo:
        req = todo.pop()
        name, _, extras = req.partition("[")
        wanted = {e.strip() for e in extras.rstrip("]").split(",") if e.strip()}
        with zipfile.ZipFile(wheels[name]) as whl:
            meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
            lines = whl.read(meta).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            spec, _, marker = line.removeprefix("Requires-Dist:").strip().partition(";")
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            dep = _norm(re.split(r"[\s\[(<>=!~;]", spec.strip(), maxsplit=1)[0])
            if dep in wheels and dep not in out and (extra is None or extra.group(1) in wanted):
                out[dep] = dep
                todo.append(dep)
    return list(out.values())


def run_row(fw: Framework, python: str, shown: str, wheels: dict[str, Path], timeout: float, tmp: Path) -> Row:
    sdists: dict[str, SdistMeta] = {}
    work = tmp / f"{fw.name}-{python}"
    (work / "alone").mkdir(parents=True)
    (work / "gymverse").mkdir()
    alone = Resolution(True)  # nothing to resolve without a framework
    if fw.requirements:
        _log(f"{fw.label} @ Python {python}: the framework alone ...")
        alone = compile_env(list(fw.requirements), python, work / "alone", timeout, sdists)
    framework_sdists = set(sdists)
    # e.g. gymverse-adapter-oat[oat] @ file:///...whl: the wheel of this checkout, never a release on the index
    gymverse = first_party_closure(fw.gymverse, wheels)
    gv_reqs = [*fw.requirements, *(f"{req} @ {wheels[req.split('[')[0]].as_uri()}" for req in gymverse)]
    _log(f"{fw.label} @ Python {python}: + {' + '.join(fw.gymverse)} (wheels from this checkout) ...")
    both = compile_env(gv_reqs, python, work / "gymverse", timeout, sdists)
    added = sorted(set(sdists) - framework_sdists) if alone.ok else []
    if both.ok and not added:
        status, reason = "resolved", ""
    elif both.ok:
        status, reason = "FAILED (GymVerse)", f"GymVerse pulls source-only {', '.join(added)} (a build from source)"
    elif alone.ok:
        status, reason = "FAILED (GymVerse)", both.reason
    else:
        status, reason = "framework unresolvable", alone.reason
    pkgs = both.packages if both.ok else alone.packages
    return Row(
        framework=fw.name,
        label=fw.label,
        python=python,
        python_range=shown,
        status=status,
        reason=reason,
        n_packages=len(pkgs),
        torch=pkgs.get("torch", "-"),
        vllm=pkgs.get("vllm", "-"),
        source_only=both.source_only if both.ok else sorted(sdists),
        seconds=round(alone.seconds + both.seconds, 1),
    )


def print_table(rows: list[Row]) -> None:
    head = ("framework", "python", "status", "pkgs", "torch", "vllm", "source-only (built by the lab)", "reason")
    body = [
        (r.label, f"{r.python} ({r.python_range})", r.status, str(r.n_packages), r.torch, r.vllm,
         ", ".join(r.source_only) or "-", r.reason or "-")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head[:-1])]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths) + " | {}"
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths) + "-+-" + "-" * 20)
    for b in body:
        print(fmt.format(*b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", action="append", choices=[f.name for f in FRAMEWORKS], help="only these frameworks")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per resolution (default 300)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "resolve_matrix.json")
    args = parser.parse_args(argv)
    if shutil.which("uv") is None:
        print("resolve-matrix: uv is not installed (pip install uv)", file=sys.stderr)
        return 2
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gymverse-matrix-") as tmp_name:
        tmp = Path(tmp_name)
        _log("building the GymVerse wheels from this checkout ...")
        wheels = build_wheels(tmp / "wheels")
        _log("built " + ", ".join(w.name for w in wheels.values()))
        for fw in FRAMEWORKS:
            if args.row and fw.name not in args.row:
                continue
            try:
                if fw.pythons is not None:
                    pythons, shown = list(fw.pythons), "GymVerse's"
                else:
                    pythons, shown = supported_pythons(fw.project, fw.version)
            except Exception as err:  # reported in the table
                rows.append(Row(fw.name, fw.label, "-", "?", "FAILED (GymVerse)", f"PyPI metadata: {err}", 0, "-", "-",
                                [], 0.0))  # fmt: skip
                continue
            _log(f"{fw.label}: Requires-Python {shown} -> Pythons {', '.join(pythons) or 'none'}")
            if not pythons:
                rows.append(Row(fw.name, fw.label, "-", shown, "framework unresolvable",
                                "supports none of GymVerse's Pythons (3.10-3.12)", 0, "-", "-", [], 0.0))  # fmt: skip
                continue
            chosen = fw.pythons or sorted({pythons[0], pythons[-1]}, key=lambda v: int(v.split(".")[1]))
            for python in chosen:
                row = run_row(fw, python, shown, wheels, args.timeout, tmp)
                _log(f"  -> {row.status} ({row.n_packages} packages, torch {row.torch}, vllm {row.vllm}, "
                     f"{row.seconds} s){': ' + row.reason if row.reason else ''}")  # fmt: skip
                rows.append(row)
    print()
    print_table(rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.json}")
    failed = [r for r in rows if r.status.startswith("FAILED")]
    outside = [r for r in rows if r.status == "framework unresolvable"]
    if outside:
        print(f"{len(outside)} row(s) unresolvable for the framework's own pins (not a GymVerse failure)")
    if failed:
        print(f"{len(failed)} row(s) fail because of GymVerse's metadata", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
