"""The Triton kernels of the ``triton`` mixed-attention kernel (imported only when ``triton`` is used).

Notation (as in [`structattn.attention.kernels`][structattn.attention.kernels]): b batch, h heads, n queries, m keys, d
head size; a program handles one (batch, head) pair and one tile of BLOCK_M query rows or BLOCK_N key rows. With s =
scale q k^T, for each query row i:

    P_glb = softmax of s_i over the base keys;  P_loc = softmax over the local keys (local AND base, or the base
    keys when that is empty);  P = (1 - g_i) P_glb + g_i P_loc;  out_i = (keep * P / (1 - p)) v

Forward (`mixed_forward`, FlashAttention-2 style): one sweep over key tiles keeps a running maximum and sum
for the global distribution and another for the local one, and two accumulators (sum of exp * v); the exponential
exp(s - running global max) is computed once and shared: the local exponentials are that times one exponential per
row, exp(global max - local max), except in a tile where some row's local maximum lies more than GAP below its
global maximum (the shared exponential would underflow there), where the tile computes exp(s - local max)
itself. A key tile no query of the tile may attend is skipped; the local half of a tile with no local key is
skipped. Saved for the backward: the global log-normaliser of every row, lse [b, h, n] (-inf for a row
without any key), as SDPA and the CPU fused kernel save.

Backward: `backward_rows` (per query tile) sweeps the keys once to recompute the local log-normaliser and
the two row sums delta_glb = sum_j P_glb dP, delta_loc = sum_j P_loc dP (dP = dropped dO v^T), which give the gate
gradient delta_loc - delta_glb, then sweeps again for dq; `backward_keys` (per key tile) sweeps the query
tiles for dk and dv. Probabilities are recomputed from the saved statistics, never stored. dS = (1 - g) P_glb
(dP - delta_glb) + g P_loc (dP - delta_loc).

Dropout: keep_ij = hash(i, j) >= threshold with the counter-based hash of the CPU fused kernel
(``mixed_attention.cpp``: murmur3's fmix32 over (seed, row index, key index)), so the same seed draws the same
mask on either kernel and the backward regenerates it without storing it.

Accumulation is in float32 (float64 for float64 inputs); probabilities are cast to the value dtype before P v and
dS before dS k, dS^T q, as FlashAttention does. ``UPCAST`` (set under Triton's interpreter for bfloat16, whose
``tl.dot`` the interpreter does not compute correctly: it multiplies the raw bits) loads q, k, v, dO as float32
and rounds P and dS to bfloat16 and back before their products: the products of bfloat16 values, exactly, as a
tensor core computes them. (Called functions are few and small on purpose: the interpreter re-patches
``triton.language`` on every call of one, which dominates its run time.)
"""
from __future__ import annotations

import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))  # a constexpr: compiled kernels may read no other global
INTERPRETED = bool(triton.knobs.runtime.interpret)  # how the kernels below are defined (TRITON_INTERPRET=1)


@triton.jit
def _fmix32(x):
    """murmur3's 32-bit finaliser on a uint32 tensor (the CPU kernel's ``fmix32``)."""
    x ^= x >> 16
    x *= 0x85EBCA6B
    x ^= x >> 13
    x *= 0xC2B2AE35
    x ^= x >> 16
    return x


@triton.jit
def _keep(rows, offs_n, seed_key, thresh):
    """The dropout keep mask [BM, BN] of global rows ``rows`` (bh * n + i) and key columns ``offs_n``."""
    key = _fmix32(rows.to(tl.uint32) ^ seed_key.to(tl.uint32))
    return _fmix32(key[:, None] + offs_n.to(tl.uint32)[None, :] * 0x9E3779B1) >= thresh.to(tl.uint32)


@triton.jit
def _load_rows(ptr, offs, R, offs_d, D, s_r, s_d, UPCAST: tl.constexpr):
    """Rows ``offs`` [BR] (< R) of a [R, D] matrix with strides (s_r, s_d): [BR, BD], 0 outside; float32 when
    UPCAST. (Products cast their other operand with ``.to(x.dtype)`` of the loaded tile, a no-op unless UPCAST.)"""
    x = tl.load(ptr + offs[:, None] * s_r + offs_d[None, :] * s_d,
                mask=(offs[:, None] < R) & (offs_d[None, :] < D), other=0.0)
    if UPCAST:
        x = x.to(tl.float32)
    return x


