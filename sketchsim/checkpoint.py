"""The checkpoint and resume helper of the measuring commands.

A measuring run is a list of finished *units* (a protocol's report, a frontier
cell, a minrank row, a trained head).  After each unit the whole result file is
rewritten atomically with ``complete: false``; a run that resumes from it keeps
every unit whose key it meets again and measures the rest.  A unit's key names
what produced it: the protocol's source identity *and* the family's (file hash,
module version, a digest of the tokens it builds) and the files a protocol reads
(a weights file's hash), so a file edited under the same name is measured again
instead of reusing the old numbers.  The file records the code that wrote it
(``code``: :func:`sketchsim.machine.package_digest`); a file of other code
(another version, an edited checkout, or none recorded) is refused in one line,
never mixed in and never silently overwritten.
:func:`sketchsim.units.run_units` runs the units between the saves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from sketchsim.errors import SketchsimError

__all__ = ["Checkpoint", "unit_key"]


def unit_key(*parts) -> str:
    """A resume key: the JSON of ``parts`` (dicts with sorted keys)."""
    return json.dumps(parts, sort_keys=True)


class Checkpoint:
    """A result file rewritten after every finished unit, and read back to resume.

    Parameters
    ----------
    path : path-like or None
        The result file; None keeps nothing and resumes nothing.
    command : str
        The command recorded in the file (:func:`sketchsim.results.result_payload`).
    params : dict
        The run's parameters, recorded in the file.
    units : str
        Name of the list of finished units in the file (``"protocols"``, ``"cells"``).
    key : callable
        ``key(unit, file) -> str`` (``file``: the whole file read back); it must
        include every identity the unit depends on.
    problem : callable
        ``problem(unit) -> str or None``: what is wrong with a unit read back.
    match : dict, optional
        Top-level fields the file must hold with these values to be resumed
        (``"parameters"`` is compared as recorded, without machine paths), or
        a callable per field that says whether the file's value will do.
    label : str
        How an error names one unit (``"protocol entry"``, ``"cell"``).
    what : str, optional
        How an error names the file (default ``"<command> result"``).
    mismatch : str
        What an error says when ``match`` fails (``"other settings"``).
    resume : bool
        Keep the units already in ``path`` (a missing file resumes nothing).
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        command: str,
        params: dict,
        units: str,
        key: Callable[[dict, dict], str],
        problem: Callable[[dict], str | None],
        match: dict | None = None,
        label: str = "entry",
        what: str | None = None,
        mismatch: str = "other settings",
        resume: bool = False,
    ):
        self.path = None if path is None else Path(path)
        self.command = command
        self.params = params
        self.units = units
        self.key = key
        self.problem = problem
        self.match = dict(match or {})
        self.label = label
        self.what = what or f"{command} result"
        self.mismatch = mismatch
        self.done: dict[str, dict] = self._load() if resume and self.path is not None else {}

    def get(self, key: str) -> dict | None:
        """The resumed unit with this key, or None."""
        return self.done.get(key)

    def save(self, units: list[dict], complete: bool, **extra) -> None:
        """Write every unit so far (and ``extra`` top-level fields) atomically."""
        if self.path is None:
            return
        from sketchsim.machine import package_digest
        from sketchsim.results import result_payload, write_json_atomic

        payload = {**extra, self.units: units, "complete": complete, "code": package_digest()}
        write_json_atomic(self.path, result_payload(self.command, self.params, payload))

    def _load(self) -> dict[str, dict]:
        from sketchsim.machine import portable_value
        from sketchsim.results import read_json

        path = self.path
        if not path.exists():
            from sketchsim.errors import printable
            from sketchsim.input_files import path_problem

            problem = path_problem(path, missing="")  # a symlink loop is not a missing file
            if problem:
                raise SketchsimError(f"cannot resume from {printable(path)}: it {problem}")
            return {}
        try:
            old = read_json(path)
        except SketchsimError as exc:
            raise SketchsimError(f"cannot resume: {exc}") from None
        if not isinstance(old, dict) or not isinstance(old.get(self.units, []), list):
            raise SketchsimError(
                f"cannot resume from {path}: not a {self.what} (no list of "
                f"{self.units} in a JSON object; got {type(old).__name__})"
            )
        for field, want in self.match.items():
            have = old.get(field)
            if callable(want):
                same = want(have)
            else:
                same = have == (portable_value(want) if field == "parameters" else want)
            if not same:
                raise SketchsimError(f"cannot resume from {path}: it was made with {self.mismatch}")
        done = {}
        for i, unit in enumerate(old.get(self.units, []), 1):
            problem = self.problem(unit)
            if problem:
                hint = (
                    " (made by an older sketchsim? measure again without --resume)"
                    if problem.startswith("has no") and "older" not in problem
                    else ""
                )
                raise SketchsimError(f"cannot resume from {path}: {self.label} {i} {problem}{hint}")
            done[self.key(unit, old)] = unit
        from sketchsim.machine import package_digest

        if old.get("code") != package_digest():  # another sketchsim's numbers: never mixed in
            raise SketchsimError(
                f"cannot resume from {path}: it was written by other sketchsim code (another "
                "version or an edited checkout); measure again without --resume, or keep it "
                "under another name"
            )
        return done
