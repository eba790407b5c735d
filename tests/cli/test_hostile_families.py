"""Misbehaving family plug-ins found by the issue-9 hunt: one line naming the family and
exit 2; never a traceback, another exit code, or a measurement of tokens the family
did not define (reported as valid)."""

import json
import textwrap

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main

FAMILIES = """
import sys

import numpy as np

from sketchsim.sketch.family import FamilyType, HardFamily


class Hostile(HardFamily):
    name = "hostile"
    kind = "{kind}"

    def __init__(self, q, s, seed):
        super().__init__(q, s, seed)
        if self.kind == "float_q":
            self.q = 2.5
        if self.kind == "negative_s":
            self.s = -3

    def variable_tokens(self, T, out=None):
        tokens = super().variable_tokens(T)
        if self.kind == "rows":
            return tokens[:1].copy()  # one input's tokens for every batch
        if self.kind == "words":
            return np.ascontiguousarray(tokens[:, :, :0])
        if self.kind == "none":
            return None
        if self.kind == "float":
            return tokens.astype(np.float64)
        return tokens


def build(q, s, seed, params):
    if Hostile.kind == "exit":
        sys.exit(4)
    return Hostile(q, s, seed)


F = FamilyType("hostile", "a misbehaving family", build)
"""

PROTOCOL = """
import dataclasses

from sketchsim.sketch.plugins import resolve_spec

RAW = dataclasses.replace(resolve_spec("raw")[0], families=("hostile",), builtin=False)
"""


def _transcript(tmp_path, kind, *extra):
    fam = tmp_path / "fam.py"
    fam.write_text(textwrap.dedent(FAMILIES).replace("{kind}", kind))
    proto = tmp_path / "proto.py"
    proto.write_text(PROTOCOL)
    argv = ["transcript", "--q", "2", "--s", "1", "--quiet", "--family", f"{fam}:F",
            "--protocol", f"{proto}:RAW", *extra]  # fmt: skip
    return CliRunner().invoke(main, argv)


@pytest.mark.parametrize(
    "kind, needle",
    [
        ("exit", "family hostile: build failed: SystemExit: 4"),  # was: exit code 4
        ("float_q", "family hostile: q must be an integer >= 1, got 2.5"),  # was TypeError
        ("negative_s", "family hostile: s must be an integer >= 1, got -3"),  # ValueError
        ("none", "family hostile: variable_tokens returned None"),  # was IndexError
        ("words", "family hostile: variable_tokens returned shape (4, 1, 0)"),  # ValueError
        ("float", "family hostile: variable_tokens returned float64"),  # blamed the protocol
        ("rows", "family hostile: variable_tokens returned shape (1, 1, 1)"),  # wrong result
    ],
)
def test_misbehaving_family_is_one_line(tmp_path, kind, needle):
    assert_error_line(_transcript(tmp_path, kind), needle, only_line=False)


@pytest.mark.slow  # compiles a plug-in engine: about 10 s
def test_the_same_family_behaving_is_measured(tmp_path):
    res = _transcript(tmp_path, "fine", "--json", str(tmp_path / "t.json"))
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "t.json").read_text())
    (entry,) = data["protocols"]
    assert entry["correct_fraction"] == 1.0 and data["mode"] == "exhaustive"  # raw: every input