@triton.jit
def _tile_masks(BASE, LOC, offs_m, offs_n, N, M, sbn, sbm, sln, slm, HAS_BASE: tl.constexpr):
    """(allowed, local) [BM, BN] bool: the keys each query may attend (base; every in-range key without one) and
    the local keys among them."""
    valid = (offs_m[:, None] < N) & (offs_n[None, :] < M)
    if HAS_BASE:
        allowed = valid & (tl.load(BASE + offs_m[:, None] * sbn + offs_n[None, :] * sbm, mask=valid, other=0) != 0)
    else:
        allowed = valid
    local = allowed & (tl.load(LOC + offs_m[:, None] * sln + offs_n[None, :] * slm, mask=valid, other=0) != 0)
    return allowed, local


@triton.jit
def _local_exp(s, p, shift, target, local, GAP: tl.constexpr):
    """exp(s - target) on the local keys (0 elsewhere) [BM, BN], from the shared exponential p = exp(s - shift).

    shift, target [BM]; a row whose target is -inf has no local key. Where some row's shift lies more than GAP
    above its target, p may have underflowed on that row's local keys: the tile then takes its own exponential.
    """
    has = target > NEG_INF
    gap = shift - tl.where(has, target, shift)
    if tl.max(gap) > GAP:
        e = tl.exp(tl.where(local, s - tl.where(has, target, 0.0)[:, None], NEG_INF))
    else:
        e = tl.where(local, p * tl.exp(gap)[:, None], 0.0)
    return e


@triton.jit
def _kv_scores(q, K, V, offs_n, M, offs_d, D, skn, skd, svn, svd, allowed, scale,
               UPCAST: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr):
    """The key tile k, v [BN, BD] at rows ``offs_n`` and the scores s = scale q k^T [BM, BN], -inf where not
    allowed."""
    k = _load_rows(K, offs_n, M, offs_d, D, skn, skd, UPCAST)
    v = _load_rows(V, offs_n, M, offs_d, D, svn, svd, UPCAST)
    s = tl.where(allowed, tl.dot(q, tl.trans(k), input_precision=PRECISION).to(ACC) * scale, NEG_INF)
    return k, v, s


@triton.jit
def _probs(s, local, lse_g, lse_l, GAP: tl.constexpr):
    """Recomputed (P_glb, P_loc) [BM, BN] of a tile with scores s from the row statistics lse_g (global
    log-normaliser) and lse_l (local one, +inf where the local part is unused)."""
    shift = tl.where(lse_g > NEG_INF, lse_g, 0.0)
    p_g = tl.exp(s - shift[:, None])
    p_l = tl.zeros_like(p_g)
    if tl.max(local.to(tl.int32)) > 0:
        p_l = _local_exp(s, p_g, shift, lse_l, local, GAP)
    return p_g, p_l


@triton.jit
def _dscores(p_g, p_l, dp, dlt_g, dlt_l, g):
    """dL/ds [BM, BN] (before the score scale): (1 - g) P_glb (dP - delta_glb) + g P_loc (dP - delta_loc)."""
    return ((1.0 - g)[:, None] * p_g * (dp - dlt_g[:, None])
            + g[:, None] * p_l * (dp - dlt_l[:, None]))


