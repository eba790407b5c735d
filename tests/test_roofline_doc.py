"""docs/benchmarks.md's issue #31 tables are the committed roofline runs (docs/roofline/)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_roofline_tables_match_the_run_files():
    spec = importlib.util.spec_from_file_location(
        "bench_roofline", ROOT / "benchmarks" / "bench_roofline.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    runs = {}
    names = ("before", "after", "session2_before", "session2", "session3_before", "session3")
    for name in names + ("session6_before", "session6", "session6_before_run2", "session6_run2"):
        runs[name] = json.loads((ROOT / "docs" / "roofline" / f"{name}.json").read_text())
    # round 4 session 1 (before/after), and session 2 (its starting commit/this code)
    assert bench.doc_tables(runs["before"], runs["after"]) in page
    assert bench.doc_tables(runs["session2_before"], runs["session2"]) in page
    assert bench.doc_tables(runs["session3_before"], runs["session3"]) in page
    assert bench.doc_tables(runs["session6_before"], runs["session6"]) in page  # sessions 5, 6
    after = runs["after"]
    assert [r["protocol"] for r in after["protocols"]] == [
        "raw", "block-counts", "clipped-counts", "kernel", "kernel:bits=6",
        "kernel:values=blocks,bits=7", "multihead:heads=4",
    ]  # fmt: skip
    for run in runs.values():
        for r in run["protocols"]:  # the fraction is the run's roofline over its time
            assert abs(r["fraction_measure"] - r["roofline_us"] / r["measure_us"]) < 1e-9
