// The cycle-stepped systolic array.
//
// The machine is simulated register by register. One loop iteration is one clock cycle; every
// register of every PE takes its new value from its neighbours' old values, so data moves one
// PE per cycle. Nothing is computed in closed form: the cycle count is simply the number of
// iterations from the first cycle that did anything to the cycle the last result left.
//
// Stationary dataflows (ws, is). Array row i holds reduction index k0 + i of the fold's tile and
// column j output column c0 + j (ws: B's column, the TPU MXU; is: A's row, computing C^T =
// B^T A^T with the same hardware). Each PE has three weight registers:
//   transit  a shift register down the column: the loader pushes one weight per cycle into the
//            top PE, bottom row first, so after R shifts row i holds its weight;
//   shadow   latched from transit, for the whole column at once, after the R-th shift;
//   active   the weight the MAC uses. A PE copies shadow -> active when the first vector of a
//            new fold reaches it: the switch travels with the data, as a diagonal wavefront.
// Streamed vectors enter from the left through a skew buffer (row i sees vector t i cycles after
// row 0) and move right one PE per cycle. Partial sums enter the top row as +0 and move down one
// PE per cycle, each PE adding x * w; PE(i, j) sees vector t at cycle s + t + i + j, exactly when
// the partial sum of the same t arrives from above (every PE checks this and counts a hazard
// otherwise). The bottom row hands each finished column partial to the accumulators, which add
// it into C in fold order. A fold's partials from padding columns are dropped, but they still
// have to leave the array: like SCALE-Sim, every fold is a whole R x C tile.
//
// Two controllers decide when tiles load and vectors stream:
//   scalesim  fold f+1's tile starts loading (every column at once) the cycle after fold f's
//             last partial sum left the array; vectors stream once the tile is latched. So a
//             fold takes R (load) + R - 1 (skew) + T (stream) + C - 1 (drain) cycles.
//   tpu       the wavefront of fold f, passing the top PE of column j, starts that column's load
//             of fold f+1 into the shadows (R cycles, latched by the time the wavefront has
//             passed every row of the column). The next fold's vectors follow fold f's as soon
//             as column 0's shadow is latched: max(T, R) cycles after fold f started.
// Output stationary (os): PE(i, j) accumulates C[m0 + i][n0 + j]. A's columns enter from the
// left and B's rows from the top, both skewed, and meet at PE(i, j) at cycle s + i + j + k. The
// first operand pair of a fold clears the accumulator; the last one (k = K - 1) completes it and
// it is read out in place that cycle (SCALE-Sim does not charge an output shift-out either).
// The next fold starts the cycle after the last PE finished.
//
// Folds run column folds outer, row folds inner, as in SCALE-Sim. Data paths: int8 products in
// int32 with wrapping adds; bf16 products rounded to fp32 (through an exact fp64 product, so no
// compiler can fuse them into an FMA) and fp32 adds.
#include "kernels/systolic_sim.hpp"

#include <algorithm>
#include <vector>

namespace tpuctl::kernels {

namespace {

float product(float x, float w) {
  return static_cast<float>(static_cast<double>(x) * static_cast<double>(w));
}

struct S8Path {
  using In = int8_t;
  using Val = int32_t;
  using Acc = int32_t;
  static Val load(In v) { return v; }
  static Acc add(Acc a, Acc b) {
    return static_cast<Acc>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
  static Acc mac(Acc p, Val x, Val w) { return add(p, x * w); }
};

struct Bf16Path {
  using In = bf16_t;
  using Val = float;
  using Acc = float;
  static Val load(In v) { return bf16_to_fp32(v); }
  static Acc add(Acc a, Acc b) { return a + b; }
  static Acc mac(Acc p, Val x, Val w) { return p + product(x, w); }
};

// What travels with a value: which fold it belongs to and its streamed index (t or k).
struct Tag {
  int64_t fold = -1; // -1: a bubble
  int64_t step = 0;
  bool valid() const { return fold >= 0; }
  bool operator==(const Tag&) const = default;
};

// A strided read-only matrix view: element (i, j) is base[i * si + j * sj].
template <typename T>
struct View {
  const T* base;
  int64_t si, sj;
  T at(int64_t i, int64_t j) const { return base[i * si + j * sj]; }
};

template <typename T>
struct MutView {
  T* base;
  int64_t si, sj;
  T& at(int64_t i, int64_t j) const { return base[i * si + j * sj]; }
};

Error stalled() {
  return make_error(ErrorKind::failure,
                    "the systolic simulator stopped making progress (a bug: please report it)");
}

// ws / is: `s` is the stationary Sr x Sc matrix, `x` the streamed T x Sr one, `out` T x Sc.
template <typename P>
class StationarySim {
public:
  using In = typename P::In;
  using Val = typename P::Val;
  using Acc = typename P::Acc;

