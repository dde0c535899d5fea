// Fused gated local/global attention on the CPU (built by structattn/attention/native.py).
//
// Notation: B batch, H heads, N queries, M keys, D head size. For every query row i of every (b, h), with
// s = scale * q k^T,
//
//     e_j  = exp(s_ij - max_j s_ij)            over the keys the base (padding) mask allows
//     P_ij = (1 - g_i) * e_j / sum(e) + g_i * L_ij e_j / sum(L e)          (L = local mask, one exponential)
//     O_i  = sum_j P_ij v_j
//
// one GEMM for q k^T per row block, one row sweep, one GEMM for P v; the backward pass recomputes the
// scores from one statistic per row, the global log-normaliser lse = log sum(e) + max (flash attention's
// scheme; the same [B, H, N] float SDPA keeps, so peak memory matches it): no n x m matrix outlives a row
// block. The local normaliser is recomputed in the backward sweep from the local keys (O(w) per row).
//
// Built once per instruction set (CPU_CAPABILITY = AVX512, AVX2 or DEFAULT, chosen at run time from
// torch.backends.cpu.get_cpu_capability()): the exponential is ATen's vectorised exp_u20 (at::vec), the
// float32 matrix products go through ATen's exported CPU BLAS wrapper at::native::cpublas::brgemm. float64
// (gradient checks) runs the same row code with std::exp and plain loops for the products.
//
// Sparsity: every row is described by the key range its base mask allows ([g0, g1), "dense" when every key in
// it is allowed, as padding and sliding windows give) and the key range of its local pattern ([l0, l1)). The
// products of a row block run over the union of its rows' base ranges only (padded keys cost nothing), and
// the local part of every row sweep over [l0, l1) only: O(n w) for windows and sentence-bounded masks.
//
// Guards: a row whose local maximum lies more than kGap (60) below the global maximum (where the shared
// exponential would underflow) recomputes its local part from the local maximum; a row with no allowed key
// gives 0 and zero gradients (as SDPA does); a row whose local pattern (AND base) is empty uses its base
// row. Attention dropout uses a counter-based hash of (seed, element index): backward regenerates the same
// mask without storing it.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/native/CPUBlas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using at::vec::Vectorized;

constexpr int64_t kRowBlock = 256;  // query rows per block: buffers hold kRowBlock x (key range) scalars
constexpr int64_t kKeyAlign = 16;   // key ranges of the products are rounded to this: few distinct GEMM shapes

template <typename T> constexpr T kGap = T(60);
template <typename T> constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// ------------------------------------------------------------------------------------------ matrix products

// Row-major C[m, n] = A[m, k] B[k, n] (+ C when add): ATen's BLAS wrapper for float32 ...
inline void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, bool add) {
  at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, add, a, b, c, /*is_vnni=*/false);
}

// ... and plain loops for float64 (gradient checks only).
inline void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                 double* c, int64_t ldc, bool add) {
  for (int64_t i = 0; i < m; ++i) {
    double* ci = c + i * ldc;
    if (!add) std::fill(ci, ci + n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double aip = a[i * lda + p];
      const double* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

// dst[c, r] = src[r, c] for a rows x cols block (leading dimensions lds, ldd): at::vec's transposes (any block
// size on AVX-512, 8 x 8 tiles elsewhere), plain loops for the edges.
template <typename T>
void transpose(const T* src, int64_t rows, int64_t cols, int64_t lds, T* dst, int64_t ldd) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    at::vec::transpose_mxn<float>(src, lds, dst, ldd, static_cast<int>(rows), static_cast<int>(cols));
    return;
  }
#endif
  constexpr int64_t kTile = 8;
  int64_t r0 = 0;
  for (; r0 + kTile <= rows; r0 += kTile) {
    int64_t c0 = 0;
    for (; c0 + kTile <= cols; c0 += kTile)
      at::vec::transpose_mxn<T, 8, 8>(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
    for (int64_t c = c0; c < cols; ++c)
      for (int64_t r = r0; r < r0 + kTile; ++r) dst[c * ldd + r] = src[r * lds + c];
  }
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = r0; r < rows; ++r) dst[c * ldd + r] = src[r * lds + c];
}

// ------------------------------------------------------------------------------------------ row primitives

// Row sweeps through at::vec (vectorised for the capability the module is built for; partial loads for tails).
template <typename T> using Vec = Vectorized<T>;

template <typename T> inline Vec<T> vadd(const Vec<T>& a, const Vec<T>& b) { return a + b; }
template <typename T> inline Vec<T> vmax(const Vec<T>& a, const Vec<T>& b) { return at::vec::maximum(a, b); }

template <typename T> inline T hsum(const Vec<T>& v) {
  return at::vec::vec_reduce_all<T>([](Vec<T>& a, Vec<T>& b) { return vadd<T>(a, b); }, v);
}
template <typename T> inline T hmax(const Vec<T>& v) {
  return at::vec::vec_reduce_all<T>([](Vec<T>& a, Vec<T>& b) { return vmax<T>(a, b); }, v);
}
// The tail of a row (r < Vec::size() elements) as a full vector, the missing lanes set to `pad` (a value that
// leaves the reduction unchanged), so every reduction runs on full vectors.
template <typename T> inline Vec<T> load_tail(const T* x, int64_t r, T pad) {
  return Vec<T>::set(Vec<T>(pad), Vec<T>::loadu(x, r), r);
}

// max of x[0, n) (-inf when n = 0)
template <typename T>
inline T range_max(const T* x, int64_t n) {
  using V = Vec<T>;
  V acc(kNegInf<T>);
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) acc = vmax<T>(acc, V::loadu(x + j));
  if (j < n) acc = vmax<T>(acc, load_tail(x + j, n - j, kNegInf<T>));
  return hmax(acc);
}

