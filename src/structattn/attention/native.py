"""A fused CPU kernel for gated local/global attention, built on first use with the system C++ compiler.

Notation: b batch, h heads, n queries, m keys, d head size; G gate heads (1 = one gate per token shared by
all heads, h = one gate per head).

The kernel computes, for every query row i of every (batch, head) pair, with s = scale * q k^T,

    e_j  = exp(s_ij - max_j s_ij)            over the keys the base (padding) mask allows
    P_ij = (1 - g_i) * e_j / sum(e) + g_i * L_ij e_j / sum(L e)          (L = local mask, one exponential)
    O_i  = sum_j P_ij v_j

in one pass per row block (one GEMM for q k^T, one row sweep, one GEMM for P v), with the same recompute
scheme as flash attention for the backward pass: only per-row statistics are saved, never an n x m matrix.

Guards: a row whose local maximum lies more than ``_GAP`` below the global maximum (where the shared
exponential would underflow) recomputes its local part from the local maximum; a row with no allowed
key gives 0 and zero gradients (as SDPA does); a row whose local pattern is empty falls back to the base
row. Attention dropout uses a counter-based hash of (seed, element index), so backward regenerates the
same mask without storing it.

Only float32 is computed (bf16/fp16 inputs are upcast by the caller). Matrix products go through the
BLAS ``sgemm_`` that PyTorch's CPU library exports. If no compiler, no ``ninja`` or no exported BLAS is
available, :func:`load` returns None and callers use the two-SDPA kernel instead.
"""
from __future__ import annotations

import hashlib
import logging
import os
import platform
import threading
import warnings

