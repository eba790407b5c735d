"""The plug-in contract (docs/protocols.md): every misbehaving plug-in is refused in one line.

Each test writes a small plug-in to tmp_path that breaks exactly one rule and checks
that the run stops with an error naming the protocol and the bad value, instead of
a truncated or silently wrong result.
"""

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from plugin_files import write_plugin

from sketchsim.cli import main
from sketchsim.errors import PluginError, ProtocolError
from sketchsim.sketch import HardFamily
from sketchsim.sketch.measure import measure
from sketchsim.sketch.plugins import resolve_spec

FAM = HardFamily(2, 2, seed=0)


def run_plugin(path, name="t"):
    proto, params, _ = resolve_spec(f"{path}:{name}")
    return measure(FAM, FAM.all_answers(), proto, params)


def cli(*args):
    return CliRunner().invoke(main, ["transcript", "--q", "2", "--s", "2", "--quiet", *args])


def assert_fails(res, needle):
    """Exit 2, no traceback, and the run ends with one ``error:`` line (after the header)."""
    assert_error_line(res, needle, only_line=False)


# ---- the reference plug-in is accepted, jitted and not ---------------------------------


@pytest.mark.parametrize("jit", [True, False])
def test_well_behaved_plugin_passes(tmp_path, jit):
    rep = run_plugin(write_plugin(tmp_path, jit=jit))
    assert rep.correct_fraction == 1.0 and rep.meets_bound
    assert rep.engine == ("jit" if jit else "python (slow)")


# ---- integers: no fraction is truncated --------------------------------------------------


def test_python_answer_with_fraction_is_refused(tmp_path):
    path = write_plugin(tmp_path, jit=False, answer_body="return state[0] + 0.4")
    with pytest.raises(ProtocolError, match=r"protocol t: answer at query 1 returned .*0\.4"):
        run_plugin(path)


def test_python_emit_with_fraction_is_refused(tmp_path):
    body = "for i in range(q):\n    out[i] = count_ones(bits, i * s, (i + 1) * s) + 0.9"
    path = write_plugin(tmp_path, jit=False, emit_body=body)
    with pytest.raises(ProtocolError, match=r"protocol t: layer 1, token 3, slot 1 emitted 0\.9"):
        run_plugin(path)


def test_python_float_symbol_is_refused_even_when_whole(tmp_path):
    body = "for i in range(q):\n    out[i] = float(count_ones(bits, i * s, (i + 1) * s))"
    path = write_plugin(tmp_path, jit=False, emit_body=body)
    with pytest.raises(ProtocolError, match="symbols must be integers"):
        run_plugin(path)


def test_jitted_answer_with_fraction_is_refused(tmp_path):
    path = write_plugin(tmp_path, answer_body="return state[0] + 0.7")
    with pytest.raises(ProtocolError, match=r"protocol t: answer at query 1 returned 0\.7"):
        run_plugin(path)


def test_jitted_emit_with_fraction_is_refused(tmp_path):
    body = "for i in range(q):\n    out[i] = count_ones(bits, i * s, (i + 1) * s) + 0.9"
    path = write_plugin(tmp_path, emit_body=body)
    with pytest.raises(ProtocolError, match=r"layer 1, token 3, slot 1 emitted 0\.9"):
        run_plugin(path)


# ---- bounds: state, out and read-only arguments -----------------------------------------


def test_jitted_write_past_state_is_caught(tmp_path):
    path = write_plugin(tmp_path, update_body="state[5] = 1")
    with pytest.raises(ProtocolError, match=r"protocol t: update at layer 1, token 1 indexed"):
        run_plugin(path)


def test_jitted_write_past_out_is_caught(tmp_path):
    body = "for i in range(q + 40):\n    out[i] = 0"
    path = write_plugin(tmp_path, emit_body=body)
    with pytest.raises(ProtocolError, match=r"emit at layer 1, token 3 indexed outside an array"):
        run_plugin(path)


def test_jitted_write_past_declared_symbols_is_caught(tmp_path):
    """out has exactly `symbols` entries in the guarded pass, even if the engine's is longer."""
    path = write_plugin(tmp_path, symbols="ctx.q - 1")
    with pytest.raises(ProtocolError, match="emit at layer 1, token 3 indexed outside"):
        run_plugin(path)


def test_python_write_past_state_is_caught(tmp_path):
    path = write_plugin(tmp_path, jit=False, update_body="state[5] = 1")
    with pytest.raises(ProtocolError, match="update at layer 1, token 1 indexed outside"):
        run_plugin(path)


@pytest.mark.parametrize("jit", [True, False])
def test_write_into_token_bits_is_refused(tmp_path, jit):
    body = "bits[0] = 0\nfor i in range(q):\n    out[i] = 0"
    path = write_plugin(tmp_path, jit=jit, emit_body=body)
    with pytest.raises(ProtocolError, match="protocol t: emit .*read-only"):
        run_plugin(path)