// max over j in [0, n) with f[j] != 0 of x[j] (f: the local mask as 0/1), -inf when none. Partial loads fill
// with 0, so the lanes past a tail count as unmasked-out.
template <typename T>
inline T masked_max(const T* x, const T* f, int64_t n) {
  using V = Vec<T>;
  const V ninf(kNegInf<T>), zero(T(0));
  V acc(kNegInf<T>);
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) acc = vmax<T>(acc, V::blendv(ninf, V::loadu(x + j), V::loadu(f + j) != zero));
  if (j < n) acc = vmax<T>(acc, V::blendv(ninf, V::loadu(x + j, n - j), V::loadu(f + j, n - j) != zero));
  return hmax(acc);
}

// sum over [0, n) of x[j] * f[j]
template <typename T>
inline T dot(const T* x, const T* f, int64_t n) {
  using V = Vec<T>;
  V acc(T(0));
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) acc = at::vec::fmadd(V::loadu(x + j), V::loadu(f + j), acc);
  if (j < n) acc = at::vec::fmadd(V::loadu(x + j, n - j), V::loadu(f + j, n - j), acc);
  return hsum(acc);
}

// x[j] = exp(x[j] - shift) on [0, n) (exp(-inf) = 0); returns the sum. at::vec's exp_u20 (float: a polynomial,
// float64: the accurate exp).
template <typename T>
inline T exp_shift_sum(T* x, int64_t n, T shift) {
  using V = Vec<T>;
  const V vs(shift);
  V acc(T(0));
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) {
    const V e = (V::loadu(x + j) - vs).exp_u20();
    e.store(x + j);
    acc = acc + e;
  }
  if (j < n) {
    const V e = (load_tail(x + j, n - j, kNegInf<T>) - vs).exp_u20();
    e.store(x + j, n - j);
    acc = acc + e;
  }
  return hsum(acc);
}

// out[j] = f[j] != 0 ? exp(x[j] - shift) * w : 0 on [0, n) (a blend, not a product: exp may overflow off the
// local keys when shift is the local maximum); returns the sum of out.
template <typename T>
inline T masked_exp(const T* x, const T* f, int64_t n, T shift, T w, T* out) {
  using V = Vec<T>;
  const V vs(shift), vw(w), zero(T(0));
  V acc(T(0));
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) {
    const V e = V::blendv(zero, (V::loadu(x + j) - vs).exp_u20() * vw, V::loadu(f + j) != zero);
    e.store(out + j);
    acc = acc + e;
  }
  if (j < n) {
    const V e = V::blendv(zero, (V::loadu(x + j, n - j) - vs).exp_u20() * vw, V::loadu(f + j, n - j) != zero);
    e.store(out + j, n - j);
    acc = acc + e;
  }
  return hsum(acc);
}

// out[j] = x[j] * f[j] on [0, n); returns the sum of out
template <typename T>
inline T multiply_sum(const T* x, const T* f, int64_t n, T* out) {
  using V = Vec<T>;
  V acc(T(0));
  int64_t j = 0;
  for (; j + V::size() <= n; j += V::size()) {
    const V e = V::loadu(x + j) * V::loadu(f + j);
    e.store(out + j);
    acc = acc + e;
  }
  if (j < n) {
    const V e = V::loadu(x + j, n - j) * V::loadu(f + j, n - j);
    e.store(out + j, n - j);
    acc = acc + e;
  }
  return hsum(acc);
}

// x[j] += y[j] * w on [0, n)
template <typename T>
inline void add_scaled(T* x, const T* y, int64_t n, T w) {
  const Vec<T> vw(w);
  at::vec::map2<T>([&](Vec<T> u, Vec<T> v) { return at::vec::fmadd(v, vw, u); }, x, x, y, n);
}

// x[j] *= w on [0, n)
template <typename T>
inline void scale(T* x, int64_t n, T w) {
  if (n <= 0) return;
  const Vec<T> vw(w);
  at::vec::map<T>([&](Vec<T> v) { return v * vw; }, x, x, n);
}

// f[j] = lm[j] ? 1 : 0 on [0, n)
template <typename T>
inline void mask_to_float(const uint8_t* lm, int64_t n, T* f) {
  for (int64_t j = 0; j < n; ++j) f[j] = static_cast<T>(lm[j] != 0);
}

