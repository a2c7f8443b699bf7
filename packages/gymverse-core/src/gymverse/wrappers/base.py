"""`LiveWrapper`: the base of GymVerse's wrappers; reads *and* public writes reach the wrapped env live."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from gymverse.core import Env, Wrapper


class LiveWrapper(Wrapper):
    """A `Wrapper` whose attribute writes are forwarded too, so a wrapper stack behaves like its base env.

    Reads already fall through to the wrapped env (`Wrapper.__getattr__`). Writes go to the wrapper itself only
    for ``env``, private names (leading underscore), names already in the wrapper's ``__dict__`` and names the
    wrapper class defines; every other write lands on the wrapped env (and so, through a stack, on the base env).
    Subclasses therefore keep their own fields private (``self._history``) and expose them as properties.
    """

    #: Own fields shared by reference between clones and left out of state snapshots (static config such as a
    #: tokenizer): deep-copying them on every branch of a GRPO group would be slow and pointless.
    _shared_fields: ClassVar[frozenset[str]] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "env" or name.startswith("_") or name in self.__dict__ or hasattr(type(self), name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.env, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__:
            object.__delattr__(self, name)
        else:
            delattr(self.env, name)

    def get_state(self) -> dict[str, Any]:
        """Wrapped env's state plus this wrapper's own (non-shared) fields."""
        own = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if k != "env" and k not in self._shared_fields}
        return {"env": self.env.get_state(), "wrapper": own}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state` (shared fields are kept as they are)."""
        self.env.set_state(state["env"])
        self.__dict__.update(copy.deepcopy(dict(state["wrapper"])))

    def clone(self) -> Env:
        """An independent copy of the whole stack; shared fields of every wrapper in it are not copied."""
        memo: dict[int, Any] = {}
        for w in self.wrappers():
            for name in getattr(w, "_shared_fields", ()):
                obj = w.__dict__.get(name)
                if obj is not None:
                    memo[id(obj)] = obj
        return copy.deepcopy(self, memo)