@pytest.mark.parametrize("jit", [True, False])
def test_emit_writing_its_state_is_refused(tmp_path, jit):
    """emit reads its state only: layer 0 of the shared tokens is emitted once per batch."""
    body = "state[0] = 1\nfor i in range(q):\n    out[i] = count_ones(bits, i * s, (i + 1) * s)"
    path = write_plugin(tmp_path, jit=jit, emit_body=body)
    with pytest.raises(ProtocolError, match="protocol t: emit .*read-only"):
        run_plugin(path)


# ---- init: a token's starting state from its own input ------------------------------------


# init keeps 7 + pos in state[1]; update adds it to the count; answer subtracts 7 + pos,
# so the answers are right only if init ran on every token (with its own pos)
_INIT_PARTS = dict(
    state_size="2",
    init="init_state",
    init_body="state[1] = 7 + pos",
    update_body="if pos < ctx[0]:\n    state[0] = sketch[pos] + state[1]",
    answer_body="return state[0] - 7 - pos",
)


@pytest.mark.parametrize("jit", [True, False])
def test_plugin_with_init_runs_and_is_correct(tmp_path, jit):
    rep = run_plugin(write_plugin(tmp_path, jit=jit, **_INIT_PARTS))
    assert rep.correct_fraction == 1.0 and rep.meets_bound


def test_plugin_without_its_init_is_wrong(tmp_path):
    """The check above can fail: the same plug-in with init=None answers wrong."""
    rep = run_plugin(write_plugin(tmp_path, **{**_INIT_PARTS, "init": "None"}))
    assert rep.correct_fraction == 0.0


@pytest.mark.parametrize("jit", [True, False])
def test_init_writing_its_bits_is_refused(tmp_path, jit):
    parts = {**_INIT_PARTS, "init_body": "state[1] = 7 + pos\nbits[0] = 0"}
    with pytest.raises(ProtocolError, match="protocol t: init .*read-only"):
        run_plugin(write_plugin(tmp_path, jit=jit, **parts))


@pytest.mark.parametrize("jit", [True, False])
def test_raising_init_is_one_line(tmp_path, jit):
    parts = {**_INIT_PARTS, "init_body": "raise ValueError('no start')"}
    with pytest.raises(ProtocolError, match="protocol t: init at token 1 raised .*no start"):
        run_plugin(write_plugin(tmp_path, jit=jit, **parts))


@pytest.mark.parametrize("jit", [True, False])
def test_init_writing_past_state_is_caught(tmp_path, jit):
    parts = {**_INIT_PARTS, "init_body": "state[2] = 7"}
    with pytest.raises(ProtocolError, match="protocol t: init at token 1 indexed outside"):
        run_plugin(write_plugin(tmp_path, jit=jit, **parts))


def test_init_with_hidden_state_is_refused(tmp_path):
    """An init that counts its calls: the engine runs it once per batch for shared tokens."""
    parts = {
        **_INIT_PARTS,
        "header": "CALLS = [0]",
        "init_body": "CALLS[0] += 1\nstate[1] = 7 + pos + (CALLS[0] > 5)",
    }
    with pytest.raises(ProtocolError, match="not deterministic"):
        run_plugin(write_plugin(tmp_path, jit=False, **parts))


# ---- determinism -------------------------------------------------------------------------


def test_python_random_symbols_are_refused(tmp_path):
    body = "import random\nfor i in range(q):\n    out[i] = random.randint(0, s)"
    path = write_plugin(tmp_path, jit=False, emit_body=body)
    with pytest.raises(ProtocolError, match="protocol t is not deterministic"):
        run_plugin(path)


def test_jitted_random_answers_are_refused(tmp_path):
    path = write_plugin(tmp_path, answer_body="return state[0] + np.random.randint(0, 2)")
    with pytest.raises(ProtocolError, match="protocol t is not deterministic"):
        run_plugin(path)


def test_hidden_global_state_is_refused(tmp_path):
    """A counter kept between calls: the second run of the sample differs."""
    header = "CALLS = [0]"
    body = "CALLS[0] += 1\nreturn state[0] + (CALLS[0] > 5)"
    path = write_plugin(tmp_path, jit=False, header=header, answer_body=body)
    with pytest.raises(ProtocolError, match="not deterministic"):
        run_plugin(path)


# ---- failures at run time: one line, exit 2 ---------------------------------------------


@pytest.mark.parametrize("jit", [True, False])
def test_raising_emit_is_one_line(tmp_path, jit):
    body = "if pos == q:\n    raise ValueError('boom')\nfor i in range(q):\n    out[i] = 0"
    path = write_plugin(tmp_path, jit=jit, emit_body=body)
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t: emit at layer 1, token 3 raised ValueError: boom")


def test_raising_update_and_answer_name_the_function(tmp_path):
    path = write_plugin(tmp_path, jit=False, answer_body="return 1 // 0")
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t: answer at query 1 raised ZeroDivisionError")


def test_wrong_signature_is_one_line(tmp_path):
    path = write_plugin(tmp_path)
    text = path.read_text().replace(
        "def update(layer, pos, bits, ctx, state, sketch, aux):", "def update(layer, pos, bits):"
    )
    text = text.replace("    if pos < ctx[0]:\n        state[0] = sketch[pos]", "    return 0")
    path.write_text(text)
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t: update at layer 1, token 1 raised TypeError")


