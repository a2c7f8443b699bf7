"""The one failure policy: what a failed env or a failed generation does to training and to the curriculum.

Every episode ends with one ``stop_reason`` (`Trajectory.stop_reason`), and that reason alone decides, in every
adapter and in the local trainer, whether the episode is trained on and whether it counts for the curriculum
(`is_trained`; the curriculum skips exactly the void ones, `VOID_STOPS`):

==================== ============================================ ======== ===========
stop reason          what happened                                trained  curriculum
==================== ============================================ ======== ===========
terminated           the env ended the episode                    yes      yes
truncated            the env's own turn cap (its ``max_turns``)   yes      yes (fail)
                     ran out, or the env truncated otherwise
horizon              the run's turn cap (``run_episode``'s        yes      yes (fail)
                     ``horizon``: a fixed cap or a schedule)
length               the token budget ran out (a length cut)      yes      yes (fail)
reset_error          the env could not be built or reset          no       no
env_error            a step raised, hung past its timeout or      no       no
                     crashed its worker
generation_aborted   the inference server aborted the request     no       no
                     (vLLM/SGLang ``finish_reason == "abort"``)
generation_error     the server refused the request (context      no       no
                     length, engine error: `GenerationError`)
empty_generation     the server returned no token at all          no       no
==================== ============================================ ======== ===========

Why void instead of training on what is there: an episode cut by a failure has returns that miss every reward
the env would still have given, and its last reply would be credited or blamed for the env's or server's fault.
A void episode keeps its place in the framework's batch (frameworks need every row they sampled) but has no
trained token (loss mask 0, advantage 0) and is left out of the PERPO statistics. A length cut is the policy's
doing (it wrote too much), so it is trained and counts as a failure. KL: PERPO returns are built from the env's
turn rewards only; a KL penalty belongs in the framework's loss (an adapter refuses KL-in-reward with PERPO).
"""

from __future__ import annotations

TRAINED_STOPS = frozenset({"terminated", "truncated", "horizon", "length"})
VOID_STOPS = frozenset({"reset_error", "env_error", "generation_aborted", "generation_error", "empty_generation"})
STOP_REASONS = TRAINED_STOPS | VOID_STOPS


class GenerationError(RuntimeError):
    """A generation request the server refused for this episode only (context length, engine error for it).

    Raise it from an adapter's ``generate``: `run_episode` ends that episode with ``generation_error``. Any other
    exception (a dead server) still propagates: a rollout without a server must fail loudly.
    """


def check_stop_reason(reason: str) -> str:
    """`reason` if it is a known stop reason, else a ValueError naming the known ones."""
    if reason not in STOP_REASONS:
        raise ValueError(f"unknown stop reason {reason!r}; known: {sorted(STOP_REASONS)}")
    return reason


def is_trained(stop_reason: str) -> bool:
    """Whether an episode that ended this way contributes trained tokens."""
    return check_stop_reason(stop_reason) in TRAINED_STOPS