  StationarySim(const ArrayShape& array, int64_t sr, int64_t sc, int64_t t, View<In> s, View<In> x,
                MutView<Acc> out, CycleMode mode)
      : m_r(array.rows), m_c(array.cols), m_sr(sr), m_sc(sc), m_t(t), m_s(s), m_x(x), m_out(out),
        m_tpu(mode == CycleMode::tpu) {}

  Expected<SimStats> run() {
    const int64_t row_folds = (m_sr + m_r - 1) / m_r, col_folds = (m_sc + m_c - 1) / m_c;
    const int64_t folds = row_folds * col_folds;
    for (int64_t f = 0; f < folds; ++f) {
      m_r0.push_back((f % row_folds) * m_r);
      m_c0.push_back((f / row_folds) * m_c);
    }
    for (int64_t ti = 0; ti < m_t; ++ti) {
      for (int64_t j = 0; j < m_sc; ++j) {
        m_out.at(ti, j) = Acc{}; // the accumulators start at +0
      }
    }
    const size_t pes = static_cast<size_t>(m_r * m_c);
    m_x_val.assign(pes, Val{});
    m_x_tag.assign(pes, Tag{});
    m_p_val.assign(pes, Acc{});
    m_transit.assign(pes, Val{});
    m_shadow.assign(pes, Val{});
    m_active.assign(pes, Val{});
    m_shadow_fold.assign(pes, -1);
    m_active_fold.assign(pes, -1);
    m_load_fold.assign(static_cast<size_t>(m_c), -1);
    m_load_step.assign(static_cast<size_t>(m_c), 0);
    m_ring.assign(static_cast<size_t>(m_r), Tag{});
    m_outputs_left.assign(static_cast<size_t>(folds), m_t * m_c);

    SimStats stats;
    stats.folds = folds;
    int64_t pending_load = 0; // fold to start loading into every column, -1 for none
    int64_t streaming = -1, next_step = 0, next_fold = 0, done = 0, last_output = -1;
    const int64_t guard = folds * (2 * m_r + m_c + m_t) + 16;
    for (int64_t cycle = 0; done < folds; ++cycle) {
      if (cycle > guard) {
        return stalled();
      }
      if (pending_load >= 0) {
        start_load_all(pending_load, stats);
        pending_load = -1;
      }
      // The streamer: continue the current fold, or start the next once its tile is latched.
      Tag inject;
      if (streaming >= 0 && next_step < m_t) {
        inject = {streaming, next_step++};
      } else if (next_fold < folds && m_shadow_fold[0] == next_fold) {
        streaming = next_fold++;
        next_step = 0;
        inject = {streaming, next_step++};
      }
      m_ring[static_cast<size_t>(cycle % m_r)] = inject;

      for (int64_t i = m_r - 1; i >= 0; --i) {
        step_row(cycle, i, folds, stats, [&](const Tag& tag, int64_t j, Acc partial) {
          int64_t col = m_c0[static_cast<size_t>(tag.fold)] + j;
          if (col < m_sc) {
            Acc& o = m_out.at(tag.step, col);
            o = P::add(o, partial);
          }
          last_output = cycle;
          if (--m_outputs_left[static_cast<size_t>(tag.fold)] == 0) {
            ++done;
            if (!m_tpu && tag.fold + 1 < folds) {
              pending_load = tag.fold + 1; // the array is empty: load the next tile
            }
          }
        });
      }
      shift_loaders();
    }
    stats.cycles = last_output + 1;
    return stats;
  }

private:
  void start_load(int64_t j, int64_t fold, SimStats& stats) {
    if (m_load_fold[static_cast<size_t>(j)] >= 0) {
      ++stats.hazards; // the column was still loading another tile
    }
    m_load_fold[static_cast<size_t>(j)] = fold;
    m_load_step[static_cast<size_t>(j)] = 0;
  }
  void start_load_all(int64_t fold, SimStats& stats) {
    for (int64_t j = 0; j < m_c; ++j) {
      start_load(j, fold, stats);
    }
  }