// ------------------------------------------------------------------------------------------ dropout hash

// Element (row, j) is kept iff hash(row key, j) >= threshold; the row key mixes seed and row index.
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

// x[j] *= keep(j) ? keep_scale : 0 on [j0, j1)
template <typename T>
inline void apply_dropout(T* x, int64_t j0, int64_t j1, uint32_t key, uint32_t thresh, T keep_scale) {
  const int32_t a = static_cast<int32_t>(j0), z = static_cast<int32_t>(j1);
  #pragma omp simd
  for (int32_t j = a; j < z; ++j) x[j] = elem_hash(key, static_cast<uint32_t>(j)) >= thresh ? x[j] * keep_scale : T(0);
}

// ------------------------------------------------------------------------------------------ inputs

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
                  t.size(2) == 1 ? std::max<int64_t>(t.size(3), 1) : t.stride(2)};  // a valid leading dimension
}
Mask4 mask_of(const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return Mask4{nullptr, 0, 0, 0};
  const at::Tensor& m = *t;
  TORCH_CHECK(m.scalar_type() == at::kBool && m.stride(3) == 1, "masks must be bool with unit stride in m");
  return Mask4{reinterpret_cast<const uint8_t*>(m.data_ptr<bool>()), m.size(0) == 1 ? 0 : m.stride(0),
               m.size(1) == 1 ? 0 : m.stride(1), m.size(2) == 1 ? 0 : m.stride(2)};
}

// What one query row may attend. Keys outside [g0, g1) are never allowed; inside it, all are ("dense") or
// those of the base mask. The local part lies in [l0, l1): local AND base there, or the base row itself
// ("local_is_base": an all-True local pattern, or an empty local AND base).
struct RowInfo {
  int32_t g0, g1, l0, l1;
  uint8_t dense, local_is_base, empty;
};

// Index of the first / one past the last nonzero byte of p[0, n) (bool tensors hold 0 or 1); -1 / 0 if none.
inline int64_t first_set(const uint8_t* p, int64_t n) {
  const void* f = n > 0 ? std::memchr(p, 1, static_cast<size_t>(n)) : nullptr;
  return f ? static_cast<const uint8_t*>(f) - p : -1;
}
inline int64_t end_of_set(const uint8_t* p, int64_t n) {
  int64_t j = n;
  for (; j >= 8; j -= 8) {  // eight bytes at a time from the end
    uint64_t w;
    std::memcpy(&w, p + j - 8, 8);
    if (w != 0) break;
  }
  for (; j > 0; --j)
    if (p[j - 1]) return j;
  return 0;
}
inline int64_t count_set(const uint8_t* p, int64_t n) {
  int64_t c = 0;
  for (int64_t j = 0; j < n; ++j) c += p[j] != 0;
  return c;
}

RowInfo row_info(const uint8_t* bm, const uint8_t* lm, int64_t m) {
  RowInfo r{0, 0, 0, 0, 1, 0, 0};
  int64_t g0 = 0, g1 = m, nb = m;
  if (bm) {
    g0 = first_set(bm, m);
    if (g0 < 0) { r.empty = 1; return r; }
    g1 = end_of_set(bm, m);
    nb = count_set(bm + g0, g1 - g0);
  }
  if (m == 0) { r.empty = 1; return r; }
  r.g0 = static_cast<int32_t>(g0); r.g1 = static_cast<int32_t>(g1);
  r.dense = nb == g1 - g0;
  int64_t l0 = -1, l1 = 0, nl = 0;
  if (r.dense) {  // local AND base = local inside [g0, g1)
    l0 = first_set(lm + g0, g1 - g0);
    if (l0 >= 0) {
      l0 += g0;
      l1 = g0 + end_of_set(lm + g0, g1 - g0);
      nl = count_set(lm + l0, l1 - l0);
    }
  } else {
    for (int64_t j = g0; j < g1; ++j)
      if (bm[j] && lm[j]) { if (l0 < 0) l0 = j; l1 = j + 1; ++nl; }
  }
  if (nl == 0 || nl == nb) {  // empty local pattern, or local == base: the base row
    r.local_is_base = 1; r.l0 = r.g0; r.l1 = r.g1;
  } else {
    r.l0 = static_cast<int32_t>(l0); r.l1 = static_cast<int32_t>(l1);
  }
  return r;
}

// The local pattern of a row as a bitmap of key blocks of kLocalBlock keys: bit k set when some key of
// [k * kLocalBlock, (k + 1) * kLocalBlock) inside [l0, l1) is local. The local part of every row sweep runs over
// these blocks only, so windows and sentence-bounded masks (plus the few special-token columns SLA keeps
// visible) cost O(n w), not O(n^2).
constexpr int64_t kLocalBlock = 16;
inline int64_t bitmap_words(int64_t m) { return (m + 64 * kLocalBlock - 1) / (64 * kLocalBlock); }

