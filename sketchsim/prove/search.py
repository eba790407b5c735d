"""Branch and bound over boxes of answer values: proved, refuted or unknown (theory.md 5.5).

:func:`prove` builds, for every query ``i``, a tree of splits whose leaves are
boxes where the enclosure of query ``i``'s answer is exactly ``t_i``
(:class:`sketchsim.prove.forward.BoxModel`).  A box whose enclosure excludes
its ``t_i``, a single-input box it cannot decide, and the corners that
minimize or maximize each of the data token's layer-0 pre-activations are run
through the engine itself: an input the engine answers wrong is the
counterexample.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from sketchsim.prove.forward import BoxModel

__all__ = ["Outcome", "prove", "engine_answers"]

_BATCH = 256


@dataclass
class Outcome:
    """What :func:`prove` found.

    ``verdict``: ``proved``, ``refuted`` or ``unknown``; ``counterexample``: an answer
    vector the engine answers wrong (refuted); ``engine_answers``: its answers there;
    ``boxes``: boxes evaluated; ``open_boxes``: boxes left undecided (unknown);
    ``trees``: per query, its tree in preorder (proved); ``leaves``: their count.
    """

    verdict: str
    seconds: float
    boxes: int
    open_boxes: int = 0
    leaves: int = 0
    counterexample: list | None = None
    engine_answers: list | None = None
    trees: list | None = field(default=None, repr=False)
    reason: str = ""


def engine_answers(weights, family, bits: int, rounding: str, T: np.ndarray) -> np.ndarray:
    """The engine's answers (B, q) of a causal file at ``bits`` bits on answer vectors ``T``
    (:func:`sketchsim.sketch.causal.causal_inputs`)."""
    from sketchsim.sketch.causal import causal_inputs

    return causal_inputs(weights, family, bits, T, rounding)[0]


class _Tree:
    """One query's tree: node ``n`` is pending (None), a leaf (-1) or ``(j, v, left, right)``."""

    def __init__(self):
        self.nodes: list = [None]

    def split(self, n: int, j: int, v: int) -> tuple[int, int]:
        a, b = len(self.nodes), len(self.nodes) + 1
        self.nodes += [None, None]
        self.nodes[n] = (j, v, a, b)
        return a, b

    def preorder(self) -> list[int]:
        out, stack = [], [0]
        while stack:
            node = self.nodes[stack.pop()]
            if node == -1:
                out.append(-1)
            else:
                j, v, a, b = node
                out += [j, v]
                stack += [b, a]
        return out


def prove(weights, family, bits: int, rounding: str = "every", budget: float = 60.0,
          progress=None, corners: bool = True) -> Outcome:  # fmt: skip
    """Decide whether a causal file answers every input of F(q, s) (or MQAR, over a superset:
    :mod:`sketchsim.prove.mqar`) right at ``bits`` bits.

    Parameters
    ----------
    weights : Weights
        A causal weights file on the hard family ``family``.
    family : HardFamily or MQARFamily
        Its family (F(q, s)'s layout ``perm``; MQAR's keys, pairs and query keys).
    bits : int
        Register bits ``K``.
    rounding : str
        ``every`` or ``cut`` (theory.md 5.3).
    budget : float
        Seconds; when spent the verdict is ``unknown`` with the boxes left open.
    progress : callable, optional
        Called with ``(queries done, q)``.
    corners : bool
        Try the extreme corners of each box's first levels as counterexamples (a
        heuristic: without it only boxes the enclosure finds wrong are tried).
    """
    start = time.perf_counter()
    q, s = family.q, family.s
    if family.name == "mqar":  # a superset family (sketchsim.prove.mqar)
        from sketchsim.prove.mqar import MQARBoxModel

        model = MQARBoxModel(weights, family, bits, rounding)
    else:
        model = BoxModel(weights, family.perm, bits, rounding)
    corner_depth = int(np.ceil(np.log2(s + 1))) + 2
    check = _Checker(weights, family, bits, rounding)
    trees, boxes, open_boxes = [], 0, 0
    for i in range(q):
        tree = _Tree()
        work = [(0, np.zeros(q, np.int64), np.full(q, s, np.int64), 0)]
        while work:
            if time.perf_counter() - start > budget:
                left = open_boxes + len(work) + _pending(q, i)
                seconds = time.perf_counter() - start
                return Outcome("unknown", seconds, boxes, left, reason="budget spent")
            batch, work = work[-_BATCH:], work[:-_BATCH]
            boxes += len(batch)
            lo = np.stack([b[1] for b in batch])
            hi = np.stack([b[2] for b in batch])
            cut = model.cut(lo, hi)
            a_lo, a_hi = model.answers(cut.states, i)
            a_lo, a_hi = a_lo[:, i], a_hi[:, i]
            fixed = lo[:, i] == hi[:, i]
            done = fixed & (a_lo == lo[:, i]) & (a_hi == lo[:, i])
            wrong = fixed & ((a_hi < lo[:, i]) | (a_lo > lo[:, i]))
            point = (lo == hi).all(axis=1)
            # counterexample candidates: boxes wrong everywhere, undecided single inputs,
            # and the extreme corners of the first boxes
            cands = [lo[wrong], lo[point & ~done]]
            first = [k for k, b in enumerate(batch) if b[3] <= corner_depth and not done[k]]
            first = first if corners else []
            if first:
                cands.append(model.corner_points(lo[first], hi[first]))
            bad = check.first_wrong(np.concatenate(cands))
            if bad is not None:
                T, ans = bad
                return Outcome("refuted", time.perf_counter() - start, boxes,
                               counterexample=T.tolist(), engine_answers=ans.tolist())  # fmt: skip
            for k in np.flatnonzero(done):
                tree.nodes[batch[k][0]] = -1
            undecided = np.flatnonzero(~done & ~point)
            stuck = np.flatnonzero(point & ~done)  # single inputs the enclosure cannot decide
            open_boxes += stuck.size
            for k in stuck:
                tree.nodes[batch[k][0]] = -1  # open: recorded, the proof is incomplete
            if undecided.size:
                js = _choose(model, lo[undecided], hi[undecided], i)
                for k, j in zip(undecided, js, strict=True):
                    n, blo, bhi, seen = batch[k]
                    v = (blo[j] + bhi[j]) // 2
                    left, right = tree.split(n, int(j), int(v))
                    lhi, rlo = bhi.copy(), blo.copy()
                    lhi[j], rlo[j] = v, v + 1
                    work.append((right, rlo, bhi, seen + 1))
                    work.append((left, blo, lhi, seen + 1))
        trees.append(tree.preorder())
        if progress is not None:
            progress(i + 1, q)
    seconds = time.perf_counter() - start
    if open_boxes:
        return Outcome("unknown", seconds, boxes, open_boxes,
                       reason="single inputs the enclosure cannot decide")  # fmt: skip
    leaves = sum(t.count(-1) for t in trees)
    return Outcome("proved", seconds, boxes, 0, leaves, trees=trees)


