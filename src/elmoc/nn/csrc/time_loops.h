// What the C++ time loops share (nn/csrc/highway_lstm.cpp, encoders/csrc/projected_lstm.cpp);
// nn/native_build.py puts this folder on the include path of every build.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

// The inner loops read and write disjoint rows of different tensors (or disjoint gate
// blocks of one row); tell GCC so, or it gives up vectorizing them.
#if defined(__GNUC__) && !defined(__clang__)
#define ELMOC_IVDEP _Pragma("GCC ivdep")
#else
#define ELMOC_IVDEP
#endif

// Rows per task of at::parallel_for for rows of ``width`` elements (~16K elements a task).
static inline int64_t row_grain(int64_t width) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)); }

// f(b) for every row b in [0, rows), split over at::parallel_for in tasks of ~16K elements.
template <typename F>
inline void for_rows(int64_t rows, int64_t width, const F& f) {
  at::parallel_for(0, rows, row_grain(width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) f(r);
  });
}

// The memory-cell update of one row of n cells: g holds sigmoid(2 z_g) on entry and
// tanh(z_g) = 2 sigmoid(2 z_g) - 1 on exit; c_new = clip(i g + f c_prev) to [-clip, clip]
// (clip = +inf: no clip); two_c = 2 c_new, for tanh(c) = 2 sigmoid(2c) - 1.
template <typename scalar_t>
inline void cell_update_row(const scalar_t* i, const scalar_t* f, scalar_t* g, const scalar_t* c_prev,
                            scalar_t* c_new, scalar_t* two_c, int64_t n, scalar_t clip) {
  ELMOC_IVDEP
  for (int64_t k = 0; k < n; ++k) {
    const scalar_t gk = 2 * g[k] - 1;
    g[k] = gk;
    const scalar_t ck = std::min(std::max(i[k] * gk + f[k] * c_prev[k], -clip), clip);
    c_new[k] = ck;
    two_c[k] = 2 * ck;
  }
}
