"""Eight-lane helpers for the Min-IP kernel: one 512-bit vector holds a word of 8 sequences.

A block of ``LANES`` sequences is stored lane-major in a flat uint64 scratch
``P``: word ``w`` of token ``i`` of the block's sequence ``lane`` is
``P[(i * nw + w) * LANES + lane]``.  Counting ``<x_i, x_j>`` for all 8 sequences
at once is then a loop of whole-vector ``AND``, ``ctpop`` and ``add`` over the
``nw`` words (``vpopcntq`` on zmm registers with AVX-512 VPOPCNTDQ), with no
horizontal sum.  numba has no vector type, so the two helpers below emit LLVM IR
directly (``@intrinsic``); under ``NUMBA_DISABLE_JIT=1`` plain Python versions
with the same arguments take their place.

numba keys its on-disk cache on the file of the cached function only: after an
edit here, touch ``sketchsim/minip/kernel.py`` (or clear its ``__pycache__``) so that
its kernels are compiled again.
"""

from __future__ import annotations

import numpy as np
from numba import config as numba_config

__all__ = ["LANES", "prefetch_words", "transpose8", "transpose_lanes", "lane_row_minima"]

#: Sequences per block: eight 64-bit words fill one 512-bit register.
LANES = 8
#: Keys counted against a row per pass over its words (row words are loaded once
#: per pass, so a pass does 1 + 1/_KEYS_PER_PASS loads per vector AND).
_KEYS_PER_PASS = 4
_UNSET = 1 << 62

if numba_config.DISABLE_JIT:  # pragma: no cover - exercised by the no-JIT test

    def prefetch_words(W, base, count):
        """Hint that ``W.flat[base : base + count]`` will be read soon (Python: nothing)."""

    def transpose8(src, src_base, src_stride, dst, dst_base, dst_stride, tiles):
        """8 x 8 tiles of ``src`` transposed into ``dst`` (flat indices; Python)."""
        flat_src, flat_dst = src.reshape(-1), dst.reshape(-1)
        for t in range(tiles):
            for c in range(LANES):
                for r in range(LANES):
                    at = dst_base + (LANES * t + c) * dst_stride + r
                    flat_dst[at] = flat_src[src_base + r * src_stride + LANES * t + c]

    def transpose_lanes(W, P, base, K):
        """``P[k * 8 + r] = W.flat[base + r * K + k]`` for ``k < 8 * (K // 8)`` (Python)."""
        flat = W.reshape(-1)
        k8 = K - K % LANES
        rows = flat[base : base + LANES * K].reshape(LANES, K)
        P[: k8 * LANES] = rows[:, :k8].T.reshape(-1)

    def lane_row_minima(P, mins, i, n, nw):
        """Lower the lane minima of token ``i`` and every ``j > i`` by ``<x_i, x_j>`` (Python)."""
        row = P[i * nw * LANES : (i + 1) * nw * LANES].reshape(nw, LANES)
        for j in range(i + 1, n):
            key = P[j * nw * LANES : (j + 1) * nw * LANES].reshape(nw, LANES)
            c = np.bitwise_count(row & key).sum(axis=0, dtype=np.int64)
            mins[i * LANES : (i + 1) * LANES] = np.minimum(mins[i * LANES : (i + 1) * LANES], c)
            mins[j * LANES : (j + 1) * LANES] = np.minimum(mins[j * LANES : (j + 1) * LANES], c)