  // One cycle of array row i, right to left so that every PE reads its left neighbour's and
  // upper neighbour's values of the previous cycle.
  template <typename Emit>
  void step_row(int64_t cycle, int64_t i, int64_t folds, SimStats& stats, Emit&& emit) {
    Tag feed_tag;
    Val feed_val{};
    if (cycle - i >= 0) {
      feed_tag = m_ring[static_cast<size_t>((cycle - i) % m_r)];
      if (feed_tag.valid()) {
        int64_t r = m_r0[static_cast<size_t>(feed_tag.fold)] + i;
        feed_val = r < m_sr ? P::load(m_x.at(feed_tag.step, r)) : Val{};
      }
    }
    for (int64_t j = m_c - 1; j >= 0; --j) {
      const size_t idx = static_cast<size_t>(i * m_c + j);
      const Tag tag = j == 0 ? feed_tag : m_x_tag[idx - 1];
      const Val x = j == 0 ? feed_val : m_x_val[idx - 1];
      Acc partial{};
      if (i > 0) {
        const size_t up = idx - static_cast<size_t>(m_c);
        partial = m_p_val[up];
        if (!(m_x_tag[up] == tag)) {
          ++stats.hazards; // the partial sum from above is not this vector's
        }
      }
      if (tag.valid()) {
        if (m_active_fold[idx] != tag.fold) {
          if (m_shadow_fold[idx] != tag.fold) {
            ++stats.hazards; // the tile has not arrived in the shadow register yet
          }
          m_active[idx] = m_shadow[idx];
          m_active_fold[idx] = tag.fold;
          if (m_tpu && i == 0 && tag.fold + 1 < folds) {
            start_load(j, tag.fold + 1, stats); // the shadow is free: load the next tile
          }
        }
        partial = P::mac(partial, x, m_active[idx]);
        ++stats.pe_macs;
        if (m_r0[static_cast<size_t>(tag.fold)] + i < m_sr &&
            m_c0[static_cast<size_t>(tag.fold)] + j < m_sc) {
          ++stats.useful_macs;
        }
        if (i == m_r - 1) {
          emit(tag, j, partial);
        }
      }
      m_x_tag[idx] = tag;
      m_x_val[idx] = x;
      m_p_val[idx] = partial;
    }
  }

  // The weight loaders: one shift down each loading column, and the latch after the R-th.
  void shift_loaders() {
    for (int64_t j = 0; j < m_c; ++j) {
      const int64_t fold = m_load_fold[static_cast<size_t>(j)];
      if (fold < 0) {
        continue;
      }
      for (int64_t i = m_r - 1; i >= 1; --i) {
        m_transit[static_cast<size_t>(i * m_c + j)] =
            m_transit[static_cast<size_t>((i - 1) * m_c + j)];
      }
      int64_t& step = m_load_step[static_cast<size_t>(j)];
      const int64_t r = m_r0[static_cast<size_t>(fold)] + (m_r - 1 - step);
      const int64_t col = m_c0[static_cast<size_t>(fold)] + j;
      m_transit[static_cast<size_t>(j)] = r < m_sr && col < m_sc ? P::load(m_s.at(r, col)) : Val{};
      if (++step == m_r) {
        for (int64_t i = 0; i < m_r; ++i) {
          const size_t idx = static_cast<size_t>(i * m_c + j);
          m_shadow[idx] = m_transit[idx];
          m_shadow_fold[idx] = fold;
        }
        m_load_fold[static_cast<size_t>(j)] = -1;
      }
    }
  }

