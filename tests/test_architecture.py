"""The layering of docs/architecture.md: imports only point down, no cycles, no private names."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sketchsim"
#: Lower layers first; a module may import its own layer and those before it.
LAYERS = [
    "minip", "heads", "sketch", "prove", "certify", "experiments", "cluster", "runs", "tables",
    "api", "cli",
]  # fmt: skip
TOP = {
    "errors",
    "config",
    "results",
    "machine",
    "numba_cache",
    "estimates",
    "futures",
    "checkpoint",
    "lazy",
    "input_files",
    "units",
    "__init__",
    "__main__",
}


def _modules() -> dict:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, modules: dict):
    """``(target module, imported name)`` of every sketchsim import, top-level or not."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sketchsim"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield (full, None) if full in modules else (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sketchsim"):
                    yield alias.name, None


def _layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    if part in TOP or part == "sketchsim":
        return -1
    return LAYERS.index(part)


def test_every_package_is_in_a_layer():
    for module in _modules():
        assert _layer(module) >= -1, module


def test_imports_point_down_and_name_no_private_members():
    modules = _modules()
    for module, path in modules.items():
        for target, name in _imports(path, modules):
            if target == "sketchsim" or module in ("sketchsim", "sketchsim.__main__"):
                continue
            assert target in modules, (module, target)
            assert _layer(target) <= _layer(module), f"{module} imports up: {target}"
            if name is not None and name.startswith("_") and target != module:
                raise AssertionError(f"{module} imports the private {target}.{name}")


def test_no_import_cycles():
    modules = _modules()
    graph = {
        m: {
            t
            for t, _ in _imports(p, modules)
            if t in modules and t != m and not t.startswith(m + ".")
        }
        for m, p in modules.items()
    }
    state: dict = {}

    def visit(m, stack):
        state[m] = "open"
        for t in graph[m]:
            if state.get(t) == "open":
                raise AssertionError("cycle: " + " -> ".join([*stack[stack.index(t) :], t]))
            if t not in state:
                visit(t, [*stack, t])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])


DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _paragraphs() -> dict:
    """The text describing each package (``**`pkg/`**`` paragraphs) and the top level."""
    import re

    text = DOC.read_text()
    out = {}
    for match in re.finditer(r"\*\*`(\w+)/`\*\*(.*?)(?=\n\n)", text, re.S):
        out[match.group(1)] = match.group(2)
    top = text[text.index("The top-level modules:") :]
    out["top"] = top[: top.index("\n\n")] if "\n\n" in top else top
    return out


def test_every_module_is_named_in_the_architecture_doc():
    paragraphs = _paragraphs()
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if len(parts) == 1:
            where = "top"
        elif parts[-1] == "__init__.py":
            continue
        else:
            where = parts[0]
        if f"`{parts[-1]}`" not in paragraphs.get(where, ""):
            missing.append(f"{'/'.join(parts)} (in the {where} paragraph)")
    assert not missing, "docs/architecture.md does not name: " + ", ".join(missing)


def _drawn_edges() -> set:
    import re

    block = re.search(r"```imports\n(.*?)```", DOC.read_text(), re.S).group(1)
    edges = set()
    for line in block.strip().splitlines():
        src, _, targets = line.partition("->")
        edges |= {(src.strip(), t.strip()) for t in targets.split(",") if t.strip()}
    return edges


def _package_edges() -> set:
    modules = _modules()
    edges = set()
    for module, path in modules.items():
        src = _layer(module)
        for target, _ in _imports(path, modules):
            dst = _layer(target) if target != "sketchsim" else -1
            if src >= 0 and dst >= 0 and dst != src:
                edges.add((LAYERS[src], LAYERS[dst]))
    return edges


def test_the_drawn_imports_are_the_real_ones():
    drawn, real = _drawn_edges(), _package_edges()
    assert not drawn - real, f"drawn in docs/architecture.md but not in the code: {drawn - real}"
    assert not real - drawn, f"in the code but not drawn in docs/architecture.md: {real - drawn}"
    for src, dst in drawn:
        assert LAYERS.index(dst) < LAYERS.index(src), f"{src} -> {dst} points up"


def test_the_cli_stays_a_thin_layer():
    """Issue #46: option parsing, one call, printing; at most 2,000 lines in all."""
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "cli").glob("*.py"))
    assert lines <= 2000, f"sketchsim/cli/ has {lines} lines"


def test_a_command_name_names_the_command_only():
    """``transcript``, ``verify`` and ``minrank`` name one thing (#46): the command, one
    module per layer that holds it (cli, runs, tables); the library modules have their own
    names, and the one old name plug-ins imported stays only as a warning alias."""
    import importlib
    import sys
    import warnings

    layers = {"cli", "runs", "tables"}
    for name in ("transcript", "verify", "minrank"):
        where = {p.parent.name for p in ROOT.rglob(f"{name}.py")}
        assert where - {"sketch"} <= layers, (name, sorted(where))
    assert {p.parent.name for p in ROOT.rglob("transcript.py")} == layers | {"sketch"}
    sys.modules.pop("sketchsim.sketch.transcript", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("sketchsim.sketch.transcript")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    new = importlib.import_module("sketchsim.sketch.measure")
    assert old.__all__ == new.__all__ and old.measure is new.measure


def test_each_public_class_name_is_defined_once():
    """#62: ``Family`` and ``Construction`` were each two classes; the old witness names
    stay importable, with a deprecation warning."""
    import warnings

    seen: dict = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, twice
    from sketchsim.certify import WitnessFamily, witness

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import sketchsim.certify as certify

        assert certify.Family is WitnessFamily and witness.Family is WitnessFamily
    assert sum(issubclass(w.category, DeprecationWarning) for w in caught) == 2
