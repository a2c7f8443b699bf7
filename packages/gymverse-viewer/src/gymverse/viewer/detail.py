"""One episode as the viewer shows it: each turn with its action split around the parsed move."""

from __future__ import annotations

from typing import Any

from gymverse.actions import MAX_ACTION_CHARS, boxed_spans


def split_move(action: str) -> dict[str, str] | None:
    r"""``{"before", "move", "after"}`` around the ``\boxed{}`` content an env parses (the last one), or None."""
    if len(action) > MAX_ACTION_CHARS:
        return None
    spans = boxed_spans(action)
    if not spans:
        return None
    start, end = spans[-1]  # the default occurrence policy of gymverse.actions is "last"
    return {"before": action[:start], "move": action[start:end], "after": action[end:]}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def episode_view(record: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The detail of one episode: its list `row` plus turns, final observation and metrics from `record`."""
    turns = []
    for k, t in enumerate(record.get("turns", [])):
        info = t.get("info") if isinstance(t.get("info"), dict) else {}
        action = str(t.get("action", ""))
        turns.append(
            {
                "turn": k + 1,
                "observation": str(t.get("observation", "")),
                "action": action,
                "move": split_move(action),
                "reward": _number(t.get("reward")),
                "ret": _number(t.get("ret")),
                "advantage": _number(t.get("advantage")),
                "format_error": bool(info.get("format_error")),
                "error_message": str(info["error_message"]) if info.get("error_message") else None,
                "info": info,
            }
        )
    return {
        **row,
        "final_observation": str(record.get("final_observation", "")),
        "metrics": record.get("metrics") if isinstance(record.get("metrics"), dict) else {},
        "turn_list": turns,
    }


__all__ = ["episode_view", "split_move"]
