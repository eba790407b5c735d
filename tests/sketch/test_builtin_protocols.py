"""The fast built-in plans against references written from THEORY section 5 alone.

The kernel head's emit writes only a token's set bits and its update walks the
query's set bits through lookup tables; raw keeps a query's fields in its state.
These references recompute the transcripts and answers with dense NumPy, sharing
no code with the plans.  Also: the compiled engine of a built-in is cached on disk
and reused by a fresh process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch import HardFamily
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.plugins import resolve_spec


def kernel_reference(X, q, s, r, bits, values, heads):
    """Transcripts and answers of ``heads`` kernel heads (THEORY 5), densely.

    ``X``: (B, N, m) 0/1.  Coordinate c of the value map goes to head c mod H,
    slot c // H; feature ``phi_K(x_j) = e_{j mod r}``; entries saturate at 2^bits - 1.
    """
    B, N, m = X.shape
    V = X if values == "identity" else X[:, :, : q * s].reshape(B, N, q, s).sum(axis=3)
    d = V.shape[2]
    top = 2**bits - 1
    transcripts, answers = [], []
    for b in range(B):
        entries, heads_info = [], []
        for h in range(heads):
            coords = list(range(h, d, heads))
            start = len(entries)
            for k in range(r):
                speakers = [j for j in range(N) if j % r == k]
                entries.append(len(speakers))
                entries.extend(int(V[b, speakers, c].sum()) for c in coords)
            heads_info.append((start, coords))
        entries = [min(e, top) for e in entries]
        ans = []
        for i in range(q):
            y, dead = 0.0, False
            for start, coords in heads_info:
                if not coords:
                    continue
                z = num = 0.0
                for k in range(r):
                    base = start + k * (len(coords) + 1)
                    z += entries[base]
                    for l, c in enumerate(coords):
                        weight = X[b, i, c] if values == "identity" else int(c == i)
                        num += weight * entries[base + 1 + l]
                if z == 0.0:
                    dead = True
                    break
                y += N * num / z
            if dead:
                ans.append(-1)
                continue
            if values == "identity":
                y -= int(X[b, i].sum()) + (q - 1) * (s + 1)
            else:
                y -= s
            ans.append(int(round(y)))
        transcripts.append(entries)
        answers.append(ans)
    return np.array(transcripts), np.array(answers)


@pytest.mark.parametrize(
    "spec,r,bits,values,heads",
    [
        ("kernel", 1, 8, "identity", 1),
        ("kernel:bits=2", 1, 2, "identity", 1),
        ("kernel:r=3,bits=3", 3, 3, "identity", 1),
        ("kernel:values=blocks,bits=3", 1, 3, "blocks", 1),
        ("kernel:values=blocks,r=2,bits=2", 2, 2, "blocks", 1),
        ("multihead:heads=3,bits=4", 1, 4, "identity", 3),
        ("multihead:heads=2,r=2,bits=8", 2, 8, "identity", 2),
        ("multihead:heads=4,values=blocks,bits=5", 1, 5, "blocks", 4),
        ("multihead:heads=40,bits=3", 1, 3, "identity", 40),  # more heads than values
    ],
)
@pytest.mark.parametrize("q,s", [(3, 2), (2, 3)])
def test_kernel_heads_match_dense_reference(spec, r, bits, values, heads, q, s):
    fam = HardFamily(q, s, seed=5)
    proto, params, _ = resolve_spec(spec)
    plan = proto.plan(fam.context(), params)
    tokens = fam.tokens(fam.all_answers())
    res = Engine(plan, fam.context(), proto.name).run(tokens, store=True)
    ref_tr, ref_ans = kernel_reference(unpack_bits(tokens, fam.m), q, s, r, bits, values, heads)
    np.testing.assert_array_equal(res.transcripts, ref_tr)
    np.testing.assert_array_equal(res.answers, ref_ans)


@pytest.mark.parametrize("q,s", [(2, 2), (3, 3), (4, 1), (9, 7)])
def test_raw_matches_dense_min_ip(q, s):
    fam = HardFamily(q, s, seed=1)
    proto, params, _ = resolve_spec("raw")
    plan = proto.plan(fam.context(), params)
    T = fam.sample_answers(200)
    tokens = fam.tokens(T)
    res = Engine(plan, fam.context(), "raw").run(tokens, store=True)
    X = unpack_bits(tokens, fam.m).astype(np.int64)
    ip = np.einsum("bim,bjm->bij", X[:, :q], X)
    np.testing.assert_array_equal(res.answers, ip.min(axis=2))
    np.testing.assert_array_equal(res.answers, T)
    w = int(plan.aux[0])
    weights = 1 << np.arange(w)
    fields = (X.reshape(len(T), fam.n_tokens, fam.m // w, w) * weights).sum(axis=3)
    np.testing.assert_array_equal(res.transcripts, fields.reshape(len(T), -1))


_CHILD = """
import json, sys
from sketchsim.sketch.plugins import resolve_spec
from sketchsim.sketch import HardFamily
from sketchsim.sketch.engine import Engine
fam = HardFamily(3, 2)
proto, params, _ = resolve_spec(sys.argv[1])
eng = Engine(proto.plan(fam.context(), params), fam.context(), proto.name)
res = eng.run(fam.tokens(fam.all_answers()))
stats = eng._loop.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()), "module": eng._loop.__module__,
                  "answers": res.answers.tolist()}))
"""


def _child(spec, env):
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, spec], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_builtin_engine_is_cached_across_processes(tmp_path):
    env = {
        **os.environ,
        "SKETCHSIM_CACHE_DIR": str(tmp_path / "engines"),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
    }
    first, second = _child("block-counts", env), _child("block-counts", env)
    assert first["module"].startswith("sketchsim_engine_")
    assert first["hits"] == 0 and second["hits"] >= 1
    assert first["answers"] == second["answers"]
    assert len(list((tmp_path / "engines" / "engines").glob("engine_*.py"))) == 1


def test_plugins_and_unwritable_folders_are_compiled_in_memory(tmp_path, monkeypatch):
    from sketchsim.sketch import engine_cache
    from sketchsim.sketch.contract import checked_copy
    from sketchsim.sketch.loop import no_init

    plan = resolve_spec("block-counts")[0].plan(HardFamily(2, 2).context(), {})
    assert engine_cache._global_name(plan.emit) == ("sketchsim.sketch.block_counts", "emit")
    assert engine_cache._global_name(checked_copy(plan.emit)) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SKETCHSIM_CACHE_DIR", str(blocker))
    assert engine_cache.cached_loop(plan.emit, plan.update, plan.answer, no_init) is None


@pytest.mark.parametrize("spec", ["kernel", "kernel:r=2", "multihead:heads=3", "multihead:r=2"])
def test_kernel_heads_ignore_bits_beyond_m(spec):
    """A token's padding bits (beyond m, never set by the built-in families) are not read."""
    fam = HardFamily(3, 2, seed=5)
    proto, params, _ = resolve_spec(spec)
    plan = proto.plan(fam.context(), params)
    tokens = fam.tokens(fam.all_answers())
    padded = tokens.copy()
    padded[..., -1] |= ~np.uint64((1 << (fam.m % 64)) - 1) if fam.m % 64 else np.uint64(0)
    assert (padded != tokens).any()
    a = Engine(plan, fam.context(), proto.name).run(tokens, store=True)
    b = Engine(plan, fam.context(), proto.name).run(padded, store=True)
    np.testing.assert_array_equal(a.transcripts, b.transcripts)
    np.testing.assert_array_equal(a.answers, b.answers)