import torch

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

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kGap = 60.0f;   // local max this far below the global max: recompute local exps
constexpr int64_t kRowBlock = 256;  // query rows per block: buffers hold kRowBlock x m floats

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C through the column-major BLAS.
inline void gemm_rm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                    const float* B, int ldb, float beta, float* C, int ldc) {
  const char ca = ta ? 'T' : 'N';
  const char cb = tb ? 'T' : 'N';
  sgemm_(&cb, &ca, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

// exp(x) for x in [-87, 0] (x is clamped into it: masked entries may lie above the row max, and nothing
// below -87 becomes a denormal); branch-free, vectorisable. Callers multiply masked entries by 0.
inline float exp_neg(float x) {
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

struct View4 {            // a [B, H, R, C] float tensor, unit stride in C; size-1 B/H/R dims broadcast
  const float* p; int64_t sb, sh, sr;
  const float* at(int64_t b, int64_t h) const { return p + b * sb + h * sh; }
};
struct Mask4 {            // a [B|1, H|1, N|1, M] bool tensor with unit stride in M, or absent (all True)
  const uint8_t* p; int64_t sb, sh, sr;
  const uint8_t* row(int64_t b, int64_t h, int64_t i) const { return p ? p + b * sb + h * sh + i * sr : nullptr; }
};

View4 view_of(const at::Tensor& t) {
  return View4{t.data_ptr<float>(), t.size(0) == 1 ? 0 : t.stride(0), t.size(1) == 1 ? 0 : t.stride(1),
               t.size(2) == 1 ? std::max<int64_t>(t.size(3), 1) : t.stride(2)};  // a valid BLAS lda
}
Mask4 mask_of(const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return Mask4{nullptr, 0, 0, 0};
  const at::Tensor& m = *t;
  TORCH_CHECK(m.scalar_type() == at::kBool && m.stride(3) == 1, "masks must be bool with unit stride in m");
  return Mask4{reinterpret_cast<const uint8_t*>(m.data_ptr<bool>()), m.size(0) == 1 ? 0 : m.stride(0),
               m.size(1) == 1 ? 0 : m.stride(1), m.size(2) == 1 ? 0 : m.stride(2)};
}

// Float copies of one row's masks: fb = base (1/0), fl = local AND base, or fb when that is empty.
// Returns whether the base row allows any key.
inline bool mask_rows(const uint8_t* bm, const uint8_t* lm, float* fb, float* fl, int64_t m) {
  float nb = 0.0f, nl = 0.0f;
  if (bm) {
    #pragma omp simd reduction(+:nb, nl)
    for (int64_t j = 0; j < m; ++j) {
      const float b = static_cast<float>(bm[j] != 0);
      const float l = b * static_cast<float>(lm[j] != 0);
      fb[j] = b; fl[j] = l; nb += b; nl += l;
    }
  } else {
    #pragma omp simd reduction(+:nl)
    for (int64_t j = 0; j < m; ++j) {
      const float l = static_cast<float>(lm[j] != 0);
      fb[j] = 1.0f; fl[j] = l; nl += l;
    }
    nb = static_cast<float>(m);
  }
  if (nl == 0.0f) std::copy(fb, fb + m, fl);
  return nb > 0.0f;
}

// Per-row statistics: global max, global sum (relative to it), local max, local sum (relative to it).
struct RowStats { float mg, zg, ml, zl; };

inline void row_maxes(const float* s, const float* fb, const float* fl, int64_t m, float& mg, float& ml) {
  float a = kNegInf, b = kNegInf;
  #pragma omp simd reduction(max:a, b)
  for (int64_t j = 0; j < m; ++j) {
    const float xg = fb[j] > 0.5f ? s[j] : kNegInf;
    const float xl = fl[j] > 0.5f ? s[j] : kNegInf;
    a = std::max(a, xg);
    b = std::max(b, xl);
  }
  mg = a; ml = b;
}

}  // namespace

// q [B,H,N,D], k, v [B,H,M,D] (unit stride in D), base/local bool [B,1|H,N,M], gate [B,1|H,N].
// Returns out [B,H,N,D] (a view of a [B,N,H,D] buffer) and stats [B,H,N,4].
std::vector<at::Tensor> mixed_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const c10::optional<at::Tensor>& base, const at::Tensor& local,
                                      const at::Tensor& gate, double scale, double dropout_p, int64_t seed) {
  TORCH_CHECK(q.scalar_type() == at::kFloat && k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat &&
              gate.scalar_type() == at::kFloat, "mixed_forward: float32 only");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "mixed_forward: unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  auto out = at::empty({B, N, H, D}, q.options());
  auto stats = at::empty({B, H, N, 4}, q.options());
  const View4 Q = view_of(q), K = view_of(k), V = view_of(v), G = view_of(gate.unsqueeze(-1));
  const Mask4 BM = mask_of(base), LM = mask_of(local);
  float* O = out.data_ptr<float>();
  float* ST = stats.data_ptr<float>();
  const float sc = static_cast<float>(scale);
  const float keep_scale = dropout_p > 0.0 ? static_cast<float>(1.0 / (1.0 - dropout_p)) : 1.0f;
  const uint32_t thresh = dropout_p > 0.0 ? static_cast<uint32_t>(std::min(4294967295.0, dropout_p * 4294967296.0)) : 0u;
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int ld_o = static_cast<int>(H * D);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    const uint32_t th = thresh;      // local copies: captured references would block vectorisation
    const float ks = keep_scale;
    const int64_t BQ = std::min(N, kRowBlock);
    std::vector<float> sbuf(BQ * M), ebuf(M), fbuf(M), lbuf(M);
    float* fb = fbuf.data();
    float* fl = lbuf.data();
    float* el = ebuf.data();
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* g0 = G.at(b, h);
      float* S = sbuf.data();
      for (int64_t i0 = 0; i0 < N; i0 += BQ) {
      const int64_t nb = std::min(BQ, N - i0);
      gemm_rm(false, true, nb, M, D, sc, Q.at(b, h) + i0 * Q.sr, Q.sr, K.at(b, h), K.sr, 0.0f, S, M);
      for (int64_t i = i0; i < i0 + nb; ++i) {
        float* s = S + (i - i0) * M;
        float* sti = ST + (bh * N + i) * 4;
        if (!mask_rows(BM.row(b, h, i), LM.row(b, h, i), fb, fl, M)) {
          std::fill(s, s + M, 0.0f);
          sti[0] = kNegInf; sti[1] = 1.0f; sti[2] = kNegInf; sti[3] = 1.0f;
          continue;
        }
        float mg, ml;
        row_maxes(s, fb, fl, M, mg, ml);
        const bool slow = (mg - ml) > kGap;
        float zg = 0.0f, zl = 0.0f;
        if (!slow) {
          #pragma omp simd reduction(+:zg, zl)
          for (int64_t j = 0; j < M; ++j) {
            const float e = exp_neg(s[j] - mg) * fb[j];
            s[j] = e; zg += e; zl += e * fl[j];
          }
        } else {
          #pragma omp simd reduction(+:zg, zl)
          for (int64_t j = 0; j < M; ++j) {
            const float e = exp_neg(s[j] - mg) * fb[j];
            const float e2 = exp_neg(s[j] - ml) * fl[j];
            s[j] = e; el[j] = e2; zg += e; zl += e2;
          }
        }
        const float g = g0[i * G.sr];
        const float a = (1.0f - g) / zg;
        const float c = g / zl;   // zl relative to mg (fast) or to ml (slow)
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
            s[j] = elem_hash(key, static_cast<uint32_t>(j)) >= th ? s[j] * ks : 0.0f;
        }
      }
      gemm_rm(false, false, nb, D, M, 1.0f, S, M, V.at(b, h), V.sr, 0.0f, O + (b * N + i0) * H * D + h * D, ld_o);
      }  // row blocks
    }
  });
  return {out.permute({0, 2, 1, 3}), stats};
}