  const int64_t m_r, m_c, m_sr, m_sc, m_t;
  const View<In> m_s, m_x;
  const MutView<Acc> m_out;
  const bool m_tpu;
  std::vector<int64_t> m_r0, m_c0; // each fold's first operand row and column
  std::vector<Val> m_x_val;        // the streamed value each PE passes right
  std::vector<Tag> m_x_tag;
  std::vector<Acc> m_p_val; // the partial sum each PE passes down
  std::vector<Val> m_transit, m_shadow, m_active;
  std::vector<int64_t> m_shadow_fold, m_active_fold;
  std::vector<int64_t> m_load_fold, m_load_step; // per column
  std::vector<Tag> m_ring;                       // the skew buffer: what entered at each cycle
  std::vector<int64_t> m_outputs_left;           // per fold, partial sums still to leave
};

// os: A (M x K) enters from the left, B (K x N) from the top; C (M x N) accumulates in place.
template <typename P>
class OutputStationarySim {
public:
  using In = typename P::In;
  using Val = typename P::Val;
  using Acc = typename P::Acc;

  OutputStationarySim(const ArrayShape& array, const GemmShape& shape, View<In> a, View<In> b,
                      MutView<Acc> out)
      : m_r(array.rows), m_c(array.cols), m_shape(shape), m_a(a), m_b(b), m_out(out) {}

