"""specs.discover_entry_points: the one discovery loop of protocols and families."""

from dataclasses import dataclass

import pytest
from fake_entry_points import FakeEntryPoint

from sketchsim.sketch import specs


@dataclass
class Thing:
    name: str


def test_bad_entry_points_are_reported_and_skipped(monkeypatch):
    eps = [
        FakeEntryPoint("a", "pkg.a:A", Thing("a")),
        FakeEntryPoint("bye", "pkg.bye:X", exc=SystemExit(3)),
        FakeEntryPoint("boom", "pkg.boom:X", exc=ImportError("no module named zz")),
        FakeEntryPoint("clash", "pkg.clash:X", Thing("builtin-one")),
        FakeEntryPoint("again", "pkg.again:X", Thing("a")),
        FakeEntryPoint("junk", "pkg.junk:X", 42),
    ]
    monkeypatch.setattr(specs, "entry_points", lambda group: eps)
    taken = {"builtin-one": "built-in"}
    found = specs.discover_entry_points("g", Thing, "Thing", taken)
    assert [(d.name, d.value is not None) for d in found] == [
        ("a", True),
        ("bye", False),
        ("boom", False),
        ("builtin-one", False),
        ("a", False),
        ("junk", False),
    ]
    errors = [d.error for d in found]
    assert errors[0] is None and found[0].identity == "entry point pkg.a:A"
    assert errors[1] == "failed to import: SystemExit: 3"
    assert errors[2] == "failed to import: ImportError: no module named zz"
    assert errors[3] == "ignored: the name 'builtin-one' is already taken by built-in"
    assert errors[4] == "ignored: the name 'a' is already taken by entry point pkg.a:A"
    assert errors[5] == "entry point is not a sketchsim Thing"
    assert taken == {"builtin-one": "built-in", "a": "entry point pkg.a:A"}


def test_ctrl_c_during_discovery_is_not_swallowed(monkeypatch):
    import sketchsim.sketch.family_plugins as families
    import sketchsim.sketch.plugins as plugins

    monkeypatch.setattr(
        specs, "entry_points", lambda group: [FakeEntryPoint("x", "m:X", exc=KeyboardInterrupt())]
    )
    with pytest.raises(KeyboardInterrupt):
        families.discover_families()
    with pytest.raises(KeyboardInterrupt):
        plugins.discover()