// Gradients of mixed_forward: dq [B,H,N,D], dk, dv [B,H,M,D] (views of [B,*,H,D] buffers), dgate per head [B,H,N].
std::vector<at::Tensor> mixed_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const c10::optional<at::Tensor>& base,
                                       const at::Tensor& local, const at::Tensor& gate, const at::Tensor& stats,
                                       double scale, double dropout_p, int64_t seed) {
  TORCH_CHECK(dout.scalar_type() == at::kFloat && dout.stride(3) == 1, "mixed_backward: float32, unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  auto dq = at::empty({B, N, H, D}, q.options());
  auto dk = at::empty({B, M, H, D}, q.options());
  auto dv = at::empty({B, M, H, D}, q.options());
  auto dg = at::empty({B, H, N}, q.options());
  const View4 Q = view_of(q), K = view_of(k), V = view_of(v), G = view_of(gate.unsqueeze(-1)), DO = view_of(dout);
  const Mask4 BM = mask_of(base), LM = mask_of(local);
  const float* ST = stats.data_ptr<float>();
  float* DQ = dq.data_ptr<float>();
  float* DK = dk.data_ptr<float>();
  float* DV = dv.data_ptr<float>();
  float* DG = dg.data_ptr<float>();
  const float sc = static_cast<float>(scale);
  const float keep_scale = dropout_p > 0.0 ? static_cast<float>(1.0 / (1.0 - dropout_p)) : 1.0f;
  const uint32_t thresh = dropout_p > 0.0 ? static_cast<uint32_t>(std::min(4294967295.0, dropout_p * 4294967296.0)) : 0u;
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int ld_x = static_cast<int>(H * D);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    const uint32_t th = thresh;
    const float ks = keep_scale;
    const int64_t BQ = std::min(N, kRowBlock);
    std::vector<float> sbuf(BQ * M), lbuf(BQ * M), dbuf(BQ * M), fbuf(M), flbuf(M), kbuf(M);
    float* fb = fbuf.data();
    float* fl = flbuf.data();
    float* kp = kbuf.data();
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* k0 = K.at(b, h);
      const float* g0 = G.at(b, h);
      float* S = sbuf.data();   // scores -> global probs -> (dropped) mixed probs
      float* PL = lbuf.data();  // local probs
      float* DP = dbuf.data();  // dP -> dS
      for (int64_t i0 = 0; i0 < N; i0 += BQ) {
      const int64_t nb = std::min(BQ, N - i0);
      const float* q0 = Q.at(b, h) + i0 * Q.sr;
      const float* do0 = DO.at(b, h) + i0 * DO.sr;
      gemm_rm(false, true, nb, M, D, sc, q0, Q.sr, k0, K.sr, 0.0f, S, M);
      gemm_rm(false, true, nb, M, D, 1.0f, do0, DO.sr, V.at(b, h), V.sr, 0.0f, DP, M);
      for (int64_t i = i0; i < i0 + nb; ++i) {
        float* s = S + (i - i0) * M;
        float* pl = PL + (i - i0) * M;
        float* dp = DP + (i - i0) * M;
        const float* sti = ST + (bh * N + i) * 4;
        const float mg = sti[0], zg = sti[1], ml = sti[2], zl = sti[3];
        if (mg == kNegInf) {
          std::fill(s, s + M, 0.0f); std::fill(dp, dp + M, 0.0f);
          DG[bh * N + i] = 0.0f;
          continue;
        }
        mask_rows(BM.row(b, h, i), LM.row(b, h, i), fb, fl, M);
        const float g = g0[i * G.sr];
        const bool slow = (mg - ml) > kGap;
        const float inv_zg = 1.0f / zg;
        if (th) {
          const uint32_t key = row_key(static_cast<uint64_t>(bh * N + i), useed);
          const int m32 = static_cast<int>(M);
          #pragma omp simd
          for (int j = 0; j < m32; ++j)
            kp[j] = elem_hash(key, static_cast<uint32_t>(j)) >= th ? ks : 0.0f;
        } else {
          std::fill(kp, kp + M, 1.0f);
        }
        float dlt_g = 0.0f, dlt_l = 0.0f;
        if (!slow) {
          const float rl = std::exp(mg - ml) / zl;
          #pragma omp simd reduction(+:dlt_g, dlt_l)
          for (int64_t j = 0; j < M; ++j) {
            const float e = exp_neg(s[j] - mg) * fb[j];
            const float pgj = e * inv_zg, plj = e * rl * fl[j], dpj = dp[j] * kp[j];
            s[j] = pgj; pl[j] = plj; dp[j] = dpj;
            dlt_g += dpj * pgj; dlt_l += dpj * plj;
          }
        } else {
          const float rl = 1.0f / zl;
          #pragma omp simd reduction(+:dlt_g, dlt_l)
          for (int64_t j = 0; j < M; ++j) {
            const float pgj = exp_neg(s[j] - mg) * fb[j] * inv_zg;
            const float plj = exp_neg(s[j] - ml) * fl[j] * rl;
            const float dpj = dp[j] * kp[j];
            s[j] = pgj; pl[j] = plj; dp[j] = dpj;
            dlt_g += dpj * pgj; dlt_l += dpj * plj;
          }
        }
        DG[bh * N + i] = dlt_l - dlt_g;
        const float a = 1.0f - g;
        #pragma omp simd
        for (int64_t j = 0; j < M; ++j) {
          const float pgj = s[j], plj = pl[j], dpj = dp[j];
          dp[j] = a * pgj * (dpj - dlt_g) + g * plj * (dpj - dlt_l);
          s[j] = (a * pgj + g * plj) * kp[j];
        }
      }
      const float beta = i0 == 0 ? 0.0f : 1.0f;   // dV and dK accumulate over row blocks
      gemm_rm(true, false, M, D, nb, 1.0f, S, M, do0, DO.sr, beta, DV + b * M * H * D + h * D, ld_x);
      gemm_rm(false, false, nb, D, M, sc, DP, M, k0, K.sr, 0.0f, DQ + (b * N + i0) * H * D + h * D, ld_x);
      gemm_rm(true, false, M, D, nb, sc, DP, M, q0, Q.sr, beta, DK + b * M * H * D + h * D, ld_x);
      }  // row blocks
    }
  });
  return {dq.permute({0, 2, 1, 3}), dk.permute({0, 2, 1, 3}), dv.permute({0, 2, 1, 3}), dg};
}