else:
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    _I64 = ir.IntType(64)
    _VEC = ir.VectorType(_I64, LANES)

    def _flat_array(ty, dtype) -> bool:
        return isinstance(ty, types.Array) and ty.dtype == dtype and ty.layout == "C"

    def _data(context, builder, ty, value):
        return context.make_array(ty)(context, builder, value=value).data

    def _vector_at(builder, data, index):
        """Pointer to the 8 elements ``data[index : index + 8]`` as one vector."""
        return builder.bitcast(builder.gep(data, [index]), _VEC.as_pointer())

    def _const(value, like):
        return ir.Constant(like.type, value)

    @intrinsic
    def prefetch_words(typingctx, W, base, count):
        """Prefetch ``W.flat[base : base + count]`` (uint64 words) into the caches.

        One ``llvm.prefetch`` per 64-byte line; the next block's words are fetched
        while the current block is counted.  No bounds check: the range must lie
        inside ``W``.
        """
        if not (_flat_array(W, types.uint64) and isinstance(base, types.Integer)):
            return None
        if not isinstance(count, types.Integer):
            return None
        sig = types.none(W, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            w_arr, base_, count_ = args
            wdata = _data(context, builder, signature.args[0], w_arr)
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            prefetch = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0i8",
            )
            lines = builder.sdiv(count_, _const(LANES, count_))
            with cgutils.for_range(builder, lines) as line:
                at = builder.add(base_, builder.mul(line.index, _const(LANES, count_)))
                ptr = builder.bitcast(builder.gep(wdata, [at]), i8p)
                # read, keep in all cache levels, data cache
                builder.call(
                    prefetch, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
                )
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def transpose8(typingctx, src, src_base, src_stride, dst, dst_base, dst_stride, tiles):
        """Transpose ``tiles`` 8 x 8 tiles of 64-bit words (flat indices, no bounds check).

        Tile ``t`` is the rows ``src[src_base + r * src_stride + 8 t : + 8]``,
        ``r < 8``; its column ``c`` is stored at
        ``dst[dst_base + (8 t + c) * dst_stride : + 8]``.  Three rounds of
        shuffles per tile.  ``src`` and ``dst`` are C-contiguous arrays of the
        same 64-bit integer type.
        """
        if not (isinstance(src, types.Array) and isinstance(dst, types.Array)):
            return None
        if src.dtype != dst.dtype or src.dtype not in (types.uint64, types.int64):
            return None
        if src.layout != "C" or dst.layout != "C":
            return None
        scalars = (src_base, src_stride, dst_base, dst_stride, tiles)
        if not all(isinstance(a, types.Integer) for a in scalars):
            return None
        sig = types.none(src, types.intp, types.intp, dst, types.intp, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            src_arr, src_base_, src_stride_, dst_arr, dst_base_, dst_stride_, tiles_ = args
            sdata = _data(context, builder, signature.args[0], src_arr)
            ddata = _data(context, builder, signature.args[3], dst_arr)
            eight = _const(LANES, tiles_)
            mask_type = ir.VectorType(ir.IntType(32), LANES)

            def shuffle(a, b, picks):
                return builder.shuffle_vector(a, b, ir.Constant(mask_type, picks))

            with cgutils.for_range(builder, tiles_) as tile:
                k0 = builder.mul(tile.index, eight)
                rows = []
                for r in range(LANES):
                    row_at = builder.add(src_base_, builder.mul(_const(r, tiles_), src_stride_))
                    at = builder.add(row_at, k0)
                    rows.append(builder.load(_vector_at(builder, sdata, at), align=8))
                # round 1: even / odd columns of row pairs (2r, 2r + 1)
                pairs = []
                for r in range(0, LANES, 2):
                    pairs.append(shuffle(rows[r], rows[r + 1], [0, 8, 2, 10, 4, 12, 6, 14]))
                    pairs.append(shuffle(rows[r], rows[r + 1], [1, 9, 3, 11, 5, 13, 7, 15]))
                # round 2: columns {c, c + 4} of four rows; quads[(h, c)] for rows 4h .. 4h + 3
                quads = {}
                for h in (0, 1):
                    even_a, odd_a, even_b, odd_b = pairs[4 * h : 4 * h + 4]
                    quads[(h, 0)] = shuffle(even_a, even_b, [0, 1, 8, 9, 4, 5, 12, 13])
                    quads[(h, 2)] = shuffle(even_a, even_b, [2, 3, 10, 11, 6, 7, 14, 15])
                    quads[(h, 1)] = shuffle(odd_a, odd_b, [0, 1, 8, 9, 4, 5, 12, 13])
                    quads[(h, 3)] = shuffle(odd_a, odd_b, [2, 3, 10, 11, 6, 7, 14, 15])
                # round 3: column c and c + 4 of all eight rows
                for c in range(4):
                    top, bottom = quads[(0, c)], quads[(1, c)]
                    for col, picks in (
                        (c, [0, 1, 2, 3, 8, 9, 10, 11]),
                        (c + 4, [4, 5, 6, 7, 12, 13, 14, 15]),
                    ):
                        column = builder.add(k0, _const(col, tiles_))
                        at = builder.add(dst_base_, builder.mul(column, dst_stride_))
                        vector = shuffle(top, bottom, picks)
                        builder.store(vector, _vector_at(builder, ddata, at), align=8)
            return context.get_dummy_value()

        return sig, codegen

    @njit(inline="always")
    def transpose_lanes(W, P, base, K):
        """``P[k * 8 + r] = W.flat[base + r * K + k]`` for ``k < 8 * (K // 8)``.

        Eight rows of ``K`` words (a block's sequences, each ``N * nw`` words)
        become ``K`` lane vectors, eight columns at a time (:func:`transpose8`).
        The ``K % 8`` last columns are left to the caller.
        """
        transpose8(W, base, K, P, 0, LANES, K // LANES)

    @intrinsic
    def lane_row_minima(typingctx, P, mins, i, n, nw):
        """Lower the lane minima of token ``i`` and of every ``j > i`` by ``<x_i, x_j>``.

        ``P`` is a block's lane-major scratch (flat uint64), ``mins`` the running
        minima ``mins[t * 8 + lane]`` (flat int64).  Keys are taken
        ``_KEYS_PER_PASS`` at a time, so each pass loads the row's words once;
        the row's own minimum stays in a register until the end.
        """
        if not (_flat_array(P, types.uint64) and P.ndim == 1):
            return None
        if not (_flat_array(mins, types.int64) and mins.ndim == 1):
            return None
        if not all(isinstance(a, types.Integer) for a in (i, n, nw)):
            return None
        sig = types.none(P, mins, types.intp, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            p_arr, m_arr, i_, n_, nw_ = args
            pdata = _data(context, builder, signature.args[0], p_arr)
            mdata = _data(context, builder, signature.args[1], m_arr)
            ctpop = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(_VEC, [_VEC]), "llvm.ctpop.v8i64"
            )
            eight = _const(LANES, i_)
            token_words = builder.mul(nw_, eight)
            row_at = builder.mul(i_, token_words)
            row_min = cgutils.alloca_once_value(builder, ir.Constant(_VEC, [_UNSET] * LANES))
            sums = [
                cgutils.alloca_once_value(builder, ir.Constant(_VEC, [0] * LANES))
                for _ in range(_KEYS_PER_PASS)
            ]

            def smaller(a, b):
                return builder.select(builder.icmp_signed("<", a, b), a, b)

            def lower(j, count):
                builder.store(smaller(builder.load(row_min), count), row_min)
                ptr = _vector_at(builder, mdata, builder.mul(j, eight))
                builder.store(smaller(count, builder.load(ptr, align=8)), ptr, align=8)

            def count_keys(first, n_keys):
                """sums[k] = lane counts of <x_i, x_{first + k}>, k < n_keys."""
                keys_at = [
                    builder.mul(builder.add(first, _const(k, i_)), token_words)
                    for k in range(n_keys)
                ]
                for k in range(n_keys):
                    builder.store(ir.Constant(_VEC, [0] * LANES), sums[k])
                with cgutils.for_range(builder, nw_) as word:
                    offset = builder.mul(word.index, eight)
                    row = builder.load(
                        _vector_at(builder, pdata, builder.add(row_at, offset)), align=8
                    )
                    for k in range(n_keys):
                        key_ptr = _vector_at(builder, pdata, builder.add(keys_at[k], offset))
                        ones = builder.call(
                            ctpop, [builder.and_(row, builder.load(key_ptr, align=8))]
                        )
                        builder.store(builder.add(builder.load(sums[k]), ones), sums[k])
                for k in range(n_keys):
                    lower(builder.add(first, _const(k, i_)), builder.load(sums[k]))

            first = builder.add(i_, _const(1, i_))
            n_passes = builder.sdiv(builder.sub(n_, first), _const(_KEYS_PER_PASS, i_))
            with cgutils.for_range(builder, n_passes) as step:
                count_keys(
                    builder.add(first, builder.mul(step.index, _const(_KEYS_PER_PASS, i_))),
                    _KEYS_PER_PASS,
                )
            # the last (n - i - 1) % _KEYS_PER_PASS keys: one pass each of 4, 2, 1 keys as needed
            rest = builder.add(first, builder.mul(n_passes, _const(_KEYS_PER_PASS, i_)))
            left = builder.sub(n_, rest)
            rest_slot = cgutils.alloca_once_value(builder, rest)
            size = _KEYS_PER_PASS // 2
            while size >= 1:
                wanted = builder.icmp_signed(
                    "!=", builder.and_(left, _const(size, i_)), _const(0, i_)
                )
                with builder.if_then(wanted):
                    at = builder.load(rest_slot)
                    count_keys(at, size)
                    builder.store(builder.add(at, _const(size, i_)), rest_slot)
                size //= 2
            ptr = _vector_at(builder, mdata, builder.mul(i_, eight))
            builder.store(smaller(builder.load(row_min), builder.load(ptr, align=8)), ptr, align=8)
            return context.get_dummy_value()

        return sig, codegen