void local_blocks(const uint8_t* lm, int64_t l0, int64_t l1, uint64_t* bits, int64_t words) {
  std::fill(bits, bits + words, uint64_t(0));
  for (int64_t k = l0 / kLocalBlock; k * kLocalBlock < l1; ++k) {
    const int64_t j0 = std::max(l0, k * kLocalBlock), j1 = std::min(l1, (k + 1) * kLocalBlock);
    bool any = false;
    if (j1 - j0 == kLocalBlock) {
      uint64_t w0, w1;
      std::memcpy(&w0, lm + j0, 8);
      std::memcpy(&w1, lm + j0 + 8, 8);
      any = (w0 | w1) != 0;
    } else {
      for (int64_t j = j0; j < j1 && !any; ++j) any = lm[j] != 0;
    }
    if (any) bits[k / 64] |= uint64_t(1) << (k % 64);
  }
}

// Calls fn(j0, j1) for every local block of a row, clamped to [l0, l1).
template <typename F>
inline void for_local_blocks(const uint64_t* bits, int64_t words, int64_t l0, int64_t l1, const F& fn) {
  for (int64_t w = 0; w < words; ++w) {
    uint64_t x = bits[w];
    while (x) {
      const int64_t k = w * 64 + __builtin_ctzll(x);
      x &= x - 1;
      fn(std::max(l0, k * kLocalBlock), std::min(l1, (k + 1) * kLocalBlock));
    }
  }
}

// Row infos and local bitmaps for every row [B, Hi, N] (Hi = H when either mask has a head dimension, else 1).
struct RowTable {
  std::vector<RowInfo> info;
  std::vector<uint64_t> bits;   // [B * Hi * N, words]
  int64_t words = 0;
};

RowTable row_table(const Mask4& bm, const Mask4& lm, int64_t B, int64_t Hi, int64_t N, int64_t M) {
  RowTable t;
  t.words = bitmap_words(M);
  t.info.resize(B * Hi * N);
  t.bits.resize(B * Hi * N * t.words);
  at::parallel_for(0, B * Hi * N, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / (Hi * N), h = (r / N) % Hi, i = r % N;
      const RowInfo ri = row_info(bm.row(b, h, i), lm.row(b, h, i), M);
      t.info[r] = ri;
      if (!ri.empty && !ri.local_is_base) local_blocks(lm.row(b, h, i), ri.l0, ri.l1, &t.bits[r * t.words], t.words);
    }
  });
  return t;
}

// The key range [k0, k1) of a row block: the union of its rows' base ranges, rounded to kKeyAlign.
inline void block_keys(const RowInfo* rows, int64_t nb, int64_t M, int64_t& k0, int64_t& k1) {
  k0 = M; k1 = 0;
  for (int64_t r = 0; r < nb; ++r)
    if (!rows[r].empty) { k0 = std::min<int64_t>(k0, rows[r].g0); k1 = std::max<int64_t>(k1, rows[r].g1); }
  if (k1 <= k0) { k0 = k1 = 0; return; }
  k0 = k0 / kKeyAlign * kKeyAlign;
  k1 = std::min(M, (k1 + kKeyAlign - 1) / kKeyAlign * kKeyAlign);
}

// One block of query rows of a (batch, head) pair: rows [i0, i0 + nb), their infos, and the key range [k0, k1)
// its products use.
struct RowBlock {
  int64_t i0, nb, k0, k1;
  const RowInfo* info;
};

// Sets the keys of [g0, g1) the base mask refuses to -inf (a row that is not dense).
template <typename T>
inline void mask_base(T* s, const uint8_t* bm, int64_t g0, int64_t g1) {
  #pragma omp simd
  for (int64_t j = g0; j < g1; ++j) s[j] = bm[j] ? s[j] : kNegInf<T>;
}

// Per-thread scratch, allocated through ATen (so memory profilers see it).
template <typename T>
struct Scratch {
  at::Tensor t;
  T* p;
  explicit Scratch(int64_t n) : t(at::empty({std::max<int64_t>(n, 1)}, c10::CppTypeToScalarType<T>::value)),
                                p(t.data_ptr<T>()) {}
};

template <typename T>
struct Common {           // what forward and backward share
  int64_t B, H, N, D, M, Hi;
  View4<T> Q, K, V, G;
  Mask4 BM, LM;
  T sc, keep_scale;
  uint32_t thresh;
  uint64_t seed;
  RowTable table;

