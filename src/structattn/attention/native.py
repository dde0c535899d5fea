"""A fused CPU kernel for gated local/global attention, built on first use with the system C++ compiler.

Notation: b batch, h heads, n queries, m keys, d head size; G gate heads (1 = one gate per token shared by
all heads, h = one gate per head).

The kernel computes, for every query row i of every (batch, head) pair, with s = scale * q k^T,

    e_j  = exp(s_ij - max_j s_ij)            over the keys the base (padding) mask allows
    P_ij = (1 - g_i) * e_j / sum(e) + g_i * L_ij e_j / sum(L e)          (L = local mask, one exponential)
    O_i  = sum_j P_ij v_j

in one pass per row block (one GEMM for q k^T, one row sweep, one GEMM for P v), with the same recompute
scheme as flash attention for the backward pass: only per-row statistics are saved, never an n x m matrix.

Guards: a row whose local maximum lies more than ``kGap`` (60) below the global maximum (where the shared
exponential would underflow) recomputes its local part from the local maximum; a row with no allowed
key gives 0 and zero gradients (as SDPA does); a row whose local pattern is empty falls back to the base
row. Attention dropout uses a counter-based hash of (seed, element index), so backward regenerates the
same mask without storing it.

The kernel is a template over the scalar type: float32 (the fast path: a polynomial exp, ``sgemm_``) and
float64 (``std::exp``, ``dgemm_``; it lets ``torch.autograd.gradcheck`` run through this very code). bf16/fp16
inputs are upcast to float32 by the caller. Matrix products go through the BLAS routines PyTorch's CPU library
exports. If no compiler, no ``ninja`` or no exported BLAS is available, :func:`load` returns None and callers
use the two-SDPA kernel instead; a build another process holds for longer than the lock time-out does the same.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import shutil
import threading
import time
import warnings

import torch

from ..errors import UserError

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
                       const float*, const int*, const float*, const int*, const float*, float*, const int*);
extern "C" void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*,
                       const double*, const int*, const double*, const int*, const double*, double*, const int*);

namespace {

constexpr int64_t kRowBlock = 256;  // query rows per block: buffers hold kRowBlock x m scalars

// The BLAS routine of each scalar type (torch's CPU library exports both).
inline void blas_gemm(const char* ta, const char* tb, const int* M, const int* N, const int* K, const float* alpha,
                      const float* A, const int* lda, const float* B, const int* ldb, const float* beta, float* C,
                      const int* ldc) {
  sgemm_(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void blas_gemm(const char* ta, const char* tb, const int* M, const int* N, const int* K, const double* alpha,
                      const double* A, const int* lda, const double* B, const int* ldb, const double* beta, double* C,
                      const int* ldc) {
  dgemm_(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C through the column-major BLAS.
template <typename T>
inline void gemm_rm(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda,
                    const T* B, int ldb, T beta, T* C, int ldc) {
  const char ca = ta ? 'T' : 'N';
  const char cb = tb ? 'T' : 'N';
  blas_gemm(&cb, &ca, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

// exp(x) for x <= 0, with x clamped into [lowest, 0] (masked entries may lie above the row max, and nothing
// below the clamp becomes a denormal). Callers multiply masked entries by 0.
template <typename T> inline T exp_neg(T x);

// float: branch-free, vectorisable polynomial on [-87, 0].
template <> inline float exp_neg<float>(float x) {
  x = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
  const float r = std::nearbyint(x * 1.44269504088896341f);
  float f = x - r * 0.693145751953125f;
  f = f - r * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * f + 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f * f + f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(r) + 127) << 23;
  float two_r;
  std::memcpy(&two_r, &bits, sizeof(float));
  return p * two_r;
}

// double (used by gradient checks): the library exp on [-708, 0].
template <> inline double exp_neg<double>(double x) {
  x = x < -708.0 ? -708.0 : (x > 0.0 ? 0.0 : x);
  return std::exp(x);
}

// Local max this far below the global max: recompute the local exponentials from the local max.
template <typename T> constexpr T kGap = T(60);
template <typename T> constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Dropout: element (row, j) is kept iff hash(row key, j) >= threshold; the row key mixes seed and row index.
inline uint32_t fmix32(uint32_t x) {
  x ^= x >> 16; x *= 0x85EBCA6Bu;
  x ^= x >> 13; x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}
inline uint32_t row_key(uint64_t row, uint64_t seed) {
  return fmix32(static_cast<uint32_t>(row) ^ fmix32(static_cast<uint32_t>(row >> 32) + 0x9E3779B9u * static_cast<uint32_t>(seed))
                ^ static_cast<uint32_t>(seed >> 32));
}
inline uint32_t elem_hash(uint32_t key, uint32_t j) { return fmix32(key + j * 0x9E3779B1u); }

inline uint32_t drop_threshold(double dropout_p) {
  return dropout_p > 0.0 ? static_cast<uint32_t>(std::min(4294967295.0, dropout_p * 4294967296.0)) : 0u;
}

template <typename T>
struct View4 {            // a [B, H, R, C] tensor of T, unit stride in C; size-1 B/H/R dims broadcast
  const T* p; int64_t sb, sh, sr;
  const T* at(int64_t b, int64_t h) const { return p + b * sb + h * sh; }
};
struct Mask4 {            // a [B|1, H|1, N|1, M] bool tensor with unit stride in M, or absent (all True)
  const uint8_t* p; int64_t sb, sh, sr;
  const uint8_t* row(int64_t b, int64_t h, int64_t i) const { return p ? p + b * sb + h * sh + i * sr : nullptr; }
};

template <typename T>
View4<T> view_of(const at::Tensor& t) {
  return View4<T>{t.data_ptr<T>(), t.size(0) == 1 ? 0 : t.stride(0), t.size(1) == 1 ? 0 : t.stride(1),
                  t.size(2) == 1 ? std::max<int64_t>(t.size(3), 1) : t.stride(2)};  // a valid BLAS lda
}
Mask4 mask_of(const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return Mask4{nullptr, 0, 0, 0};
  const at::Tensor& m = *t;
  TORCH_CHECK(m.scalar_type() == at::kBool && m.stride(3) == 1, "masks must be bool with unit stride in m");
  return Mask4{reinterpret_cast<const uint8_t*>(m.data_ptr<bool>()), m.size(0) == 1 ? 0 : m.stride(0),
               m.size(1) == 1 ? 0 : m.stride(1), m.size(2) == 1 ? 0 : m.stride(2)};
}

// Copies of one row's masks as 1/0: fb = base, fl = local AND base, or fb when that is empty.
// Returns whether the base row allows any key.
template <typename T>
inline bool mask_rows(const uint8_t* bm, const uint8_t* lm, T* fb, T* fl, int64_t m) {
  T nb = T(0), nl = T(0);
  if (bm) {
    #pragma omp simd reduction(+:nb, nl)
    for (int64_t j = 0; j < m; ++j) {
      const T b = static_cast<T>(bm[j] != 0);
      const T l = b * static_cast<T>(lm[j] != 0);
      fb[j] = b; fl[j] = l; nb += b; nl += l;
    }
  } else {
    #pragma omp simd reduction(+:nl)
    for (int64_t j = 0; j < m; ++j) {
      const T l = static_cast<T>(lm[j] != 0);
      fb[j] = T(1); fl[j] = l; nl += l;
    }
    nb = static_cast<T>(m);
  }
  if (nl == T(0)) std::copy(fb, fb + m, fl);
  return nb > T(0);
}

template <typename T>
inline void row_maxes(const T* s, const T* fb, const T* fl, int64_t m, T& mg, T& ml) {
  T a = kNegInf<T>, b = kNegInf<T>;
  #pragma omp simd reduction(max:a, b)
  for (int64_t j = 0; j < m; ++j) {
    const T xg = fb[j] > T(0.5) ? s[j] : kNegInf<T>;
    const T xl = fl[j] > T(0.5) ? s[j] : kNegInf<T>;
    a = std::max(a, xg);
    b = std::max(b, xl);
  }
  mg = a; ml = b;
}

// Fills out [B,N,H,D] and stats [B,H,N,4] (global max, global sum relative to it, local max, local sum
// relative to the local max) for every row.
template <typename T>
void forward_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& base,
                  const at::Tensor& local, const at::Tensor& gate, double scale, double dropout_p, int64_t seed,
                  at::Tensor& out, at::Tensor& stats) {
  const int64_t H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  const int64_t B = q.size(0);
  const View4<T> Q = view_of<T>(q), K = view_of<T>(k), V = view_of<T>(v), G = view_of<T>(gate.unsqueeze(-1));
  const Mask4 BM = mask_of(base), LM = mask_of(local);
  T* O = out.data_ptr<T>();
  T* ST = stats.data_ptr<T>();
  const T sc = static_cast<T>(scale);
  const T keep_scale = dropout_p > 0.0 ? static_cast<T>(1.0 / (1.0 - dropout_p)) : T(1);
  const uint32_t thresh = drop_threshold(dropout_p);
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int ld_o = static_cast<int>(H * D);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    const uint32_t th = thresh;      // local copies: captured references would block vectorisation
    const T ks = keep_scale;
    const int64_t BQ = std::min(N, kRowBlock);
    std::vector<T> sbuf(BQ * M), ebuf(M), fbuf(M), lbuf(M);
    T* fb = fbuf.data();
    T* fl = lbuf.data();
    T* el = ebuf.data();
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const T* g0 = G.at(b, h);
      T* S = sbuf.data();
      for (int64_t i0 = 0; i0 < N; i0 += BQ) {
      const int64_t nb = std::min(BQ, N - i0);
      gemm_rm<T>(false, true, nb, M, D, sc, Q.at(b, h) + i0 * Q.sr, Q.sr, K.at(b, h), K.sr, T(0), S, M);
      for (int64_t i = i0; i < i0 + nb; ++i) {
        T* s = S + (i - i0) * M;
        T* sti = ST + (bh * N + i) * 4;
        if (!mask_rows<T>(BM.row(b, h, i), LM.row(b, h, i), fb, fl, M)) {
          std::fill(s, s + M, T(0));
          sti[0] = kNegInf<T>; sti[1] = T(1); sti[2] = kNegInf<T>; sti[3] = T(1);
          continue;
        }
        T mg, ml;
        row_maxes<T>(s, fb, fl, M, mg, ml);
        const bool slow = (mg - ml) > kGap<T>;
        T zg = T(0), zl = T(0);
        if (!slow) {
          #pragma omp simd reduction(+:zg, zl)
          for (int64_t j = 0; j < M; ++j) {
            const T e = exp_neg<T>(s[j] - mg) * fb[j];
            s[j] = e; zg += e; zl += e * fl[j];
          }
        } else {
          #pragma omp simd reduction(+:zg, zl)
          for (int64_t j = 0; j < M; ++j) {
            const T e = exp_neg<T>(s[j] - mg) * fb[j];
            const T e2 = exp_neg<T>(s[j] - ml) * fl[j];
            s[j] = e; el[j] = e2; zg += e; zl += e2;
          }
        }
        const T g = g0[i * G.sr];
        const T a = (T(1) - g) / zg;
        const T c = g / zl;   // zl relative to mg (fast) or to ml (slow)
        sti[0] = mg; sti[1] = zg; sti[2] = ml;
        sti[3] = slow ? zl : zl * std::exp(mg - ml);   // stored relative to ml
        if (!slow) {
          #pragma omp simd
          for (int64_t j = 0; j < M; ++j) s[j] = s[j] * (a + c * fl[j]);
        } else {
          #pragma omp simd
          for (int64_t j = 0; j < M; ++j) s[j] = s[j] * a + el[j] * c;
        }
        if (th) {
          const uint32_t key = row_key(static_cast<uint64_t>(bh * N + i), useed);
          const int m32 = static_cast<int>(M);
          #pragma omp simd
          for (int j = 0; j < m32; ++j)
            s[j] = elem_hash(key, static_cast<uint32_t>(j)) >= th ? s[j] * ks : T(0);
        }
      }
      gemm_rm<T>(false, false, nb, D, M, T(1), S, M, V.at(b, h), V.sr, T(0), O + (b * N + i0) * H * D + h * D, ld_o);
      }  // row blocks
    }
  });
}

// Fills dq [B,N,H,D], dk, dv [B,M,H,D] and dg [B,H,N] (gate gradient per head).
template <typename T>
void backward_impl(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const c10::optional<at::Tensor>& base, const at::Tensor& local, const at::Tensor& gate,
                   const at::Tensor& stats, double scale, double dropout_p, int64_t seed,
                   at::Tensor& dq, at::Tensor& dk, at::Tensor& dv, at::Tensor& dg) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  const View4<T> Q = view_of<T>(q), K = view_of<T>(k), V = view_of<T>(v), G = view_of<T>(gate.unsqueeze(-1));
  const View4<T> DO = view_of<T>(dout);
  const Mask4 BM = mask_of(base), LM = mask_of(local);
  const T* ST = stats.data_ptr<T>();
  T* DQ = dq.data_ptr<T>();
  T* DK = dk.data_ptr<T>();
  T* DV = dv.data_ptr<T>();
  T* DG = dg.data_ptr<T>();
  const T sc = static_cast<T>(scale);
  const T keep_scale = dropout_p > 0.0 ? static_cast<T>(1.0 / (1.0 - dropout_p)) : T(1);
  const uint32_t thresh = drop_threshold(dropout_p);
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int ld_x = static_cast<int>(H * D);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    const uint32_t th = thresh;
    const T ks = keep_scale;
    const int64_t BQ = std::min(N, kRowBlock);
    std::vector<T> sbuf(BQ * M), lbuf(BQ * M), dbuf(BQ * M), fbuf(M), flbuf(M), kbuf(M);
    T* fb = fbuf.data();
    T* fl = flbuf.data();
    T* kp = kbuf.data();
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const T* k0 = K.at(b, h);
      const T* g0 = G.at(b, h);
      T* S = sbuf.data();   // scores -> global probs -> (dropped) mixed probs
      T* PL = lbuf.data();  // local probs
      T* DP = dbuf.data();  // dP -> dS
      for (int64_t i0 = 0; i0 < N; i0 += BQ) {
      const int64_t nb = std::min(BQ, N - i0);
      const T* q0 = Q.at(b, h) + i0 * Q.sr;
      const T* do0 = DO.at(b, h) + i0 * DO.sr;
      gemm_rm<T>(false, true, nb, M, D, sc, q0, Q.sr, k0, K.sr, T(0), S, M);
      gemm_rm<T>(false, true, nb, M, D, T(1), do0, DO.sr, V.at(b, h), V.sr, T(0), DP, M);
      for (int64_t i = i0; i < i0 + nb; ++i) {
        T* s = S + (i - i0) * M;
        T* pl = PL + (i - i0) * M;
        T* dp = DP + (i - i0) * M;
        const T* sti = ST + (bh * N + i) * 4;
        const T mg = sti[0], zg = sti[1], ml = sti[2], zl = sti[3];
        if (mg == kNegInf<T>) {
          std::fill(s, s + M, T(0)); std::fill(dp, dp + M, T(0));
          DG[bh * N + i] = T(0);
          continue;
        }
        mask_rows<T>(BM.row(b, h, i), LM.row(b, h, i), fb, fl, M);
        const T g = g0[i * G.sr];
        const bool slow = (mg - ml) > kGap<T>;
        const T inv_zg = T(1) / zg;
        if (th) {
          const uint32_t key = row_key(static_cast<uint64_t>(bh * N + i), useed);
          const int m32 = static_cast<int>(M);
          #pragma omp simd
          for (int j = 0; j < m32; ++j)
            kp[j] = elem_hash(key, static_cast<uint32_t>(j)) >= th ? ks : T(0);
        } else {
          std::fill(kp, kp + M, T(1));
        }
        T dlt_g = T(0), dlt_l = T(0);
        if (!slow) {
          const T rl = std::exp(mg - ml) / zl;
          #pragma omp simd reduction(+:dlt_g, dlt_l)
          for (int64_t j = 0; j < M; ++j) {
            const T e = exp_neg<T>(s[j] - mg) * fb[j];
            const T pgj = e * inv_zg, plj = e * rl * fl[j], dpj = dp[j] * kp[j];
            s[j] = pgj; pl[j] = plj; dp[j] = dpj;
            dlt_g += dpj * pgj; dlt_l += dpj * plj;
          }
        } else {
          const T rl = T(1) / zl;
          #pragma omp simd reduction(+:dlt_g, dlt_l)
          for (int64_t j = 0; j < M; ++j) {
            const T pgj = exp_neg<T>(s[j] - mg) * fb[j] * inv_zg;
            const T plj = exp_neg<T>(s[j] - ml) * fl[j] * rl;
            const T dpj = dp[j] * kp[j];
            s[j] = pgj; pl[j] = plj; dp[j] = dpj;
            dlt_g += dpj * pgj; dlt_l += dpj * plj;
          }
        }
        DG[bh * N + i] = dlt_l - dlt_g;
        const T a = T(1) - g;
        #pragma omp simd
        for (int64_t j = 0; j < M; ++j) {
          const T pgj = s[j], plj = pl[j], dpj = dp[j];
          dp[j] = a * pgj * (dpj - dlt_g) + g * plj * (dpj - dlt_l);
          s[j] = (a * pgj + g * plj) * kp[j];
        }
      }
      const T beta = i0 == 0 ? T(0) : T(1);   // dV and dK accumulate over row blocks
      gemm_rm<T>(true, false, M, D, nb, T(1), S, M, do0, DO.sr, beta, DV + b * M * H * D + h * D, ld_x);
      gemm_rm<T>(false, false, nb, D, M, sc, DP, M, k0, K.sr, T(0), DQ + (b * N + i0) * H * D + h * D, ld_x);
      gemm_rm<T>(true, false, M, D, nb, sc, DP, M, q0, Q.sr, beta, DK + b * M * H * D + h * D, ld_x);
      }  // row blocks
    }
  });
}

// The scalar type shared by all the given tensors: float32 or float64.
at::ScalarType common_real_type(const char* fn, std::initializer_list<const at::Tensor*> ts) {
  const at::ScalarType t = (*ts.begin())->scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble, fn, ": float32 or float64 only");
  for (const at::Tensor* x : ts) TORCH_CHECK(x->scalar_type() == t, fn, ": all inputs must have one dtype");
  return t;
}

}  // namespace

// q [B,H,N,D], k, v [B,H,M,D] (unit stride in D), base/local bool [B,1|H,N,M], gate [B,1|H,N]; all float32
// or all float64. Returns out [B,H,N,D] (a view of a [B,N,H,D] buffer) and stats [B,H,N,4].
std::vector<at::Tensor> mixed_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const c10::optional<at::Tensor>& base, const at::Tensor& local,
                                      const at::Tensor& gate, double scale, double dropout_p, int64_t seed) {
  const at::ScalarType t = common_real_type("mixed_forward", {&q, &k, &v, &gate});
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "mixed_forward: unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3);
  auto out = at::empty({B, N, H, D}, q.options());
  auto stats = at::empty({B, H, N, 4}, q.options());
  if (t == at::kDouble) {
    forward_impl<double>(q, k, v, base, local, gate, scale, dropout_p, seed, out, stats);
  } else {
    forward_impl<float>(q, k, v, base, local, gate, scale, dropout_p, seed, out, stats);
  }
  return {out.permute({0, 2, 1, 3}), stats};
}

// Gradients of mixed_forward: dq [B,H,N,D], dk, dv [B,H,M,D] (views of [B,*,H,D] buffers), dgate per head [B,H,N].
std::vector<at::Tensor> mixed_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const c10::optional<at::Tensor>& base,
                                       const at::Tensor& local, const at::Tensor& gate, const at::Tensor& stats,
                                       double scale, double dropout_p, int64_t seed) {
  const at::ScalarType t = common_real_type("mixed_backward", {&dout, &q, &k, &v, &gate, &stats});
  TORCH_CHECK(dout.stride(3) == 1, "mixed_backward: unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  auto dq = at::empty({B, N, H, D}, q.options());
  auto dk = at::empty({B, M, H, D}, q.options());
  auto dv = at::empty({B, M, H, D}, q.options());
  auto dg = at::empty({B, H, N}, q.options());
  if (t == at::kDouble) {
    backward_impl<double>(dout, q, k, v, base, local, gate, stats, scale, dropout_p, seed, dq, dk, dv, dg);
  } else {
    backward_impl<float>(dout, q, k, v, base, local, gate, stats, scale, dropout_p, seed, dq, dk, dv, dg);
  }
  return {dq.permute({0, 2, 1, 3}), dk.permute({0, 2, 1, 3}), dv.permute({0, 2, 1, 3}), dg};
}

// The dropout keep mask [B,H,N,M] that mixed_forward/backward use for (dropout_p, seed); for tests.
at::Tensor dropout_keep(int64_t B, int64_t H, int64_t N, int64_t M, double dropout_p, int64_t seed) {
  auto keep = at::empty({B, H, N, M}, at::TensorOptions().dtype(at::kBool));
  bool* out = keep.data_ptr<bool>();
  const uint32_t thresh = drop_threshold(dropout_p);
  const uint64_t useed = static_cast<uint64_t>(seed);
  for (int64_t row = 0; row < B * H * N; ++row) {
    const uint32_t key = row_key(static_cast<uint64_t>(row), useed);
    for (int j = 0; j < static_cast<int>(M); ++j) out[row * M + j] = elem_hash(key, static_cast<uint32_t>(j)) >= thresh;
  }
  return keep;
}
"""