@triton.jit(do_not_specialize=["seed_key", "thresh"])
def mixed_forward(Q, K, V, BASE, LOC, G, O, LSE,
                  sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                  sbb, sbh, sbn, sbm, slb, slh, sln, slm, sgb, sgh, sgn, sob, soh, son, sod,
                  H, N, M, D, scale, seed_key, thresh, keep_scale,
                  HAS_BASE: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                  ACC: tl.constexpr, GAP: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (cdiv(n, BLOCK_M), b * h). Writes out [b, h, n, d] (any strides) and lse [b, h, n] (contiguous)."""
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_rows(Q + b * sqb + h * sqh, offs_m, N, offs_d, D, sqn, sqd, UPCAST)
    K, V = K + b * skb + h * skh, V + b * svb + h * svh
    BASE, LOC = BASE + b * sbb + h * sbh, LOC + b * slb + h * slh
    rows = bh * N + offs_m

    m_g = tl.full([BLOCK_M], NEG_INF, ACC)
    m_l = tl.full([BLOCK_M], NEG_INF, ACC)
    l_g = tl.zeros([BLOCK_M], ACC)
    l_l = tl.zeros([BLOCK_M], ACC)
    acc_g = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    acc_l = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    for start_n in range(0, M, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        allowed, local = _tile_masks(BASE, LOC, offs_m, offs_n, N, M, sbn, sbm, sln, slm, HAS_BASE)
        if tl.max(allowed.to(tl.int32)) > 0:
            k, v, s = _kv_scores(q, K, V, offs_n, M, offs_d, D, skn, skd, svn, svd, allowed, scale, UPCAST, PRECISION,
                                 ACC)
            m_new = tl.maximum(m_g, tl.max(s, 1))
            shift = tl.where(m_new > NEG_INF, m_new, 0.0)
            alpha = tl.exp(m_g - shift)
            p = tl.exp(s - shift[:, None])
            l_g = l_g * alpha + tl.sum(p, 1)
            if DROPOUT:
                keep = _keep(rows, offs_n, seed_key, thresh)
                p_v = tl.where(keep, p * keep_scale, 0.0)
            else:
                p_v = p
            pv = tl.dot(p_v.to(V.dtype.element_ty).to(v.dtype), v, input_precision=PRECISION)
            acc_g = acc_g * alpha[:, None] + pv.to(ACC)
            m_g = m_new
            if tl.max(local.to(tl.int32)) > 0:
                ml_new = tl.maximum(m_l, tl.max(tl.where(local, s, NEG_INF), 1))
                alpha_l = tl.exp(m_l - tl.where(ml_new > NEG_INF, ml_new, 0.0))
                e = _local_exp(s, p, shift, ml_new, local, GAP)
                l_l = l_l * alpha_l + tl.sum(e, 1)
                if DROPOUT:
                    e = tl.where(keep, e * keep_scale, 0.0)
                pv = tl.dot(e.to(V.dtype.element_ty).to(v.dtype), v, input_precision=PRECISION)
                acc_l = acc_l * alpha_l[:, None] + pv.to(ACC)
                m_l = ml_new

    has_g = m_g > NEG_INF
    has_l = m_l > NEG_INF
    l_g = tl.where(has_g, l_g, 1.0)
    l_l = tl.where(has_l, l_l, 1.0)
    o_g = acc_g / l_g[:, None]
    o_l = tl.where(has_l[:, None], acc_l / l_l[:, None], o_g)   # no local key: the base row
    g = tl.load(G + b * sgb + h * sgh + offs_m * sgn, mask=offs_m < N, other=0.0).to(ACC)
    out = o_g + g[:, None] * (o_l - o_g)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod, out.to(O.dtype.element_ty),
             mask=(offs_m[:, None] < N) & (offs_d[None, :] < D))
    tl.store(LSE + rows, tl.where(has_g, m_g + tl.log(l_g), NEG_INF), mask=offs_m < N)


@triton.jit(do_not_specialize=["seed_key", "thresh"])
def backward_rows(Q, K, V, BASE, LOC, G, DO, LSE, LSE_L, DLT_G, DLT_L, GEFF, DG, DQ,
                  sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                  sbb, sbh, sbn, sbm, slb, slh, sln, slm, sgb, sgh, sgn, sdb, sdh, sdn, sdd, sxb, sxh, sxn, sxd,
                  H, N, M, D, scale, seed_key, thresh, keep_scale,
                  HAS_BASE: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                  ACC: tl.constexpr, GAP: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (cdiv(n, BLOCK_M), b * h). Writes the row statistics lse_loc (+inf where the local part is unused),
    delta_glb, delta_loc, the effective gate (0 where the local part is the base row) and the gate gradient per
    head, all [b, h, n] contiguous, then dq (strides sx*; dO has strides sd*)."""
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < N
    q = _load_rows(Q + b * sqb + h * sqh, offs_m, N, offs_d, D, sqn, sqd, UPCAST)
    do = _load_rows(DO + b * sdb + h * sdh, offs_m, N, offs_d, D, sdn, sdd, UPCAST)
    K, V = K + b * skb + h * skh, V + b * svb + h * svh
    BASE, LOC = BASE + b * sbb + h * sbh, LOC + b * slb + h * slh
    rows = bh * N + offs_m
    lse_g = tl.load(LSE + rows, mask=row_ok, other=NEG_INF).to(ACC)
    shift = tl.where(lse_g > NEG_INF, lse_g, 0.0)

    # sweep 1: delta_glb directly (lse_g known); the local normaliser and delta_loc online, as a forward does
    dlt_g = tl.zeros([BLOCK_M], ACC)
    m_l = tl.full([BLOCK_M], NEG_INF, ACC)
    l_l = tl.zeros([BLOCK_M], ACC)
    t_l = tl.zeros([BLOCK_M], ACC)
    for start_n in range(0, M, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        allowed, local = _tile_masks(BASE, LOC, offs_m, offs_n, N, M, sbn, sbm, sln, slm, HAS_BASE)
        if tl.max(allowed.to(tl.int32)) > 0:
            k, v, s = _kv_scores(q, K, V, offs_n, M, offs_d, D, skn, skd, svn, svd, allowed, scale, UPCAST, PRECISION,
                                 ACC)
            p = tl.exp(s - shift[:, None])
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION).to(ACC)
            if DROPOUT:
                dp = tl.where(_keep(rows, offs_n, seed_key, thresh), dp * keep_scale, 0.0)
            dlt_g += tl.sum(p * dp, 1)
            if tl.max(local.to(tl.int32)) > 0:
                ml_new = tl.maximum(m_l, tl.max(tl.where(local, s, NEG_INF), 1))
                alpha_l = tl.exp(m_l - tl.where(ml_new > NEG_INF, ml_new, 0.0))
                e = _local_exp(s, p, shift, ml_new, local, GAP)
                l_l = l_l * alpha_l + tl.sum(e, 1)
                t_l = t_l * alpha_l + tl.sum(e * dp, 1)
                m_l = ml_new
    has_l = m_l > NEG_INF
    l_l = tl.where(has_l, l_l, 1.0)
    lse_l = tl.where(has_l, m_l + tl.log(l_l), float("inf"))
    dlt_l = tl.where(has_l, t_l / l_l, dlt_g)
    g = tl.load(G + b * sgb + h * sgh + offs_m * sgn, mask=row_ok, other=0.0).to(ACC)
    g = tl.where(has_l, g, 0.0)
    tl.store(LSE_L + rows, lse_l, mask=row_ok)
    tl.store(DLT_G + rows, dlt_g, mask=row_ok)
    tl.store(DLT_L + rows, dlt_l, mask=row_ok)
    tl.store(GEFF + rows, g, mask=row_ok)
    tl.store(DG + rows, dlt_l - dlt_g, mask=row_ok)

    # sweep 2: dq = scale * dS k
    dq = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    for start_n in range(0, M, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        allowed, local = _tile_masks(BASE, LOC, offs_m, offs_n, N, M, sbn, sbm, sln, slm, HAS_BASE)
        if tl.max(allowed.to(tl.int32)) > 0:
            k, v, s = _kv_scores(q, K, V, offs_n, M, offs_d, D, skn, skd, svn, svd, allowed, scale, UPCAST, PRECISION,
                                 ACC)
            p_g, p_l = _probs(s, local, lse_g, lse_l, GAP)
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION).to(ACC)
            if DROPOUT:
                dp = tl.where(_keep(rows, offs_n, seed_key, thresh), dp * keep_scale, 0.0)
            ds = _dscores(p_g, p_l, dp, dlt_g, dlt_l, g)
            dq += tl.dot(ds.to(K.dtype.element_ty).to(k.dtype), k, input_precision=PRECISION).to(ACC)
    tl.store(DQ + b * sxb + h * sxh + offs_m[:, None] * sxn + offs_d[None, :] * sxd,
             (dq * scale).to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < D))