  Common(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& base,
         const at::Tensor& local, const at::Tensor& gate, double scale, double dropout_p, int64_t seed_)
      : B(q.size(0)), H(q.size(1)), N(q.size(2)), D(q.size(3)), M(k.size(2)),
        Q(view_of<T>(q)), K(view_of<T>(k)), V(view_of<T>(v)), G(view_of<T>(gate.unsqueeze(-1))),
        BM(mask_of(base)), LM(mask_of(local)), sc(static_cast<T>(scale)),
        keep_scale(dropout_p > 0.0 ? static_cast<T>(1.0 / (1.0 - dropout_p)) : T(1)),
        thresh(drop_threshold(dropout_p)), seed(static_cast<uint64_t>(seed_)) {
    const bool per_head = (base.has_value() && base->defined() && base->size(1) > 1) || local.size(1) > 1;
    Hi = per_head ? H : 1;
    table = row_table(BM, LM, B, Hi, N, M);
  }
  int64_t row_index(int64_t b, int64_t h, int64_t i) const { return (b * Hi + (Hi == 1 ? 0 : h)) * N + i; }
  const RowInfo* rows(int64_t b, int64_t h, int64_t i0) const { return table.info.data() + row_index(b, h, i0); }
  const uint64_t* bits(int64_t b, int64_t h, int64_t i) const {
    return table.bits.data() + row_index(b, h, i) * table.words;
  }
  int64_t block_rows() const { return std::min(N, kRowBlock); }
  // Calls fn(bh, b, h, block) for every row block of the (batch, head) pairs bh in [begin, end), a pair's
  // blocks in order.
  template <typename F>
  void for_row_blocks(int64_t begin, int64_t end, const F& fn) const {
    const int64_t BQ = block_rows();
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      for (int64_t i0 = 0; i0 < N; i0 += BQ) {
        RowBlock blk{i0, std::min(BQ, N - i0), 0, 0, rows(b, h, i0)};
        block_keys(blk.info, blk.nb, M, blk.k0, blk.k1);
        fn(bh, b, h, blk);
      }
    }
  }
  // Qs[nb, D] = scale * q rows i0.. of (b, h); Kt[D, kw] = k rows k0.. transposed
  void pack_q(int64_t b, int64_t h, int64_t i0, int64_t nb, T* qs) const {
    const T* q0 = Q.at(b, h) + i0 * Q.sr;
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t d = 0; d < D; ++d) qs[r * D + d] = q0[r * Q.sr + d] * sc;
  }
};

// ------------------------------------------------------------------------------------------ forward

// Fills out [B,N,H,D] and lse [B,H,N] (log of the global normaliser: max + log sum exp, -inf for an empty row)
// for every row.
template <typename T>
void forward_impl(const Common<T>& c, T* O, T* ST) {
  const int64_t H = c.H, N = c.N, D = c.D, M = c.M;
  const int64_t ld_o = H * D;
  at::parallel_for(0, c.B * H, 1, [&](int64_t begin, int64_t end) {
    const int64_t BQ = c.block_rows();
    Scratch<T> sbuf(BQ * M), qbuf(BQ * D), kbuf(D * M), lbuf(M), fbuf(M);
    T *S = sbuf.p, *qs = qbuf.p, *kt = kbuf.p, *el = lbuf.p, *lf = fbuf.p;
    c.for_row_blocks(begin, end, [&](int64_t bh, int64_t b, int64_t h, const RowBlock& blk) {
      const T* g0p = c.G.at(b, h);
      const int64_t i0 = blk.i0, nb = blk.nb, k0 = blk.k0, k1 = blk.k1, kw = k1 - k0;
      const RowInfo* info = blk.info;
      if (kw > 0) {
        c.pack_q(b, h, i0, nb, qs);
        transpose(c.K.at(b, h) + k0 * c.K.sr, kw, D, c.K.sr, kt, kw);
        gemm(nb, kw, D, qs, D, kt, kw, S, kw, false);
      }
      for (int64_t r = 0; r < nb; ++r) {
        const int64_t i = i0 + r;
        const RowInfo& ri = info[r];
        T* s = S + r * kw - k0;  // s[j] = score of key j
        T& lse = ST[bh * N + i];
        if (ri.empty) {
          std::fill(s + k0, s + k1, T(0));
          lse = kNegInf<T>;
          continue;
        }
        const int64_t g0 = ri.g0, g1 = ri.g1, l0 = ri.l0, l1 = ri.l1;
        if (!ri.dense) mask_base(s, c.BM.row(b, h, i), g0, g1);
        const T mg = range_max(s + g0, g1 - g0);
        const T g = g0p[i * c.G.sr];
        if (ri.local_is_base) {  // both parts are the base distribution
          const T zg = exp_shift_sum(s + g0, g1 - g0, mg);
          lse = mg + std::log(zg);
          scale(s + g0, g1 - g0, T(1) / zg);
        } else {
          // the local blocks of the row: the local mask as 0/1 there, and the local maximum
          const uint64_t* bits = c.bits(b, h, i);
          const uint8_t* lm = c.LM.row(b, h, i);
          T ml = kNegInf<T>;
          for_local_blocks(bits, c.table.words, l0, l1, [&](int64_t j0, int64_t j1) {
            mask_to_float(lm + j0, j1 - j0, lf + j0);
            ml = std::max(ml, masked_max(s + j0, lf + j0, j1 - j0));
          });
          // el = the local exponentials: from the local maximum (before s is overwritten) where the shared
          // exponential would underflow, else the shared exponentials on the local keys
          const bool slow = (mg - ml) > kGap<T>;
          T zl = T(0);
          if (slow)
            for_local_blocks(bits, c.table.words, l0, l1, [&](int64_t j0, int64_t j1) {
              zl += masked_exp(s + j0, lf + j0, j1 - j0, ml, T(1), el + j0);
            });
          const T zg = exp_shift_sum(s + g0, g1 - g0, mg);
          if (!slow)
            for_local_blocks(bits, c.table.words, l0, l1, [&](int64_t j0, int64_t j1) {
              zl += multiply_sum(s + j0, lf + j0, j1 - j0, el + j0);
            });
          const T a = (T(1) - g) / zg;
          const T cl = g / zl;   // zl relative to mg (fast) or to ml (slow)
          lse = mg + std::log(zg);
          scale(s + g0, g1 - g0, a);
          for_local_blocks(bits, c.table.words, l0, l1, [&](int64_t j0, int64_t j1) {
            add_scaled(s + j0, el + j0, j1 - j0, cl);
          });
        }
        if (c.thresh)
          apply_dropout(s, g0, g1, row_key(static_cast<uint64_t>(bh * N + i), c.seed), c.thresh, c.keep_scale);
        std::fill(s + k0, s + g0, T(0));
        std::fill(s + g1, s + k1, T(0));
      }
      T* out = O + (b * N + i0) * ld_o + h * D;
      if (kw > 0) {
        gemm(nb, D, kw, S, kw, c.V.at(b, h) + k0 * c.V.sr, c.V.sr, out, ld_o, false);
      } else {
        for (int64_t r = 0; r < nb; ++r) std::fill(out + r * ld_o, out + r * ld_o + D, T(0));
      }
    });
    if constexpr (std::is_same_v<T, float>) at::native::cpublas::brgemm_release(false);
  });
}