_FUNCTIONS = ["mixed_forward", "mixed_backward", "dropout_keep"]
_TORCH_LOCK = "lock"   # the FileBaton torch's cpp_extension creates in the build folder while it builds
LOCK_TIMEOUT_S = 600.0  # default wait for another process's build (STRUCTATTN_NATIVE_LOCK_TIMEOUT overrides)
_log = logging.getLogger("structattn")
_lock = threading.Lock()
_module = None
_failed: str | None = None


class BuildLockTimeout(RuntimeError):
    """Our build lock stayed taken by another process for longer than the time-out."""


def _build_name() -> str:
    """The module name: a hash of the source, torch version, machine and CPU flags (``-march=native``)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:  # no /proc (macOS): the machine name and torch version still key the build
        pass
    key = "|".join([_SOURCE, torch.__version__, platform.machine(), flags])
    return "structattn_mixed_" + hashlib.sha1(key.encode()).hexdigest()[:12]


def _lock_timeout() -> float:
    """Seconds to wait for another process's build: ``STRUCTATTN_NATIVE_LOCK_TIMEOUT`` or :data:`LOCK_TIMEOUT_S`."""
    raw = os.environ.get("STRUCTATTN_NATIVE_LOCK_TIMEOUT")
    if raw is None:
        return LOCK_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        raise UserError(f"STRUCTATTN_NATIVE_LOCK_TIMEOUT={raw!r} is not a number of seconds") from None


