"""Shared assertion for the CLI's bad-input contract."""


def assert_error_line(res, needle: str, only_line: bool = True) -> None:
    """Exit code 2, no traceback, and the (last, or only) output line is ``error: ...needle...``."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    if only_line:
        assert len(lines) == 1, res.output
    assert lines[-1].startswith("error:") and needle in lines[-1], res.output
