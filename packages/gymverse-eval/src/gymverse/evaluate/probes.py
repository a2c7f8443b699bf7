r"""Cheap probes that find bugs showing only on some seeds, only on the training path, or only to a clever policy.

Run inside the correctness job (sandboxed), every call bounded by `gymverse.deadline.deadline`:

* **reset probes**: ``reset(seed)`` over many seeds per level (resets are cheap); the first crash or hang of each
  level is reported with its seed, and a level that hangs is not probed further.
* **complexity on both paths**: instances built fresh at the lowest and highest level, and an env built at the
  lowest level then changed with ``set_complexity`` the way a PERPO trainer does at run time.
* **constant answers**: ``0``, ``1``, ``-1``, empty, ``yes``/``no``, the first option and the env's own example
  answers, each written in the env's action format (its ``\boxed{...}`` templates), played on every seed; a
  constant that wins far above chance is a degenerate env, and two *different* constant answers both winning the
  same instance means the env accepts wrong answers (no oracle needed). Two answers are one answer when the env
  treated them alike everywhere both were played and rejected them somewhere (`aliases.Outcomes`: the same
  rewards, end flags and next observations, from the transcripts these episodes return anyway). Steps that crash
  or return a reward outside the declared range are reported with the action, level and seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gymverse.checker.report import describe_error
from gymverse.conformance import reward_in_range
from gymverse.deadline import CallTimeout, deadline
from gymverse.evaluate.aliases import Outcomes, step_outcome
from gymverse.evaluate.answers import CONSTANTS, candidates
from gymverse.play import play
from gymverse.protocol import EnvLike
from gymverse.sandbox.hosted import HostedEnv

_SKIP_ATTRS = ("complexity", "level", "seed", "turn", "step", "rng", "random")


def _err(err: BaseException) -> str:
    return describe_error(err, 250)


def fingerprint(env: EnvLike, seed: int) -> str:
    """What an instance looks like: the first observation plus the wrapped GEM object's scalar attributes."""
    obs, _ = env.reset(seed=seed)
    inner = getattr(env, "gem_env", None)
    return _fingerprint(obs, None if inner is None else vars(inner))


def _fingerprint(obs: object, inner: dict[str, Any] | None) -> str:
    attrs = ""
    if inner is not None:
        items = sorted(
            (k, v) for k, v in inner.items()
            if isinstance(v, int | float | str | bool) and not any(s in k.lower() for s in _SKIP_ATTRS)
        )  # fmt: skip
        attrs = repr(items)
    return f"{obs}\0{attrs}"


def hang_bound(reset_timeout: float) -> float:
    """How long a reset may take before it is a hang: past the issue's slow-but-finite searches (~1.3 s)."""
    return max(3.0, 3 * reset_timeout)