def test_untypable_return_is_one_line(tmp_path):
    path = write_plugin(tmp_path, answer_body="return (state[0], 'x')")
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t: answer at query 1 returned")


def test_numba_typing_error_is_one_line(tmp_path):
    path = write_plugin(tmp_path, answer_body="return state[0] + 'a'")
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t: numba cannot compile answer")


# ---- bad Plan fields -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "part,value,needle",
    [
        ("aux", '"abc"', "protocol t: Plan.aux must be numbers"),
        ("aux", "[float('nan')]", "protocol t: Plan.aux has a non-finite value"),
        ("symbols", "2.5", "protocol t: a layer's symbols must be an integer, got 2.5"),
        ("state_size", "1.5", "protocol t: Plan.state_size must be an integer >= 1, got 1.5"),
        ("state_size", "0", "Plan.state_size must be an integer >= 1, got 0"),
        ("symbols", "'3'", "a layer's symbols must be an integer"),
        ("init", "3", "protocol t: Plan.init must be a function or None"),
    ],
)
def test_bad_plan_fields_are_one_line(tmp_path, part, value, needle):
    path = write_plugin(tmp_path, **{part: value})
    with pytest.raises(PluginError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        run_plugin(path)
    assert_fails(cli("--protocol", f"{path}:t"), needle)


# ---- size-like parameters are bounded before allocation ----------------------------------


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("kernel:r=1e8", "protocol kernel: r=100000000 features"),
        ("multihead:heads=1e9", "protocol multihead: r=1 features, 1000000000 heads"),
    ],
)
def test_huge_sizes_are_refused_with_the_limit(spec, needle):
    res = cli("--protocol", spec)
    assert_fails(res, needle)
    assert "above the limit of 256.0 MiB" in res.output
    assert "SKETCHSIM_MAX_ENGINE_BYTES" in res.output


def test_size_limit_can_be_raised(monkeypatch):
    monkeypatch.setenv("SKETCHSIM_MAX_ENGINE_BYTES", "100")
    assert_fails(cli("--protocol", "kernel:r=4"), "above the limit of 100 bytes")
    monkeypatch.setenv("SKETCHSIM_MAX_ENGINE_BYTES", str(1 << 20))
    assert cli("--protocol", "kernel:r=4").exit_code == 0


def test_huge_state_in_a_plugin_is_refused(tmp_path):
    path = write_plugin(tmp_path, state_size="10**12")
    with pytest.raises(PluginError, match=r"protocol t: its plan needs 3,000,000,000,\d+ int64"):
        run_plugin(path)


def test_int_params_accept_scientific_notation_only_when_whole():
    proto, params, _ = resolve_spec("kernel:r=1e2")
    assert params["r"] == 100
    with pytest.raises(PluginError, match="r expects int, got '2.5'"):
        resolve_spec("kernel:r=2.5")


def test_guarded_pass_does_not_change_results(tmp_path):
    """The bounds-checked engine of a plug-in gives the built-in's exact fingerprints."""
    from sketchsim.sketch.engine import Engine

    proto, params, _ = resolve_spec(f"{write_plugin(tmp_path)}:t")
    builtin, bparams, _ = resolve_spec("block-counts")
    fam = HardFamily(3, 3, seed=2)
    tokens = fam.tokens(fam.all_answers())
    a = Engine(proto.plan(fam.context(), params), fam.context(), "t").run(tokens)
    b = Engine(builtin.plan(fam.context(), bparams), fam.context(), "b").run(tokens)
    np.testing.assert_array_equal(a.fingerprints, b.fingerprints)
    np.testing.assert_array_equal(a.answers, b.answers)


# ---- failures on inputs the guarded sample did not see ------------------------------------

# F(2, 2) exhaustive: the sample is inputs 1, 3, 6 and 9; input 2 has t = (0, 1).
_LATE = "t0 = count_ones(bits, 0, s)\nt1 = count_ones(bits, s, 2 * s)\nif t0 == 0 and t1 == 1:\n"


def test_jitted_raise_on_an_unsampled_input_is_one_line(tmp_path):
    body = _LATE + "    raise ValueError('late')\nfor i in range(q):\n    out[i] = 0"
    path = write_plugin(tmp_path, emit_body=body)
    res = cli("--protocol", f"{path}:t")
    assert_fails(res, "protocol t failed: ValueError: late")


def test_jitted_write_past_state_on_an_unsampled_input_is_caught(tmp_path):
    """Plug-ins keep bounds checking for the whole run, not only the guarded sample."""
    body = "s = ctx[1]\n" + _LATE + "    state[9] = 1\nif pos < ctx[0]:\n    state[0] = sketch[pos]"
    path = write_plugin(tmp_path, update_body=body)
    with pytest.raises(ProtocolError, match="protocol t failed: IndexError"):
        run_plugin(path)