// The dropout keep mask [B,H,N,M] that mixed_forward/backward use for (dropout_p, seed); for tests.
at::Tensor dropout_keep(int64_t B, int64_t H, int64_t N, int64_t M, double dropout_p, int64_t seed) {
  auto keep = at::empty({B, H, N, M}, at::TensorOptions().dtype(at::kBool));
  bool* out = keep.data_ptr<bool>();
  const uint32_t thresh = static_cast<uint32_t>(std::min(4294967295.0, dropout_p * 4294967296.0));
  const uint64_t useed = static_cast<uint64_t>(seed);
  for (int64_t row = 0; row < B * H * N; ++row) {
    const uint32_t key = row_key(static_cast<uint64_t>(row), useed);
    for (int j = 0; j < static_cast<int>(M); ++j) out[row * M + j] = elem_hash(key, static_cast<uint32_t>(j)) >= thresh;
  }
  return keep;
}
"""

_FUNCTIONS = ["mixed_forward", "mixed_backward", "dropout_keep"]
_lock = threading.Lock()
_module = None
_failed: str | None = None


def _build_name() -> str:
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    key = "|".join([_SOURCE, torch.__version__, platform.machine(), flags])
    return "structattn_mixed_" + hashlib.sha1(key.encode()).hexdigest()[:12]


def load(verbose: bool = False):
    """The compiled extension module, or None when it cannot be built here (the reason: :func:`failure`).

    Set ``STRUCTATTN_NO_NATIVE=1`` to never build it. Builds once per machine and torch version into
    torch's extension cache (``TORCH_EXTENSIONS_DIR``); the first build takes about a minute.
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
        try:
            from torch.utils import cpp_extension

            name = _build_name()
            try:
                built = os.path.exists(os.path.join(cpp_extension._get_build_directory(name, verbose=False),
                                                    f"{name}.so"))
            except Exception:  # noqa: BLE001 - only decides whether to say something
                built = True
            if not built:
                logging.getLogger("structattn").warning(
                    "structattn: building the fused CPU attention kernel (once per machine, about a minute)")
            if platform.machine() in ("x86_64", "AMD64"):
                arch = ["-march=native", "-mprefer-vector-width=512"]
            else:
                arch = ["-mcpu=native"]
            _module = cpp_extension.load_inline(
                name=name,
                cpp_sources=[_SOURCE],
                functions=_FUNCTIONS,
                extra_cflags=["-O3", "-fopenmp", "-fno-math-errno", *arch],
                extra_ldflags=["-fopenmp"],
                with_cuda=False,
                verbose=verbose,
            )
        except Exception as exc:  # compiler, ninja or BLAS symbol missing: fall back
            _failed = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            warnings.warn(f"structattn: the fused CPU attention kernel could not be built ({_failed}); "
                          "using the two-SDPA kernel instead", RuntimeWarning, stacklevel=2)
            _module = None
        return _module


def failure() -> str | None:
    """Why :func:`load` returned None (None if it has not failed)."""
    return _failed
