"""Which built-in protocol functions the engine inlines into its loop (issue #31).

The results of inlined and called loops are compared, against committed
references, by tests/sketch/test_results_unchanged.py.
"""

from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.loop import INLINE_BYTECODE, inlined, no_init
from sketchsim.sketch.plugins import resolve_spec


def plan_of(spec):
    fam = HardFamily(4, 2, 0)
    proto, params, _ = resolve_spec(spec)
    return proto.plan(fam.context(), params)


def test_small_functions_are_inlined_large_ones_called():
    roles = ("emit", "update", "answer")
    raw = plan_of("raw")
    for fn, role in zip((raw.emit, raw.update, raw.answer), roles, strict=True):
        assert len(fn.py_func.__code__.co_code) <= INLINE_BYTECODE[role]
        out = inlined(fn, role)
        assert out is not fn and out.py_func is fn.py_func
        assert out.targetoptions.get("inline") == "always"
    kernel = plan_of("kernel")
    assert len(kernel.emit.py_func.__code__.co_code) > INLINE_BYTECODE["emit"]
    assert inlined(kernel.emit, "emit") is kernel.emit
    # the same function is inlined as an update, called as an emit
    assert inlined(kernel.update, "update") is not kernel.update
    assert inlined(kernel.update, "emit") is kernel.update
    assert inlined(kernel.answer, "answer") is not kernel.answer
    # a plan without init gets the empty one, inlined into the loop (nothing left of it)
    out = inlined(no_init, "init")
    assert out is not no_init and out.targetoptions.get("inline") == "always"


def test_plain_python_functions_are_left_alone():
    def emit(layer, pos, bits, ctx, state, aux, out):
        out[0] = 1

    assert inlined(emit, "emit") is emit
