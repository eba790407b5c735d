"""Every docstring example in the package runs and holds."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import sketchsim


def _modules_with_examples():
    root = Path(sketchsim.__file__).parent
    for info in pkgutil.walk_packages([str(root)], prefix="sketchsim."):
        if info.name.endswith("__main__"):
            continue
        rel = info.name.split(".")[1:]
        path = root.joinpath(*rel)
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if source.exists() and ">>>" in source.read_text():
            yield info.name


MODULES = sorted(_modules_with_examples())


def test_some_modules_have_examples():
    assert MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