// ------------------------------------------------------------------------------------------ backward

// Fills dq [B,N,H,D], dk, dv [B,M,H,D] (zero-initialised by the caller) and dg [B,H,N] (gate gradient per head).
template <typename T>
void backward_impl(const Common<T>& c, const View4<T>& DO, const T* ST, T* DQ, T* DK, T* DV, T* DG) {
  const int64_t H = c.H, N = c.N, D = c.D, M = c.M;
  const int64_t ld_x = H * D;
  at::parallel_for(0, c.B * H, 1, [&](int64_t begin, int64_t end) {
    const int64_t BQ = c.block_rows();
    Scratch<T> sbuf(BQ * M), dbuf(BQ * M), tbuf(M * BQ), qbuf(BQ * D), kbuf(D * M), vbuf(D * M), lbuf(M), fbuf(M),
        ebuf(M);
    T *S = sbuf.p, *DP = dbuf.p, *TR = tbuf.p, *qs = qbuf.p, *kt = kbuf.p, *vt = vbuf.p, *pl = lbuf.p, *lf = fbuf.p,
      *el = ebuf.p;
    c.for_row_blocks(begin, end, [&](int64_t bh, int64_t b, int64_t h, const RowBlock& blk) {
      const T* g0p = c.G.at(b, h);
      const int64_t i0 = blk.i0, nb = blk.nb, k0 = blk.k0, k1 = blk.k1, kw = k1 - k0;
      const RowInfo* info = blk.info;
      T* dq = DQ + (b * N + i0) * ld_x + h * D;
      if (kw == 0) {
        for (int64_t r = 0; r < nb; ++r) { std::fill(dq + r * ld_x, dq + r * ld_x + D, T(0)); DG[bh * N + i0 + r] = T(0); }
        return;
      }
      const T* do0 = DO.at(b, h) + i0 * DO.sr;
      c.pack_q(b, h, i0, nb, qs);
      transpose(c.K.at(b, h) + k0 * c.K.sr, kw, D, c.K.sr, kt, kw);
      transpose(c.V.at(b, h) + k0 * c.V.sr, kw, D, c.V.sr, vt, kw);
      gemm(nb, kw, D, qs, D, kt, kw, S, kw, false);
      gemm(nb, kw, D, do0, DO.sr, vt, kw, DP, kw, false);
      for (int64_t r = 0; r < nb; ++r) {
        const int64_t i = i0 + r;
        const RowInfo& ri = info[r];
        T* s = S + r * kw - k0;    // scores -> global probs -> (dropped) mixed probs
        T* dp = DP + r * kw - k0;  // dP -> dS (scaled by `scale`)
        if (ri.empty) {
          std::fill(s + k0, s + k1, T(0)); std::fill(dp + k0, dp + k1, T(0));
          DG[bh * N + i] = T(0);
          continue;
        }
        const T lse = ST[bh * N + i];
        const int64_t g0 = ri.g0, g1 = ri.g1, l0 = ri.l0, l1 = ri.l1;
        if (!ri.dense) mask_base(s, c.BM.row(b, h, i), g0, g1);
        const uint32_t key = row_key(static_cast<uint64_t>(bh * N + i), c.seed);
        const T g = g0p[i * c.G.sr];
        const Vec<T> vsc(c.sc);
        if (ri.local_is_base) {  // P = the base distribution pg: dS = scale * pg * (dP - <dP, pg>), no gate gradient
          exp_shift_sum(s + g0, g1 - g0, lse);   // the global probabilities pg
          if (c.thresh) apply_dropout(dp, g0, g1, key, c.thresh, c.keep_scale);
          const Vec<T> vd(dot(dp + g0, s + g0, g1 - g0));
          at::vec::map2<T>([&](Vec<T> pg, Vec<T> d) { return vsc * pg * (d - vd); }, dp + g0, s + g0, dp + g0, g1 - g0);
          DG[bh * N + i] = T(0);
        } else {
          const uint64_t* bits = c.bits(b, h, i);
          const int64_t words = c.table.words;
          const uint8_t* lm = c.LM.row(b, h, i);
          T ml = kNegInf<T>;
          for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) {
            mask_to_float(lm + j0, j1 - j0, lf + j0);
            ml = std::max(ml, masked_max(s + j0, lf + j0, j1 - j0));
          });
          // local probabilities pl, normalised over the local keys here (only lse was saved): from the local
          // maximum (before s is overwritten) where the shared exponential would underflow, else from the
          // global probabilities on the local keys
          const bool slow = (lse - ml) > kGap<T>;
          T zl = T(0);
          if (slow)
            for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) {
              zl += masked_exp(s + j0, lf + j0, j1 - j0, ml, T(1), pl + j0);
            });
          exp_shift_sum(s + g0, g1 - g0, lse);   // the global probabilities pg
          if (!slow)
            for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) {
              zl += multiply_sum(s + j0, lf + j0, j1 - j0, pl + j0);
            });
          for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) { scale(pl + j0, j1 - j0, T(1) / zl); });
          if (c.thresh) apply_dropout(dp, g0, g1, key, c.thresh, c.keep_scale);
          const T dlt_g = dot(dp + g0, s + g0, g1 - g0);
          T dlt_l = T(0);
          for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) { dlt_l += dot(dp + j0, pl + j0, j1 - j0); });
          DG[bh * N + i] = dlt_l - dlt_g;
          // dS = scale * ((1 - g) pg (dP - dlt_g) + g pl (dP - dlt_l)), P = (1 - g) pg + g pl: the local terms
          // first (into el and pl, from the unchanged dP), then the base range, then the local terms added
          const T a = T(1) - g;
          const Vec<T> vsg(c.sc * g), vsa(c.sc * a), vdl(dlt_l), vdg(dlt_g);
          for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) {
            at::vec::map2<T>([&](Vec<T> p2, Vec<T> d) { return vsg * p2 * (d - vdl); }, el + j0, pl + j0, dp + j0, j1 - j0);
            scale(pl + j0, j1 - j0, g);
          });
          at::vec::map2<T>([&](Vec<T> pg, Vec<T> d) { return vsa * pg * (d - vdg); }, dp + g0, s + g0, dp + g0, g1 - g0);
          scale(s + g0, g1 - g0, a);
          for_local_blocks(bits, words, l0, l1, [&](int64_t j0, int64_t j1) {
            add_scaled(dp + j0, el + j0, j1 - j0, T(1));
            add_scaled(s + j0, pl + j0, j1 - j0, T(1));
          });
        }
        if (c.thresh) apply_dropout(s, g0, g1, key, c.thresh, c.keep_scale);
        std::fill(s + k0, s + g0, T(0)); std::fill(s + g1, s + k1, T(0));
        std::fill(dp + k0, dp + g0, T(0)); std::fill(dp + g1, dp + k1, T(0));
      }
      T* dv = DV + (b * M + k0) * ld_x + h * D;
      T* dk = DK + (b * M + k0) * ld_x + h * D;
      transpose(S, nb, kw, kw, TR, nb);                       // P^T [kw, nb]
      gemm(kw, D, nb, TR, nb, do0, DO.sr, dv, ld_x, true);     // dV += P^T dO
      gemm(nb, D, kw, DP, kw, c.K.at(b, h) + k0 * c.K.sr, c.K.sr, dq, ld_x, false);  // dQ = dS K
      transpose(DP, nb, kw, kw, TR, nb);                      // dS^T [kw, nb]
      gemm(kw, D, nb, TR, nb, c.Q.at(b, h) + i0 * c.Q.sr, c.Q.sr, dk, ld_x, true);   // dK += dS^T Q
    });
    if constexpr (std::is_same_v<T, float>) at::native::cpublas::brgemm_release(false);
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