def _pending(q: int, i: int) -> int:
    """Queries not yet started count one open box each."""
    return q - i - 1


def _choose(model: BoxModel, lo, hi, i) -> np.ndarray:
    """The coordinate to split per box: ``i`` until it is fixed, then the coordinate whose
    halves' cut codes are narrowest where query ``i`` reads them (the worse half)."""
    B, q = lo.shape
    choice = np.full(B, -1, np.int64)
    need = lo[:, i] < hi[:, i]
    choice[need] = i
    rest = np.flatnonzero(~need)
    if rest.size == 0:
        return choice
    weight = _relevance(model, i)
    for chunk in np.array_split(rest, max(1, rest.size * q // 4096)):
        blo, bhi = lo[chunk], hi[chunk]
        n = chunk.size
        free = blo < bhi  # (n, q)
        mid = (blo + bhi) // 2
        # children: coordinate j's lower half (rows 0..q-1) and upper half (q..2q-1)
        clo = np.repeat(blo[:, None, :], 2 * q, axis=1)
        chi = np.repeat(bhi[:, None, :], 2 * q, axis=1)
        jj = np.arange(q)
        chi[:, jj, jj] = mid
        clo[:, q + jj, jj] = mid + 1
        clo[:, q + jj, jj] = np.minimum(clo[:, q + jj, jj], bhi)
        c = model.cut(clo.reshape(-1, q), chi.reshape(-1, q))
        width = ((c.code_hi - c.code_lo) * weight).sum(axis=1).reshape(n, 2 * q)
        score = np.maximum(width[:, :q], width[:, q:])
        score = np.where(free, score, np.inf)
        span = np.where(free, bhi - blo, -1)
        # the narrowest worse half; among equals, the widest coordinate
        choice[chunk] = _argbest(score, span)
    return choice


def _argbest(score, span):
    out = np.empty(score.shape[0], np.int64)
    for r in range(score.shape[0]):
        out[r] = np.lexsort((-span[r], score[r]))[0]
    return out


def _relevance(model: BoxModel, i: int) -> np.ndarray:
    """How far query ``i``'s output moves when one cut code sweeps its range (others mid)."""
    memo = model.__dict__.setdefault("_relevance", {})
    if i not in memo:
        n = model.L * model.H * model.E
        top = model.top
        clo = np.full((n + 1, n), top // 2, np.int64)
        chi = clo.copy()
        idx = np.arange(n)
        clo[idx, idx], chi[idx, idx] = 0, top
        states = model.states_of_codes(clo, chi)
        a_lo, a_hi = model.answers(states, i)
        memo.clear()  # one query at a time: the search finishes query i before i + 1
        memo[i] = (a_hi[:n, i] - a_lo[:n, i]).astype(float) + 1e-3
    return memo[i]


class _Checker:
    """Runs candidate inputs through the engine; returns the first one answered wrong."""

    def __init__(self, weights, family, bits, rounding):
        self.args = (weights, family, bits, rounding)
        self.seen: set = set()

    def first_wrong(self, T: np.ndarray):
        if T.size == 0:
            return None
        T = np.unique(T, axis=0)
        keep = [k for k in range(T.shape[0]) if T[k].tobytes() not in self.seen]
        if not keep:
            return None
        T = T[keep]
        self.seen.update(t.tobytes() for t in T)
        ans = engine_answers(*self.args, T)
        wrong = np.flatnonzero((ans != T).any(axis=1))
        if wrong.size == 0:
            return None
        k = wrong[0]
        return T[k], ans[k]
