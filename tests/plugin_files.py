"""Small protocol plug-in files written to a test's tmp_path (tests of the plug-in contract).

:func:`write_plugin` writes a block-counts protocol (correct on F(q, s)) with any of
its pieces replaced, so that each test changes exactly the one thing it breaks
(``init="init_state"`` gives the plan the ``init`` written from ``init_body``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

_TEMPLATE = """
import numpy as np
from numba import njit

from sketchsim.sketch import Layer, Plan, Protocol
from sketchsim.sketch.packed_tokens import count_ones

{header}

{deco}
def emit(layer, pos, bits, ctx, state, aux, out):
    q, s = ctx[0], ctx[1]
{emit_body}


{deco}
def update(layer, pos, bits, ctx, state, sketch, aux):
{update_body}


{deco}
def answer(pos, bits, ctx, state, aux):
{answer_body}


{deco}
def init_state(pos, bits, ctx, state, aux):
{init_body}


def setup(ctx, params):
    layer = Layer("concat", {symbols}, ctx.s + 1, speakers="last")
    return Plan([layer], {state_size}, emit, update, answer, aux={aux}, init={init})


P = Protocol("{name}", "a test plug-in", setup)
"""

DEFAULTS = {
    "header": "",
    "emit_body": "for i in range(q):\n    out[i] = count_ones(bits, i * s, (i + 1) * s)",
    "update_body": "if pos < ctx[0]:\n    state[0] = sketch[pos]",
    "answer_body": "return state[0]",
    "init_body": "return None",
    "init": "None",
    "symbols": "ctx.q",
    "state_size": "1",
    "aux": "[0.0]",
    "name": "t",
}


def write_plugin(tmp_path: Path, fname: str = "plug.py", jit: bool = True, **parts) -> Path:
    """Write the plug-in file; ``parts`` override :data:`DEFAULTS` (bodies unindented)."""
    values = {**DEFAULTS, **parts}
    for key in ("emit_body", "update_body", "answer_body", "init_body"):
        values[key] = textwrap.indent(textwrap.dedent(values[key]).strip("\n"), "    ")
    values["deco"] = "@njit" if jit else ""
    path = Path(tmp_path) / fname
    path.write_text(_TEMPLATE.format(**values))
    return path