// A fresh [B,H,R,D] tensor laid out as [B,R,H,D] in memory (what the row loops write; out.transpose(1, 2) is
// contiguous). Not a view: the ops' outputs own their storage (torch.compile and CUDA graphs account for views).
static at::Tensor heads_inner(int64_t B, int64_t H, int64_t R, int64_t D, const at::TensorOptions& options) {
  return at::empty_strided({B, H, R, D}, {R * H * D, D, H * D, 1}, options);
}

// q [B,H,N,D], k, v [B,H,M,D] (unit stride in D), base/local bool [B,1|H,N,M], gate [B,1|H,N]; all float32
// or all float64. Returns out [B,H,N,D] (laid out as [B,N,H,D]: heads_inner) and lse [B,H,N] (the global
// log-normaliser of every row, for the backward pass).
std::vector<at::Tensor> mixed_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const c10::optional<at::Tensor>& base, const at::Tensor& local,
                                      const at::Tensor& gate, double scale, double dropout_p, int64_t seed) {
  const at::ScalarType t = common_real_type("mixed_forward", {&q, &k, &v, &gate});
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "mixed_forward: unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3);
  auto out = heads_inner(B, H, N, D, q.options());
  auto stats = at::empty({B, H, N}, q.options());
  if (t == at::kDouble) {
    forward_impl<double>(Common<double>(q, k, v, base, local, gate, scale, dropout_p, seed), out.data_ptr<double>(),
                         stats.data_ptr<double>());
  } else {
    forward_impl<float>(Common<float>(q, k, v, base, local, gate, scale, dropout_p, seed), out.data_ptr<float>(),
                        stats.data_ptr<float>());
  }
  return {out, stats};
}