@triton.jit(do_not_specialize=["seed_key", "thresh"])
def backward_keys(Q, K, V, BASE, LOC, DO, LSE, LSE_L, DLT_G, DLT_L, GEFF, DK, DV,
                  sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                  sbb, sbh, sbn, sbm, slb, slh, sln, slm, sdb, sdh, sdn, sdd,
                  sxb, sxh, sxn, sxd, syb, syh, syn, syd,
                  H, N, M, D, scale, seed_key, thresh, keep_scale,
                  HAS_BASE: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                  ACC: tl.constexpr, GAP: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (cdiv(m, BLOCK_N), b * h). Writes dk (strides sx*) and dv (strides sy*) from the row statistics that
    `backward_rows` wrote."""
    pid_n, bh = tl.program_id(0), tl.program_id(1)
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    k = _load_rows(K + b * skb + h * skh, offs_n, M, offs_d, D, skn, skd, UPCAST)
    v = _load_rows(V + b * svb + h * svh, offs_n, M, offs_d, D, svn, svd, UPCAST)
    Q, DO = Q + b * sqb + h * sqh, DO + b * sdb + h * sdh
    BASE, LOC = BASE + b * sbb + h * sbh, LOC + b * slb + h * slh
    dk = tl.zeros([BLOCK_N, BLOCK_D], ACC)
    dv = tl.zeros([BLOCK_N, BLOCK_D], ACC)
    for start_m in range(0, N, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        allowed, local = _tile_masks(BASE, LOC, offs_m, offs_n, N, M, sbn, sbm, sln, slm, HAS_BASE)
        if tl.max(allowed.to(tl.int32)) > 0:
            row_ok = offs_m < N
            rows = bh * N + offs_m
            q = _load_rows(Q, offs_m, N, offs_d, D, sqn, sqd, UPCAST)
            do = _load_rows(DO, offs_m, N, offs_d, D, sdn, sdd, UPCAST)
            lse_g = tl.load(LSE + rows, mask=row_ok, other=NEG_INF).to(ACC)
            lse_l = tl.load(LSE_L + rows, mask=row_ok, other=float("inf"))
            dlt_g = tl.load(DLT_G + rows, mask=row_ok, other=0.0)
            dlt_l = tl.load(DLT_L + rows, mask=row_ok, other=0.0)
            g = tl.load(GEFF + rows, mask=row_ok, other=0.0)
            s = tl.where(allowed, tl.dot(q, tl.trans(k), input_precision=PRECISION).to(ACC) * scale, NEG_INF)
            p_g, p_l = _probs(s, local, lse_g, lse_l, GAP)
            p = (1.0 - g)[:, None] * p_g + g[:, None] * p_l
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION).to(ACC)
            if DROPOUT:
                keep = _keep(rows, offs_n, seed_key, thresh)
                p = tl.where(keep, p * keep_scale, 0.0)
                dp = tl.where(keep, dp * keep_scale, 0.0)
            dv += tl.dot(tl.trans(p.to(DO.dtype.element_ty).to(do.dtype)), do, input_precision=PRECISION).to(ACC)
            ds = _dscores(p_g, p_l, dp, dlt_g, dlt_l, g)
            dk += tl.dot(tl.trans(ds.to(Q.dtype.element_ty).to(q.dtype)), q, input_precision=PRECISION).to(ACC)
    mask = (offs_n[:, None] < M) & (offs_d[None, :] < D)
    tl.store(DK + b * sxb + h * sxh + offs_n[:, None] * sxn + offs_d[None, :] * sxd,
             (dk * scale).to(DK.dtype.element_ty), mask=mask)
    tl.store(DV + b * syb + h * syh + offs_n[:, None] * syn + offs_d[None, :] * syd,
             dv.to(DV.dtype.element_ty), mask=mask)
