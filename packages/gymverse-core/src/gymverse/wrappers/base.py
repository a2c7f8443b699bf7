"""`LiveWrapper`: the former name of `gymverse.Wrapper`, kept so that existing subclasses still import."""

from __future__ import annotations

from gymverse.core import Wrapper

#: `Wrapper` is the one wrapper base (explicit forwarding; `get_wrapper_attr`/`set_wrapper_attr` for the rest).
LiveWrapper = Wrapper

__all__ = ["LiveWrapper"]