@contextlib.contextmanager
def build_lock(build_dir: str, timeout: float):
    """Hold an ``fcntl.flock`` on ``<build_dir>.structattn-lock`` while building or loading the module.

    The OS releases an flock when its owner dies, so a killed build never blocks later processes. While we
    hold it, torch's own ``lock`` file in ``build_dir`` can only be left over from a process that was killed
    (every builder of this module takes our lock first): it is removed, with a log line, because torch
    would wait for it forever. Raises :class:`BuildLockTimeout` (naming the file) when another process
    holds the lock for longer than ``timeout`` seconds.
    """
    import fcntl  # POSIX only: elsewhere the ImportError makes load() fall back with its reason

    path = build_dir.rstrip(os.sep) + ".structattn-lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BuildLockTimeout(
                        f"another process has held {path} for more than {timeout:.0f} s while building the fused "
                        f"kernel; if no such process is running, remove {path}") from None
                time.sleep(0.2)
        stale = os.path.join(build_dir, _TORCH_LOCK)
        if os.path.exists(stale):
            os.remove(stale)
            _log.warning("structattn: removed the stale build lock %s left by a build that was killed", stale)
        yield path
    finally:
        os.close(fd)  # also releases the flock


def _ninja_on_path() -> None:
    """torch runs ``ninja`` from PATH. The ``ninja`` package (a dependency) installs it in the environment's
    scripts folder, which is not on PATH when Python runs by its full path without activating the
    environment: add that folder then."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja
    except ImportError:  # torch then says "Ninja is required", which load() reports
        return
    os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), ninja.BIN_DIR])


def _compile(name: str, build_dir: str, verbose: bool):
    """Build (when needed) and import the extension module from ``build_dir``."""
    from torch.utils import cpp_extension

    _ninja_on_path()

    if not os.path.exists(os.path.join(build_dir, f"{name}.so")):
        _log.warning("structattn: building the fused CPU attention kernel (once per machine, about a minute)")
    if platform.machine() in ("x86_64", "AMD64"):
        arch = ["-march=native", "-mprefer-vector-width=512"]
    else:
        arch = ["-mcpu=native"]
    return cpp_extension.load_inline(
        name=name,
        cpp_sources=[_SOURCE],
        functions=_FUNCTIONS,
        extra_cflags=["-O3", "-fopenmp", "-fno-math-errno", *arch],
        extra_ldflags=["-fopenmp"],
        with_cuda=False,
        build_directory=build_dir,
        verbose=verbose,
    )


def _fail(reason: str) -> None:
    global _failed
    _failed = reason
    warnings.warn(f"structattn: the fused CPU attention kernel is not available ({reason}); "
                  "using the two-SDPA kernel instead", RuntimeWarning, stacklevel=3)


def load(verbose: bool = False):
    """The compiled extension module, or None when it cannot be built here (the reason: :func:`failure`).

    Set ``STRUCTATTN_NO_NATIVE=1`` to never build it. Builds once per machine and torch version into
    torch's extension cache (``TORCH_EXTENSIONS_DIR``); the first build takes about a minute. Processes
    building or loading at the same time wait for each other through :func:`build_lock` for at most
    ``STRUCTATTN_NATIVE_LOCK_TIMEOUT`` seconds (default :data:`LOCK_TIMEOUT_S`), then fall back.
    """
    global _module, _failed
    if _module is not None or _failed is not None:
        return _module
    with _lock:
        if _module is not None or _failed is not None:
            return _module
        if os.environ.get("STRUCTATTN_NO_NATIVE") == "1":
            _failed = "disabled by STRUCTATTN_NO_NATIVE=1"
            return None
        if platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
            _failed = f"unsupported machine {platform.machine()}"
            return None
        from torch.utils import cpp_extension

        name, timeout = _build_name(), _lock_timeout()
        try:
            build_dir = cpp_extension._get_build_directory(name, verbose=False)
            with build_lock(build_dir, timeout):
                _module = _compile(name, build_dir, verbose)
        except BuildLockTimeout as exc:
            _fail(str(exc))
        except Exception as exc:  # compiler, ninja, BLAS symbol or a writable cache missing: fall back
            _fail(f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
        return _module


def failure() -> str | None:
    """Why :func:`load` returned None (None if it has not failed)."""
    return _failed