  Expected<SimStats> run() {
    const int64_t row_folds = (m_shape.m + m_r - 1) / m_r;
    const int64_t col_folds = (m_shape.n + m_c - 1) / m_c;
    const int64_t folds = row_folds * col_folds;
    const int64_t t = m_shape.k;
    std::vector<int64_t> m0, n0;
    for (int64_t f = 0; f < folds; ++f) {
      m0.push_back((f % row_folds) * m_r);
      n0.push_back((f / row_folds) * m_c);
    }
    const size_t pes = static_cast<size_t>(m_r * m_c);
    std::vector<Val> a_val(pes), b_val(pes);
    std::vector<Tag> a_tag(pes), b_tag(pes);
    std::vector<Acc> acc(pes);
    const int64_t depth = std::max(m_r, m_c);
    std::vector<Tag> ring(static_cast<size_t>(depth));
    std::vector<int64_t> readouts_left(static_cast<size_t>(folds), m_r * m_c);

    SimStats stats;
    stats.folds = folds;
    int64_t streaming = -1, next_step = 0, next_fold = 0, done = 0, last_output = -1;
    bool may_start = true; // the array is free for the next fold
    const int64_t guard = folds * (m_r + m_c + t) + 16;
    auto fed = [&](int64_t cycle, int64_t delay) {
      return cycle - delay >= 0 ? ring[static_cast<size_t>((cycle - delay) % depth)] : Tag{};
    };
    for (int64_t cycle = 0; done < folds; ++cycle) {
      if (cycle > guard) {
        return stalled();
      }
      Tag inject;
      if (streaming >= 0 && next_step < t) {
        inject = {streaming, next_step++};
      } else if (next_fold < folds && may_start) {
        streaming = next_fold++;
        next_step = 0;
        may_start = false;
        inject = {streaming, next_step++};
      }
      ring[static_cast<size_t>(cycle % depth)] = inject;

      for (int64_t i = m_r - 1; i >= 0; --i) {
        const Tag row_tag = fed(cycle, i);
        Val row_val{};
        if (row_tag.valid()) {
          int64_t m = m0[static_cast<size_t>(row_tag.fold)] + i;
          row_val = m < m_shape.m ? P::load(m_a.at(m, row_tag.step)) : Val{};
        }
        for (int64_t j = m_c - 1; j >= 0; --j) {
          const size_t idx = static_cast<size_t>(i * m_c + j);
          const Tag at = j == 0 ? row_tag : a_tag[idx - 1];
          const Val av = j == 0 ? row_val : a_val[idx - 1];
          Tag bt;
          Val bv{};
          if (i == 0) {
            bt = fed(cycle, j);
            if (bt.valid()) {
              int64_t n = n0[static_cast<size_t>(bt.fold)] + j;
              bv = n < m_shape.n ? P::load(m_b.at(bt.step, n)) : Val{};
            }
          } else {
            bt = b_tag[idx - static_cast<size_t>(m_c)];
            bv = b_val[idx - static_cast<size_t>(m_c)];
          }
          if (!(at == bt)) {
            ++stats.hazards; // the two operands belong to different steps
          }
          if (at.valid()) {
            if (at.step == 0) {
              acc[idx] = Acc{}; // a new fold's wavefront clears the accumulator
            }
            acc[idx] = P::mac(acc[idx], av, bv);
            ++stats.pe_macs;
            const int64_t m = m0[static_cast<size_t>(at.fold)] + i;
            const int64_t n = n0[static_cast<size_t>(at.fold)] + j;
            const bool real = m < m_shape.m && n < m_shape.n;
            stats.useful_macs += real ? 1 : 0;
            if (at.step == t - 1) { // complete: read out in place
              if (real) {
                m_out.at(m, n) = acc[idx];
              }
              last_output = cycle;
              if (--readouts_left[static_cast<size_t>(at.fold)] == 0) {
                ++done;
                may_start = true;
              }
            }
          }
          a_tag[idx] = at;
          a_val[idx] = av;
          b_tag[idx] = bt;
          b_val[idx] = bv;
        }
      }
    }
    stats.cycles = last_output + 1;
    return stats;
  }

private:
  const int64_t m_r, m_c;
  const GemmShape m_shape;
  const View<In> m_a, m_b;
  const MutView<Acc> m_out;
};

template <typename P>
Expected<SimStats> simulate(const GemmShape& shape, const typename P::In* a, int64_t lda,
                            const typename P::In* b, int64_t ldb, typename P::Acc* c, int64_t ldc,
                            const SimConfig& config) {
  TPUCTL_TRY(model_gemm(shape, config.array, config.dataflow, config.mode));
  ErrorList problems;
  auto check_ld = [&](const char* name, int64_t ld, int64_t row, const char* what) {
    if (ld < row) {
      problems.add(usage_error(std::string(name) + " '" + std::to_string(ld) +
                               "' is shorter than a row of " + what + " (" + std::to_string(row) +
                               " elements): use a leading dimension of at least " +
                               std::to_string(row)));
    }
  };
  check_ld("lda", lda, shape.k, "A");
  check_ld("ldb", ldb, shape.n, "B");
  check_ld("ldc", ldc, shape.n, "C");
  if (!problems.empty()) {
    return problems.combined();
  }
  using In = typename P::In;
  switch (config.dataflow) {
  case Dataflow::ws:
    return StationarySim<P>(config.array, shape.k, shape.n, shape.m, View<In>{b, ldb, 1},
                            View<In>{a, lda, 1}, MutView<typename P::Acc>{c, ldc, 1}, config.mode)
        .run();
  case Dataflow::is:
    return StationarySim<P>(config.array, shape.k, shape.m, shape.n, View<In>{a, 1, lda},
                            View<In>{b, 1, ldb}, MutView<typename P::Acc>{c, 1, ldc}, config.mode)
        .run();
  case Dataflow::os:
    break;
  }
  return OutputStationarySim<P>(config.array, shape, View<In>{a, lda, 1}, View<In>{b, ldb, 1},
                                MutView<typename P::Acc>{c, ldc, 1})
      .run();
}

} // namespace

Expected<SimStats> simulate_gemm_s8(const GemmShape& shape, const int8_t* a, int64_t lda,
                                    const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc,
                                    const SimConfig& config) {
  return simulate<S8Path>(shape, a, lda, b, ldb, c, ldc, config);
}

Expected<SimStats> simulate_gemm_bf16(const GemmShape& shape, const bf16_t* a, int64_t lda,
                                      const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                                      const SimConfig& config) {
  return simulate<Bf16Path>(shape, a, lda, b, ldb, c, ldc, config);
}

void systolic_order_gemm_bf16(const GemmShape& shape, const bf16_t* a, int64_t lda, const bf16_t* b,
                              int64_t ldb, float* c, int64_t ldc, int64_t array_rows,
                              Dataflow dataflow) {
  const int64_t tile = dataflow == Dataflow::os ? shape.k : array_rows;
  for (int64_t i = 0; i < shape.m; ++i) {
    for (int64_t j = 0; j < shape.n; ++j) {
      float acc = 0.0f;
      for (int64_t k0 = 0; k0 < shape.k; k0 += tile) {
        float psum = 0.0f;
        for (int64_t p = k0; p < std::min(k0 + tile, shape.k); ++p) {
          psum = psum + product(bf16_to_fp32(a[i * lda + p]), bf16_to_fp32(b[p * ldb + j]));
        }
        acc = acc + psum;
      }
      c[i * ldc + j] = acc;
    }
  }
}

} // namespace tpuctl::kernels