// The gate g = sigmoid(W h + b) [B,G,N] of hidden states h [B,N,C], weight W [G,C], bias b [G] or absent: ATen's
// linear (BLAS for large inputs) and sigmoid, dispatched from here rather than from Python.
at::Tensor gate_values(const at::Tensor& hidden, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  at::Tensor logits = at::linear(hidden, weight, bias);   // [B,N,G]
  return logits.sigmoid_().transpose(1, 2).contiguous();  // [B,G,N]
}

// mixed_forward with the gate computed here from the layer's hidden states h [B,N,C] and the gate's weight
// [G,C] and bias [G] (or None): inference only (no gradient flows through it). Returns out [B,H,N,D] (as
// mixed_forward) and the gate [B,G,N].
std::vector<at::Tensor> mixed_forward_gated(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                            const c10::optional<at::Tensor>& base, const at::Tensor& local,
                                            const at::Tensor& hidden, const at::Tensor& weight,
                                            const c10::optional<at::Tensor>& bias, double scale) {
  const at::ScalarType t = common_real_type("mixed_forward_gated", {&q, &k, &v, &hidden, &weight});
  TORCH_CHECK(hidden.dim() == 3 && weight.dim() == 2 && weight.size(1) == hidden.size(2),
              "mixed_forward_gated: hidden [B,N,C] and weight [G,C]");
  const at::Tensor gate = gate_values(hidden, weight, bias);
  auto result = mixed_forward(q, k, v, base, local, gate, scale, 0.0, 0);
  return {result[0], gate};
}

// Gradients of mixed_forward: dq [B,H,N,D], dk, dv [B,H,M,D] (laid out as [B,*,H,D]: heads_inner), dgate per
// head [B,H,N]; four tensors of their own.
std::vector<at::Tensor> mixed_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const c10::optional<at::Tensor>& base,
                                       const at::Tensor& local, const at::Tensor& gate, const at::Tensor& stats,
                                       double scale, double dropout_p, int64_t seed) {
  const at::ScalarType t = common_real_type("mixed_backward", {&dout, &q, &k, &v, &gate, &stats});
  TORCH_CHECK(dout.stride(3) == 1, "mixed_backward: unit stride in d");
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3), M = k.size(2);
  auto dq = heads_inner(B, H, N, D, q.options());
  auto dk = heads_inner(B, H, M, D, q.options()).zero_();
  auto dv = heads_inner(B, H, M, D, q.options()).zero_();
  auto dg = at::empty({B, H, N}, q.options());
  if (t == at::kDouble) {
    backward_impl<double>(Common<double>(q, k, v, base, local, gate, scale, dropout_p, seed), view_of<double>(dout),
                          stats.data_ptr<double>(), dq.data_ptr<double>(), dk.data_ptr<double>(),
                          dv.data_ptr<double>(), dg.data_ptr<double>());
  } else {
    backward_impl<float>(Common<float>(q, k, v, base, local, gate, scale, dropout_p, seed), view_of<float>(dout),
                         stats.data_ptr<float>(), dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>(),
                         dg.data_ptr<float>());
  }
  return {dq, dk, dv, dg};
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

// A small float32 product through the BLAS wrapper: raises where ATen's brgemm is not supported on this CPU
// (the loader then falls back to the two-SDPA kernel). Returns the capability the module was built for.
std::string probe() {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0, 0, 0, 0};
  gemm(2, 2, 2, a, 2, b, 2, c, 2, false);
  at::native::cpublas::brgemm_release(false);
  TORCH_CHECK(c[0] == 19.f && c[1] == 22.f && c[2] == 43.f && c[3] == 50.f, "brgemm gave a wrong product");
#if defined(CPU_CAPABILITY_AVX512)
  return "AVX512";
#elif defined(CPU_CAPABILITY_AVX2)
  return "AVX2";
#else
  return "DEFAULT";
#endif
}
