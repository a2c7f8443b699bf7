"""FileTrail: follow a chain of notes through a virtual file system to find an access code."""

from __future__ import annotations

import posixpath
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed
from gymverse.envs.tooluse._words import WORDS, sample_unique
from gymverse.text import plural

TOP_DIRS = ("etc", "home", "opt", "srv", "var")
MAX_GREP_LINES = 40


class FileTrail(CommandEnv):
    r"""Find the access code at the end of a trail of notes in an in-memory file system full of decoy codes.

    The first note's path is given. Each note points to the next one either directly ("Next note: /path") or
    indirectly ("the next note carries tag ref-NNNN somewhere under /dir", which a ``grep`` resolves). The last note
    holds ``access_code = NNNNNN``; many decoy files hold codes in the same format, so searching for the code alone
    does not work. Commands: ``\boxed{ls path}``, ``\boxed{cd path}``, ``\boxed{pwd}``, ``\boxed{cat path}``,
    ``\boxed{grep pattern path}`` (literal substring, recursive under a directory) and ``\boxed{submit code}``
    (ends the episode). Paths may be absolute or relative to the working directory (``.`` and ``..`` work).

    Rewards: 1.0 for the right code (success); 0.0 and episode end for a wrong one; 0.0 per command, including
    commands on missing paths (the feedback says so); -0.1 for a malformed command (base class).
    Complexity: longer trails (1 -> 8 links), more indirect links, more directories and decoys, less slack.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="FileTrail",
        family="tool-use",
        domain="tool-use",
        description="Use ls/cd/cat/grep on a virtual file system to follow a chain of notes to an access code.",
        action_format=r"\boxed{ls <path>}, \boxed{cd <path>}, \boxed{pwd}, \boxed{cat <path>}, "
        r"\boxed{grep <pattern> <path>} or \boxed{submit <code>}",
        max_turns=30,
    )
    complexity_params = {"links": (1, 8), "indirect_pct": (0, 80), "dirs": (5, 40), "decoys": (4, 60), "slack": (6, 1)}
    grammar = CommandGrammar({"ls": [str], "cd": [str], "pwd": [], "cat": [str], "grep": [str, str], "submit": [int]})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        p = self.params
        self.dirs: set[str] = {"/", *(f"/{d}" for d in TOP_DIRS)}
        dir_list = [f"/{d}" for d in TOP_DIRS]
        for name in sample_unique(self.rng, WORDS, int(p["dirs"])):
            path = f"{self.pick(dir_list)}/{name}"
            self.dirs.add(path)
            dir_list.append(path)
        self.files: dict[str, list[str]] = {}
        codes = [int(c) for c in self.rng.choice(900_000, size=int(p["decoys"]) + 1, replace=False) + 100_000]
        tags = [int(t) for t in self.rng.choice(9000, size=int(p["decoys"]) + int(p["links"]) + 1, replace=False)]
        n_links = int(p["links"])
        chain = [self._new_file(dir_list) for _ in range(n_links + 1)]
        self.chain: list[str] = chain
        self.code = codes[0]
        self.grep_for: list[tuple[str, str] | None] = [None]  # how note i is reached: (tag, dir) or directly
        for i in range(1, n_links + 1):
            indirect = self.rng.random() * 100 < int(p["indirect_pct"])
            tag = f"ref-{1000 + tags[i]}"
            top = "/" + chain[i].split("/")[1]
            self.grep_for.append((tag, top) if indirect else None)
            self.files[chain[i]].append(f"tag: {tag}")
            link = f"The next note carries tag {tag} somewhere under {top}." if indirect else f"Next note: {chain[i]}"
            self.files[chain[i - 1]].append(link)
        self.files[chain[-1]].append(f"access_code = {self.code}")
        for k in range(int(p["decoys"])):
            path = self._new_file(dir_list)
            self.files[path] += [f"tag: ref-{1000 + tags[n_links + 1 + k]}", f"access_code = {codes[k + 1]}"]
        for path in self.files:  # shuffle the lines so position gives nothing away
            lines = self.files[path]
            self.files[path] = [lines[int(j)] for j in self.rng.permutation(len(lines))]
        self.cwd = "/"
        self.read: set[str] = set()
        self.grepped: set[tuple[str, str]] = set()
        oracle_steps = 1 + n_links + sum(g is not None for g in self.grep_for) + 1
        self.params["max_turns"] = oracle_steps + int(p["slack"])
        obs = (
            f"A file system holds a trail of notes. Start by reading {chain[0]} and follow the trail to the final "
            r"access code, then \boxed{submit <code>}. Beware: many files hold stale access codes. Commands: "
            r"\boxed{ls path}, \boxed{cd path}, \boxed{pwd}, \boxed{cat path}, \boxed{grep pattern path}. "
            f"You have {plural(self.params['max_turns'], 'turn')}."
        )
        return obs, {"start": chain[0], "links": n_links}

    def _new_file(self, dir_list: list[str]) -> str:
        while True:
            name = f"note_{self.pick(list(WORDS))}_{int(self.rng.integers(10, 100))}.txt"
            path = posixpath.join(self.pick(dir_list), name)
            if path not in self.files:
                filler = [f"{self.pick(list(WORDS))} = {int(self.rng.integers(0, 1000))}" for _ in range(2)]
                self.files[path] = filler
                return path

    def resolve(self, path: str) -> str:
        """The absolute, normalized form of `path` relative to the working directory."""
        full = posixpath.normpath(posixpath.join(self.cwd, path))
        return "/" + full.lstrip("/")

    def _children(self, d: str) -> list[str]:
        prefix = d.rstrip("/") + "/"
        kids = {p[len(prefix) :].split("/")[0] for p in [*self.dirs, *self.files] if p.startswith(prefix) and p != d}
        return sorted(k + ("/" if prefix + k in self.dirs else "") for k in kids)

    def _do_ls(self, path: str) -> StepResult:
        full = self.resolve(path)
        if full in self.files:
            return self.feedback(full)
        if full not in self.dirs:
            return self.feedback(f"ls: {full}: no such file or directory")
        return self.feedback(f"{full}: " + ("  ".join(self._children(full)) or "(empty)"))

    def _do_cd(self, path: str) -> StepResult:
        full = self.resolve(path)
        if full not in self.dirs:
            return self.feedback(f"cd: {full}: not a directory")
        self.cwd = full
        return self.feedback(f"Working directory is now {full}.")

    def _do_pwd(self) -> StepResult:
        return self.feedback(self.cwd)

    def _do_cat(self, path: str) -> StepResult:
        full = self.resolve(path)
        if full not in self.files:
            kind = "is a directory" if full in self.dirs else "no such file"
            return self.feedback(f"cat: {full}: {kind}")
        self.read.add(full)
        return self.feedback(f"--- {full} ---\n" + "\n".join(self.files[full]))

    def _do_grep(self, pattern: str, path: str) -> StepResult:
        full = self.resolve(path)
        if full not in self.files and full not in self.dirs:
            return self.feedback(f"grep: {full}: no such file or directory")
        self.grepped.add((pattern, full))
        prefix = full.rstrip("/") + "/"
        hits = [
            f"{f}: {line}"
            for f in sorted(self.files)
            if f == full or f.startswith(prefix)
            for line in self.files[f]
            if pattern in line
        ]
        more = f"\n... {len(hits) - MAX_GREP_LINES} more match(es)" if len(hits) > MAX_GREP_LINES else ""
        return self.feedback("\n".join(hits[:MAX_GREP_LINES]) + more if hits else f"grep: no match under {full}")

    def _do_submit(self, code: int) -> StepResult:
        if code == self.code:
            return self.finish(True, f"Correct: the access code is {code}.")
        return self.finish(False, f"Wrong: {code} is not the current access code (it is {self.code}).")

    def solve(self) -> str:
        if self.max_turns - self.turn > 1:
            for path, via in zip(self.chain, self.grep_for):
                if via is not None and via not in self.grepped and path not in self.read:
                    return boxed("grep", *via)
                if path not in self.read:
                    return boxed("cat", path)
        return boxed("submit", self.code)

    def sample_random_action(self) -> str:
        if not hasattr(self, "files"):
            return boxed("pwd")
        r = self.rng.random()
        target = self.pick(sorted(self.files) + sorted(self.dirs))
        if r < 0.15:
            return boxed("ls", target)
        if r < 0.25:
            return boxed("cd", target)
        if r < 0.3:
            return boxed("pwd")
        if r < 0.6:
            return boxed("cat", target)
        if r < 0.9:
            return boxed("grep", self.pick(["access_code", "tag", "ref-", "next", *WORDS]), target)
        return boxed("submit", int(self.rng.integers(100_000, 1_000_000)))
