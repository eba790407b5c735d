"""The vocabulary path of the heads: the per-input formulas, computed once per distinct token."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from numerics import assert_close_as_rounding  # noqa: E402

from sketchsim.experiments import train as train_mod  # noqa: E402
from sketchsim.experiments import vocabulary as vocab_mod  # noqa: E402
from sketchsim.experiments.models import FEATURE_MAPS, make_head, predict  # noqa: E402
from sketchsim.experiments.train import fit, metrics  # noqa: E402
from sketchsim.experiments.vocabulary import Vocabulary  # noqa: E402
from sketchsim.minip.kernel import minip_targets  # noqa: E402
from sketchsim.minip.token_ids import token_ids  # noqa: E402


def _inputs(b=40, n=3, m=6, pool=9, seed=0):
    """``b`` inputs drawn from ``pool`` distinct tokens: a vocabulary smaller than b * n."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 2, (pool, m), dtype=np.uint8)
    tokens = np.unique(tokens, axis=0)
    x = tokens[rng.integers(0, len(tokens), (b, n))]
    ids, vocab = token_ids(x)
    return x, torch.tensor(x, dtype=torch.float32), torch.tensor(ids), vocab


def _heads(vocab, m=6):
    for kind in FEATURE_MAPS:
        model = "signed" if kind == "signed" else "kernel"
        for heads, causal, enc in ((1, False, "01"), (2, False, "pm1"), (1, True, "pm1")):
            yield (
                f"{kind}-h{heads}-c{causal}-{enc}",
                make_head(
                    model, m, 5, kind, vocab=vocab, seed=3, heads=heads, causal=causal, encoding=enc
                ),
            )
    for heads, causal in ((1, False), (2, True)):
        yield (
            f"softmax-h{heads}-c{causal}",
            make_head("softmax", m, seed=3, heads=heads, causal=causal, encoding="pm1"),
        )


def test_every_head_gives_its_per_input_outputs_and_gradients_on_the_vocabulary():
    """Two code paths with different arithmetic, compared up to this computation's rounding.

    The vocabulary path sums in another order (BLAS products over distinct tokens),
    so the outputs agree up to float32 rounding, whose size is measured here by
    running the per-input path in float64 (``tests/numerics.py``): signed heads
    whose normalizer nearly cancels have outputs near 150 and rounding near 1e-3.
    """
    _, x, ids, vocab = _inputs()
    voc = Vocabulary.of(x, ids)
    assert voc is not None and voc.tokens.shape[0] == vocab
    for name, head in _heads(vocab):
        direct = head(x, ids)
        fast = predict(head, x, ids, voc)
        with torch.no_grad():
            exact = copy.deepcopy(head).double()(x.double(), ids)
        assert_close_as_rounding(fast.detach(), direct.detach(), direct.detach(), exact, name)
        g = torch.randn_like(direct)
        grads = []
        for y in (direct, fast):
            head.zero_grad()
            (y * g).sum().backward(retain_graph=True)
            grads.append([p.grad.clone() for p in head.parameters()])
        for a, b in zip(*grads, strict=True):
            # relative to the largest entry: signed features can make the
            # normalizer nearly vanish, and gradients of 1e5 carry rounding of 1e-2
            assert float((a - b).abs().max()) <= 1e-4 * float(a.abs().max()) + 1e-5, name


def test_the_vocabulary_holds_each_distinct_token_at_its_id():
    raw, x, ids, vocab = _inputs(seed=4)
    voc = Vocabulary.of(x, ids)
    assert torch.equal(voc.tokens[voc.ids], x)
    assert torch.equal(voc.query(causal=True), ids[:, -1:])
    assert torch.equal(voc.query(causal=False), ids)


def test_no_vocabulary_without_ids_for_ids_of_other_tokens_or_when_it_does_not_pay():
    _, x, ids, _ = _inputs()
    assert Vocabulary.of(x, None) is None
    wrong = ids.clone()
    wrong[0, 0] = (wrong[0, 0] + 1) % (int(ids.max()) + 1)  # equal ids, different tokens
    if torch.equal(x[0, 0], x[wrong == wrong[0, 0]][-1]):
        pytest.skip("the shifted id happens to name the same token")  # pragma: no cover
    assert Vocabulary.of(x, wrong) is None
    # every token distinct: V = B * N, V^2 > VOCAB_WORTH * B * N^2 for B > 16 / N
    rng = np.random.default_rng(1)
    distinct = np.unique(rng.integers(0, 2, (400, 12), dtype=np.uint8), axis=0)[:300]
    xd = distinct.reshape(100, 3, 12)
    ids_d, _ = token_ids(xd)
    assert Vocabulary.of(torch.tensor(xd, dtype=torch.float32), torch.tensor(ids_d)) is None


def test_fit_trains_on_the_vocabulary_and_reports_the_per_input_metrics(monkeypatch):
    raw, x, ids, vocab = _inputs(b=60, pool=12, seed=2)
    t = torch.tensor(minip_targets(raw), dtype=torch.float32)
    used = []
    real = train_mod.predict

    def spy(model, x_, ids_, voc=None):
        used.append(voc is not None)
        return real(model, x_, ids_, voc)

    monkeypatch.setattr(train_mod, "predict", spy)
    fast = make_head("kernel", 6, 4, "elu1", seed=1, encoding="pm1")
    res = fit(fast, x, ids, t, steps=40, lr=0.01, seed=1, stop_below=1e-9)
    assert used and all(used)
    with torch.no_grad():
        assert (res.sequence_error, res.position_error, res.max_abs_error) == metrics(
            fast(x, ids), t
        )
    # the same training on the per-input path: equal up to float rounding
    monkeypatch.setattr(vocab_mod.Vocabulary, "of", classmethod(lambda cls, x, ids: None))
    slow = make_head("kernel", 6, 4, "elu1", seed=1, encoding="pm1")
    fit(slow, x, ids, t, steps=40, lr=0.01, seed=1, stop_below=1e-9)
    for a, b in zip(fast.parameters(), slow.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