class Probe:
    """Runs the probes of one env ref; `build(level)` makes a fresh env."""

    def __init__(self, build: Callable[[int], EnvLike], reset_timeout: float, episode_timeout: float) -> None:
        self.build, self.reset_timeout, self.episode_timeout = build, reset_timeout, episode_timeout
        #: A reset slower than `reset_timeout` is a hang only past this bound (slow searches finish well before).
        self.hang_bound = hang_bound(reset_timeout)
        self.out: dict[str, Any] = {}
        #: Seeds reset-probed per level (`resets`).
        self.probed: dict[int, int] = {}
        #: Constant answers the env parsed at least once (a step not flagged ``format_error``).
        self.parsed: set[str] = set()
        #: What each constant episode did, instance by instance: which answers are one answer to the env.
        self.outcomes = Outcomes()

    def _note(self, action: str, steps: list[dict[str, Any]]) -> Callable[[Any], None]:
        """A `_judge` hook that records whether the env parsed `action` and, in `steps`, what each step did."""

        def note(res: Any) -> None:
            if isinstance(res.info, dict) and res.info.get("format_error") is not True:
                self.parsed.add(action)
            steps.append(step_outcome(res))

        return note

    def _built(self, level: int) -> EnvLike | str:
        try:
            with deadline(self.reset_timeout * 2, f"building the env at level {level}"):
                return self.build(level)
        except (Exception, CallTimeout) as err:
            return f"cannot build at level {level}: {_err(err)}"

    def resets(self, levels: Sequence[int], seeds: int, printed: int = 4) -> dict[int, dict[int, str]]:
        """Reset every seed at every level; returns {level: {seed: fingerprint or ""}} of the resets that worked.

        Levels below 5 get a quarter of the seeds: the seed-dependent bugs this hunts show at high levels.
        Only the first `printed` seeds are fingerprinted (the complexity probe compares those)."""
        failures: list[dict[str, Any]] = []
        slow: list[dict[str, Any]] = []
        prints: dict[int, dict[int, str]] = {}
        for level in levels:
            env = self._built(level)
            if isinstance(env, str):
                failures.append({"level": level, "seed": None, "kind": "build", "error": env, "n_failed": seeds})
                continue
            prints[level] = {}
            bad: list[tuple[int, str, str]] = []
            n_seeds = seeds if level >= 5 else max(printed, seeds // 4)
            bad = self._probe_from(env, level, 0, n_seeds, printed, prints[level])
            self.probed[level] = n_seeds
            for _ in range(3):  # a slow seed is rechecked against the hang bound, then the later seeds are probed
                hang = next((b for b in bad if b[1] == "hang" and b[0] is not None), None)
                if hang is None:
                    break
                took = self._slow(level, hang[0])
                bad.remove(hang)
                if took is None:
                    bad.append((hang[0], "hang", f"{hang[2]}; nor within {self.hang_bound:g}s on a fresh env"))
                    break
                slow.append({"level": level, "seed": hang[0], "seconds": round(took, 3),
                             "limit": self.reset_timeout, "bound": self.hang_bound})  # fmt: skip
                prints[level][hang[0]] = ""
                fresh = self._built(level)
                if isinstance(fresh, str):
                    break
                bad += self._probe_from(fresh, level, hang[0] + 1, n_seeds, printed, prints[level])
            bad.sort(key=lambda b: b[1] != "hang")  # a hang first: it is what the level is reported for
            if bad:
                seed, kind, error = bad[0]
                fail = {"level": level, "seed": seed, "kind": kind, "error": error, "n_failed": len(bad)}
                failures.append({**fail, "n_seeds": n_seeds})
        self.out["reset_failures"] = failures
        self.out["slow_resets"] = slow
        self.out["reset_seeds"] = seeds
        return prints

    def _probe_from(
        self, env: EnvLike, level: int, start: int, n_seeds: int, printed: int, prints: dict[int, str]
    ) -> list[tuple[int, str, str]]:
        """Reset seeds `start`..`n_seeds`-1 (one request for a hosted env, else one by one); the failures."""
        batched = self._hosted_resets(env, level, n_seeds, printed, start) if isinstance(env, HostedEnv) else None
        if batched is not None:
            prints.update(batched[0])
            return batched[1]
        if isinstance(env, HostedEnv):  # the batch hung and its host was stopped: find the seed one by one
            built = self._built(level)
            if isinstance(built, str):
                return [(start, "hang", f"resets at level {level} did not finish; then {built}")]
            env = built
        return self._reset_each(env, level, n_seeds, printed, prints, start)

    def _slow(self, level: int, seed: int) -> float | None:
        """Seconds one more ``reset(seed)`` takes on a fresh env when it finishes within `hang_bound`, else None."""
        env = self._built(level)
        if isinstance(env, str):
            return None
        started = time.monotonic()
        try:
            with deadline(self.hang_bound, f"reset(seed={seed}) at level {level}"):
                env.reset(seed=seed)
        except (Exception, CallTimeout):
            return None
        return time.monotonic() - started

    def _reset_each(
        self, env: EnvLike, level: int, n_seeds: int, printed: int, prints: dict[int, str], start: int = 0
    ) -> list[tuple[int, str, str]]:
        """Reset seed by seed, each under its own deadline; returns (seed, kind, error) of the failures."""
        bad: list[tuple[int, str, str]] = []
        for seed in range(start, n_seeds):
            try:
                with deadline(self.reset_timeout, f"reset(seed={seed}) at level {level}"):
                    if seed < printed:
                        prints[seed] = fingerprint(env, seed)
                    else:
                        env.reset(seed=seed)
                        prints[seed] = ""
            except CallTimeout as err:
                bad.append((seed, "hang", str(err)))
                break  # a hanging level costs one timeout, not one per seed
            except Exception as err:
                bad.append((seed, "crash", _err(err)))
        return bad

    def _hosted_resets(
        self, env: HostedEnv, level: int, n_seeds: int, printed: int, start: int = 0
    ) -> tuple[dict[int, str], list[tuple[int, str, str]]] | None:
        """Every reset of a level in one request to the env's host; None when it hung (the per-seed loop then
        finds the seed, on a fresh host)."""
        try:
            with deadline(self.reset_timeout * max(1, n_seeds - start), f"resets at level {level}"):
                results = env.resets(range(start, n_seeds), max(0, printed - start), self.reset_timeout)
        except CallTimeout:
            return None
        prints: dict[int, str] = {}
        bad: list[tuple[int, str, str]] = []
        for seed, (status, value) in enumerate(results, start):
            if status == "ok":
                prints[seed] = _fingerprint(value[0], value[1]) if value is not None else ""
            elif status == "hang":
                bad.append((seed, "hang", f"reset(seed={seed}) at level {level} did not finish within "
                                          f"{self.reset_timeout:g}s"))  # fmt: skip
            else:
                bad.append((seed, "crash", _err(value)))
        return prints, bad

    def complexity(self, prints: dict[int, dict[int, str]], low: int, high: int, seeds: int = 4) -> None:
        """Does the level change the instance when built fresh, and when changed at run time?"""
        common = [s for s in range(seeds) if s in prints.get(low, {}) and s in prints.get(high, {})]
        res: dict[str, Any] = {"low": low, "high": high, "knob": None, "fresh": None, "runtime": None}
        env = self._built(low)
        if not common or isinstance(env, str):
            res["error"] = "not enough resets succeeded at both levels" if common == [] else env
            self.out["complexity"] = res
            return
        res["knob"] = getattr(env, "complexity_knob", "complexity_params")
        res["fresh"] = any(prints[low][s] != prints[high][s] for s in common)
        try:
            with deadline(self.reset_timeout * len(common), "run-time complexity change"):
                env.reset(seed=common[0])
                env.set_complexity(high)
                res["runtime"] = any(fingerprint(env, s) != prints[low][s] for s in common)
        except (Exception, CallTimeout) as err:
            res["error"] = f"changing the level at run time failed: {_err(err)}"
        self.out["complexity"] = res

    @staticmethod
    def _play(
        env: EnvLike, seed: int, action: str, low: float, high: float, note: Callable[[Any], None]
    ) -> tuple[bool, dict[str, Any] | None]:
        """One constant episode from ``reset(seed)``: (success, reward problem); `note` sees each step result."""

        def outside(res: Any) -> str | None:  # stop where `_judge` stops: the first reward outside the range
            return None if reward_in_range(res.reward, low, high) else "reward outside the declared range"

        played = play(env, lambda _env, _obs: action, seed=seed, judge=outside).reraise()
        return _judge(played.steps, low, high, note)

    def _batch(self, env: EnvLike, level: int, pairs: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
        """Every (action, seed) episode of a level in one request to a hosted env's host ({} otherwise, or when the
        request failed: then they are played step by step). The host ends an episode past its time itself and
        plays no more; the request's deadline, kept here, stops a host that ignores its alarms, and blames the
        first pair (which one hung is unknown then)."""
        if not isinstance(env, HostedEnv) or not pairs:
            return {}
        what = f"{len(pairs)} constant-answer episodes at level {level}"
        try:
            with deadline(self.episode_timeout * len(pairs), what):
                played = env.plays([(s, "constant", a) for a, s in pairs], self.episode_timeout)
        except CallTimeout as err:
            return {pairs[0]: err}
        except Exception:
            return {}
        return dict(zip(pairs, played, strict=True))

    @staticmethod
    def _batched(
        item: Any, what: str, low: float, high: float, note: Callable[[Any], None]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Judge one episode of `_batch` exactly as `_play` judges a live one."""
        if isinstance(item, CallTimeout):
            raise item
        if item is None or item.timed_out:
            raise CallTimeout(f"{what} did not finish within its time limit")
        ok, issue = _judge((res for _, res in item.steps), low, high, note)
        if item.error is not None and not ok and issue is None:
            raise item.error
        return ok, issue

    def constants(self, levels: Sequence[int], seeds: int, prints: dict[int, dict[int, str]], more: int = 0) -> None:
        """Play each constant answer on every seed at `levels` whose reset worked in `resets` (if it ran there).

        A rate that is high but not yet conclusive (`_unsure`) is played on up to `more` seeds in all: episodes are
        cheap, and a flag needs a lower bound, not a lucky point estimate."""
        counts: dict[str, dict[str, list[int]]] = {}
        crashes: list[dict[str, Any]] = []
        rewards: list[dict[str, Any]] = []
        winners: dict[tuple[int, int], list[str]] = {}
        for level in levels:
            env = self._built(level)
            if isinstance(env, str):
                continue
            try:
                with deadline(self.reset_timeout, f"reset(seed=0) at level {level}"):
                    obs, _ = env.reset(seed=0)
            except (Exception, CallTimeout):
                continue
            # an answer the env rejected as malformed everywhere it was played cannot win elsewhere: not replayed
            actions = [a for a in candidates(env, obs) if a not in counts or a in self.parsed]
            played = self._level(env, level, actions, self._seeds(level, 0, seeds, prints), counts, crashes, rewards,
                                 winners)  # fmt: skip
            unsure = [a for a in actions if _unsure(*counts.get(a, {}).get(str(level), [0, 0]))]
            if played and unsure and more > seeds:
                self._level(env, level, unsure, self._seeds(level, seeds, more, prints), counts, crashes, rewards,
                            winners)  # fmt: skip
        self.out["constants"] = {a: {lv: w / max(1, n) for lv, (w, n) in by.items()} for a, by in counts.items()}
        self.out["constant_counts"] = counts
        self.out["constant_seeds"] = seeds
        self.out["step_crashes"] = _first_per_action(crashes)
        self.out["reward_violations"] = rewards
        instances, examples = self.outcomes.wrong_wins(winners)  # aliases the env treats alike are one answer
        self.out["wrong_answer_wins"] = {"instances": instances, "of": seeds * len(levels), "examples": examples}

    def _seeds(self, level: int, first: int, last: int, prints: dict[int, dict[int, str]]) -> list[int]:
        """Seeds first..last-1 whose reset worked when probed (unprobed seeds are tried)."""
        return self.usable(level, range(first, last), prints)

    def usable(self, level: int, seeds: Iterable[int], prints: dict[int, dict[int, str]]) -> list[int]:
        """The `seeds` whose reset worked when `resets` probed them (unprobed seeds and levels are kept)."""
        probed = self.probed.get(level, 0)
        return [s for s in seeds if level not in prints or s in prints[level] or s >= probed]

    def _level(
        self,
        env: EnvLike,
        level: int,
        actions: list[str],
        good: list[int],
        counts: dict[str, dict[str, list[int]]],
        crashes: list[dict[str, Any]],
        rewards: list[dict[str, Any]],
        winners: dict[tuple[int, int], list[str]],
    ) -> bool:
        """Play `actions` on the seeds `good` of one level, adding to the tallies; False when an episode hung."""
        low, high = env.metadata.reward_range
        batch = self._batch(env, level, [(a, s) for a in actions for s in good])
        for action in actions:
            tally = counts.setdefault(action, {}).setdefault(str(level), [0, 0])
            for seed in good:
                what = f"episode (action {action!r}, level {level}, seed {seed})"
                steps: list[dict[str, Any]] = []
                note = self._note(action, steps)
                try:
                    if (action, seed) in batch:
                        ok, issue = self._batched(batch[(action, seed)], what, low, high, note)
                    else:
                        with deadline(self.episode_timeout, what):
                            ok, issue = self._play(env, seed, action, low, high, note)
                except CallTimeout as err:
                    crashes.append({"action": action, "level": level, "seed": seed, "error": str(err),
                                    "kind": "hang"})  # fmt: skip
                    return False  # one hang per level is enough evidence and all the time we spend
                except Exception as err:
                    crashes.append({"action": action, "level": level, "seed": seed, "error": _err(err),
                                    "kind": "crash"})  # fmt: skip
                    continue
                tally[1] += 1
                self.outcomes.add(action, (level, seed), steps, ok)
                if issue and len(rewards) < 3:
                    rewards.append({"action": action, "level": level, "seed": seed, **issue})
                if ok:
                    tally[0] += 1
                    winners.setdefault((level, seed), []).append(action)
        return True


def _unsure(wins: int, n: int) -> bool:
    """A rate above a quarter whose evidence could still go either way: worth more episodes."""
    from gymverse.evaluate.findings import CONSTANT_MIN_RATE, lower_bound

    return n > 0 and wins / n > 0.25 and lower_bound(wins, n) < CONSTANT_MIN_RATE


def _judge(
    results: Iterable[Any], low: float, high: float, note: Callable[[Any], None] = lambda res: None
) -> tuple[bool, dict[str, Any] | None]:
    """(success, reward problem) of a constant episode's step results, stopping where a live episode stops; `note`
    sees each step result."""
    for res in results:
        note(res)
        if not reward_in_range(res.reward, low, high):
            issue = {"error": f"reward {res.reward:g} outside the declared range ({low:g}, {high:g})",
                     "reward": float(res.reward), "format_error": res.info.get("format_error") is True}  # fmt: skip
            return False, issue
        if res.done:
            return res.info.get("success") is True, None
    return False, None


def _first_per_action(crashes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in crashes:
        seen.setdefault(c["kind"] + c["error"].split(":")[0] + c["action"], c)
    return list(seen.values())[:5]


def random_action_status(build: Callable[[int], EnvLike], timeout: float) -> str | None:
    """None when ``sample_random_action`` works, else what it raised (e.g. NotImplementedError)."""
    try:
        with deadline(timeout, "sample_random_action()"):
            env = build(1)
            env.reset(seed=0)
            env.sample_random_action()
    except NotImplementedError as err:
        return f"sample_random_action() is not implemented ({err})" if str(err) else "NotImplementedError"
    except (Exception, CallTimeout):
        return None  # other failures are the checker's to report
    return None


def _has_oracle(env: EnvLike, timeout: float) -> bool:
    try:
        with deadline(timeout, "solve()"):
            env.reset(seed=0)
            env.solve()
    except NotImplementedError:
        return False
    except (Exception, CallTimeout):
        return True  # an oracle that exists but fails: the oracle checks report it
    return True


def env_facts(env: EnvLike, timeout: float = 2.0) -> dict[str, Any]:
    """Contract (gymverse/gem), success rule and where it came from, reward range, whether an oracle exists."""
    return {
        "contract": "gem" if hasattr(env, "gem_env") else "gymverse",
        "success_rule": getattr(env, "success_rule", 'info["success"]'),
        "success_rule_note": getattr(env, "success_rule_note", "GymVerse contract"),
        "reward_range": list(env.metadata.reward_range),
        "has_oracle": _has_oracle(env, timeout),
    }


__all__ = ["CONSTANTS", "Probe", "candidates", "env_facts", "fingerprint", "hang_bound", "random_action_status"]
