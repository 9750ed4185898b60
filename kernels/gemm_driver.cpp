// The GEMM driver: cache blocking, B and A packing, the three ways to feed B, and threads.
//
// Algorithm (Goto / BLIS). C = A B is cut so that each operand is read from the cache level it
// fits in. B is consumed in blocks of k_kc rows x k_nc columns, packed into 16-column panels of
// k_kc x 16 values (16 KiB: one panel sits in L1 while it is used; a whole block, up to 4 MiB,
// in L2/L3). For each block the rows of A are packed k_mc at a time (a k_mc x k_kc block,
// about 120 KiB, stays in L2); then for each B panel (outer) and each 6-row A panel (inner) one
// micro-kernel call computes a 6 x 16 tile of C, storing it on the first k-block and adding to
// it on the others. Edge tiles (m or n not a multiple of 6 or 16) run a kernel cut to their
// size (1-3, 4 or 8 columns; 3 rows) or the full one into a scratch tile whose valid part is
// merged into C, so sizes like 127, 129 or 1025 need no padding of the caller's matrices. Packing
// is where dtypes are converted: bf16 is widened to fp32 (so bf16 runs at fp32 FMA speed) and int8
// is sign-extended to int16 and paired along k (so the int8 micro-kernel is exact vpmaddwd +
// vpaddd).
//
// That describes the AVX2 and portable families (F32Path, S8Path). The same templates run the
// wide families of gemm_wide.hpp (WidePath<G>: AVX-512 12 x 32 tiles, AMX 32 x 32 blocks): G
// gives the tile, the k-block (2048 bytes of a row of A) and the A block rows; their kernels
// write only the valid part of a tile, so no scratch tile is needed; they have no direct-B
// way; and a family that reads A's rows where they are (fp32 on AVX-512, kernel_rows) has only
// its ragged last panel packed.
//
// B reaches the micro-kernels in one of three ways:
//   packed once   the weight-stationary PackedB (pack_b_*): every k-block of all of B, laid
//                 out ahead of time; the multiply only packs A.
//   per block     the plain call: each k_kc x k_nc block of B is packed into a reused buffer
//                 just before it is used (no allocation or page faults per call).
//   direct        the plain call with few rows of A (m <= k_direct_max_m, one row block): a
//                 separate packing pass over B would cost as much as the multiply, so the
//                 first row panel's kernel reads B's rows where they are (widening bf16 and
//                 interleaving int8 pairs on the fly) and stores the panel it read; the other
//                 row panels reuse that panel from L1.
//
// Threads: C is cut into chunks, row ranges (units of the tile's rows) when there are enough rows,
// else column-panel ranges, about k_chunks_per_thread per thread; the threads of run_shared claim
// chunks from an atomic counter, so no two write the same element of C, and a thread that
// starts late (a sleeping vCPU can take hundreds of microseconds to wake) or runs slower just
// takes fewer. With row chunks the threads share each packed block of B: its panels are packed
// in slices claimed the same way, and counters order the phases (compute after the block's
// packing; a chunk's rows after the same rows of the previous k-block; repacking one of the
// two alternating block buffers after everyone finished computing with it).
#include "kernels/gemm_driver.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>

#include "kernels/parallel_for.hpp"

namespace tpuctl::kernels::detail {

namespace {

// Below this many multiply-adds per thread a second thread costs more than it saves.
constexpr double k_min_macs_per_thread = 1 << 18;
// A GEMM with at most this many rows of A reads B directly instead of packing it.
constexpr int k_direct_max_m = k_mc;
// The direct path walks B in slabs of this many rows across all its columns, so that B is read
// as a few dozen sequential row streams rather than 16-column strips down all of k (strips
// open a new DRAM page per row and defeat the stream prefetchers).
constexpr int k_direct_ks = 64;
// B is packed this many rows at a time across all panels of a block (a multiple of every k
// group: the int8 pairs and quads, the bf16 pairs; AMX packs its 64-byte steps whole).
constexpr int k_pack_rows = 16;
// Work chunks per thread: enough that a thread which starts late or runs slow evens out.
constexpr int k_chunks_per_thread = 4;
// How far ahead (bytes along a row) the direct path prefetches B's rows: two fp32 panels.
constexpr long k_direct_prefetch = 128;

// A growable, 64-byte aligned, per-thread buffer, kept between calls (at most a few MiB).
class Scratch {
public:
  ~Scratch() { std::free(m_data); }
  void* get(size_t bytes) {
    if (bytes > m_bytes) {
      std::free(m_data);
      m_data = allocate_aligned(bytes);
      m_bytes = bytes;
    }
    return m_data;
  }

private:
  void* m_data = nullptr;
  size_t m_bytes = 0;
};

Scratch& a_scratch() {
  thread_local Scratch s;
  return s;
}
Scratch& b_scratch() {
  thread_local Scratch s;
  return s;
}
Scratch& block_scratch() {
  thread_local Scratch s;
  return s;
}
Scratch& panel_scratch() {
  thread_local Scratch s;
  return s;
}

// Per-dtype facts of the fp32 (also bf16) and int8 paths.
struct F32Path {
  using Table = MicroKernels;
  using PackA = float;
  using PackB = float;
  using C = float;
  static constexpr bool has_direct = true;
  static constexpr bool has_rows = false;
  static constexpr int mr = k_mr, nr = k_nr, mc = k_mc;
  static constexpr int kc_block = k_kc_f32;
  static constexpr int kc_align = 8;        // the vector A packer's step
  static int a_depth(int kc) { return kc; } // A panel = k_mr * a_depth elements
  static int b_depth(int kc) { return kc; } // B panel = k_nr * b_depth elements
  static size_t a_panel(int kc) { return static_cast<size_t>(k_mr) * static_cast<size_t>(kc); }
  static void kernel(const MicroKernels& mk, int kc, const PackA* a, const PackB* b, C* c, long ldc,
                     bool acc, int rows = k_mr, int nc = k_nr) {
    if (nc <= k_columns_max && mk.f32_columns) {
      mk.f32_columns(kc, a, b, c, ldc, acc, nc);
      return;
    }
    KernelF32 f = nc <= k_nr / 4 && mk.f32_quarter   ? mk.f32_quarter
                  : nc <= k_nr / 2 && mk.f32_narrow  ? mk.f32_narrow
                  : rows <= k_mr / 2 && mk.f32_short ? mk.f32_short
                                                     : mk.f32;
    f(kc, a, b, c, ldc, acc);
  }
  static C add(C x, C y) { return x + y; }
  // True when the kernel for this tile writes only its valid elements, so it can run on C.
  static bool in_place(const MicroKernels& mk, int rows, int nc) {
    return rows == k_mr && (nc == k_nr || (nc <= k_columns_max && mk.f32_columns));
  }
};

struct S8Path {
  using Table = MicroKernels;
  using PackA = int32_t;
  using PackB = int16_t;
  using C = int32_t;
  static constexpr bool has_direct = true;
  static constexpr bool has_rows = false;
  static constexpr int mr = k_mr, nr = k_nr, mc = k_mc;
  static constexpr int kc_block = k_kc_s8;
  static constexpr int kc_align = 16; // even (k-pairs), and the vector A packer's step
  static int a_depth(int kc) { return (kc + 1) / 2; }
  static int b_depth(int kc) { return (kc + 1) / 2 * 2; }
  static size_t a_panel(int kc) {
    return static_cast<size_t>(k_mr) * static_cast<size_t>(a_depth(kc));
  }
  static void kernel(const MicroKernels& mk, int kc, const PackA* a, const PackB* b, C* c, long ldc,
                     bool acc, int rows = k_mr, int nc = k_nr) {
    if (nc <= k_columns_max && mk.s8_columns) {
      mk.s8_columns((kc + 1) / 2, a, b, c, ldc, acc, nc);
      return;
    }
    KernelS8 f = nc <= k_nr / 4 && mk.s8_quarter   ? mk.s8_quarter
                 : nc <= k_nr / 2 && mk.s8_narrow  ? mk.s8_narrow
                 : rows <= k_mr / 2 && mk.s8_short ? mk.s8_short
                                                   : mk.s8;
    f((kc + 1) / 2, a, b, c, ldc, acc);
  }
  static C add(C x, C y) {
    return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
  }
  static bool in_place(const MicroKernels& mk, int rows, int nc) {
    return rows == k_mr && (nc == k_nr || (nc <= k_columns_max && mk.s8_columns));
  }
};

// A wide path (gemm_wide.hpp): one kernel, which writes only the valid part of its tile, and
// no direct-B variant.
template <typename G>
struct WidePath {
  using Table = WideKernels<G>;
  using PackA = typename G::PackA;
  using PackB = typename G::PackB;
  using C = typename G::C;
  static constexpr bool has_direct = false;
  static constexpr bool has_rows = true; // maybe: Table::kernel_rows
  static constexpr int mr = G::mr, nr = G::nr, mc = G::mc;
  static constexpr int kc_block = G::kc_block;
  static constexpr int kc_align = G::pad;
  static int b_depth(int kc) { return (kc + G::pad - 1) / G::pad * G::pad; }
  static size_t a_panel(int) { return G::a_panel_bytes / sizeof(PackA); }
  static void kernel(const Table& mk, int kc, const PackA* a, const PackB* b, C* c, long ldc,
                     bool acc, int tr, int tc) {
    mk.kernel(kc, a, b, c, ldc, acc, tr, tc);
  }
  static C add(C x, C y) { return S8Path::add(x, y); }
  static bool in_place(const Table&, int, int) { return true; }
};

// The k-block size for a reduction of k: k split into equal blocks of at most kc_block (rounded
// up to kc_align), so that k = 257 runs as 136 + 121 rather than 256 + 1 (a whole pass over C
// for one k step). All blocks but the last have this size; packing and multiplying agree on it.
template <typename Path>
int block_k(int k) {
  int blocks = (k + Path::kc_block - 1) / Path::kc_block;
  int size = (k + blocks - 1) / std::max(blocks, 1);
  return std::max(Path::kc_align, (size + Path::kc_align - 1) / Path::kc_align * Path::kc_align);
}

template <typename Path = F32Path>
int panels_of(int n) {
  return (n + Path::nr - 1) / Path::nr;
}

template <typename Path>
size_t b_panel_elements(int kc) {
  return static_cast<size_t>(Path::b_depth(kc)) * Path::nr;
}

// One multiplication. B is either unpacked (b, ldb) or the full packed copy (packed).
template <typename Path, typename AElem, typename BElem>
struct Job {
  using PackA = typename Path::PackA;
  using PackB = typename Path::PackB;
  using C = typename Path::C;
  using PackAFn = void (*)(int, int, const AElem*, long, PackA*);
  using PackBFn = void (*)(int, int, const BElem*, long, PackB*);
  using DirectFn = void (*)(int, const PackA*, const BElem*, long, C*, long, bool, PackB*);
  using Table = typename Path::Table;

  int m, n, k;
  const AElem* a;
  long lda;
  const BElem* b;
  long ldb;
  const PackB* packed;
  C* c;
  long ldc;
  const Table* mk;
  PackAFn pack_a;
  PackBFn pack_b;
  DirectFn direct;
};

// Runs one micro-tile: the kernel straight into C when the tile is whole, else through a
// scratch tile whose valid mr x nc part is merged.
template <typename Path, typename Kernel>
void tile(const typename Path::Table& mk, int rows, int nc, typename Path::C* c, long ldc,
          bool accumulate, Kernel kernel) {
  using C = typename Path::C;
  if (Path::in_place(mk, rows, nc)) {
    kernel(c, ldc, accumulate, rows, nc);
    return;
  }
  alignas(64) C t[Path::mr * Path::nr];
  kernel(t, static_cast<long>(Path::nr), false, rows, nc);
  for (int i = 0; i < rows; ++i) {
    C* row = c + static_cast<long>(i) * ldc;
    for (int j = 0; j < nc; ++j) {
      row[j] = accumulate ? Path::add(row[j], t[i * Path::nr + j]) : t[i * Path::nr + j];
    }
  }
}

// C rows [i0, i1) x panels [jp0, jp1) += (or =) the k-block [p0, p0 + kc) of A times the packed
// B block `bblock`, whose first panel is panel `jp_first` of C.
template <typename Path, typename JobT>
void compute_block(const JobT& job, const typename Path::PackB* bblock, int jp_first, int p0,
                   int kc, int i0, int i1, int jp0, int jp1) {
  using PackA = typename Path::PackA;
  constexpr int mr = Path::mr, nr = Path::nr;
  size_t a_panel = Path::a_panel(kc);
  // A family whose kernel reads whole row panels of A where they are packs only a ragged last
  // panel.
  bool rows_in_place = false;
  if constexpr (Path::has_rows) {
    rows_in_place = job.mk->kernel_rows != nullptr;
  }
  auto* abuf = static_cast<PackA*>(
      a_scratch().get(sizeof(PackA) * (Path::mc / mr * Path::a_panel(Path::kc_block) + k_a_slack)));
  size_t b_panel = b_panel_elements<Path>(kc);
  bool accumulate = p0 > 0;
  // Row blocks of equal size (at most Path::mc, a multiple of mr): 257 rows run as 90 + 90 +
  // 77, not 120 + 120 + 17, so every block reuses each B panel about as often.
  int row_blocks = (i1 - i0 + Path::mc - 1) / Path::mc;
  int mcb = ((i1 - i0 + row_blocks - 1) / std::max(row_blocks, 1) + mr - 1) / mr * mr;
  for (int ic = i0; ic < i1; ic += mcb) {
    int mc = std::min(mcb, i1 - ic);
    int whole = rows_in_place ? mc / mr * mr : 0; // rows read in place
    if (whole < mc) {
      job.pack_a(mc - whole, kc, job.a + static_cast<long>(ic + whole) * job.lda + p0, job.lda,
                 abuf + static_cast<size_t>(whole / mr) * a_panel);
    }
    for (int jp = jp0; jp < jp1; ++jp) {
      const auto* bp = bblock + static_cast<size_t>(jp - jp_first) * b_panel;
      int j0 = jp * nr;
      int nc = std::min(nr, job.n - j0);
      for (int ir = 0; ir < mc; ir += mr) {
        if constexpr (Path::has_rows) {
          if (ir < whole) {
            job.mk->kernel_rows(kc, job.a + static_cast<long>(ic + ir) * job.lda + p0, job.lda, bp,
                                job.c + static_cast<long>(ic + ir) * job.ldc + j0, job.ldc,
                                accumulate, nc);
            continue;
          }
        }
        const PackA* ap = abuf + static_cast<size_t>(ir / mr) * a_panel;
        tile<Path>(*job.mk, std::min(mr, mc - ir), nc,
                   job.c + static_cast<long>(ic + ir) * job.ldc + j0, job.ldc, accumulate,
                   [&](typename Path::C* c, long ldc, bool acc, int tr, int tc) {
                     Path::kernel(*job.mk, kc, ap, bp, c, ldc, acc, tr, tc);
                   });
      }
    }
  }
}

// How the output is cut into chunks that the threads claim one at a time (so a thread that
// starts late, or runs slower on a shared host, just takes fewer).
struct Plan {
  int threads = 1;     // copies to run
  bool along_m = true; // chunks are row ranges (else column-panel ranges)
  int units = 1;       // 6-row units (along M) or 16-column panels (along N)
  int chunk = 1;       // units per chunk
  int chunks = 1;
  std::pair<int, int> range(int t) const { return {t * chunk, std::min(units, (t + 1) * chunk)}; }
};

template <typename Path>
Plan plan_chunks(int m, int n, int k, int threads, bool force_n) {
  Plan p;
  double macs = static_cast<double>(m) * n * k;
  int by_work =
      static_cast<int>(std::min<double>(threads, std::max(1.0, macs / k_min_macs_per_thread)));
  int units_m = (m + Path::mr - 1) / Path::mr;
  int units_n = panels_of<Path>(n);
  p.along_m = !force_n && (units_m >= 4 * by_work || units_m >= units_n);
  p.units = p.along_m ? units_m : units_n;
  p.threads = std::max(1, std::min(by_work, p.units));
  int target = p.threads == 1 ? 1 : k_chunks_per_thread * p.threads;
  p.chunk = std::max(1, (p.units + target - 1) / target);
  p.chunks = (p.units + p.chunk - 1) / p.chunk;
  return p;
}

template <typename Path, typename JobT>
void run_packed(const JobT& job, int threads) {
  const int kb = block_k<Path>(job.k);
  Plan plan = plan_chunks<Path>(job.m, job.n, job.k, threads, false);
  size_t panel_count = static_cast<size_t>(panels_of<Path>(job.n));
  std::atomic<int> next{0};
  run_shared(plan.threads, [&] {
    for (int t = next.fetch_add(1); t < plan.chunks; t = next.fetch_add(1)) {
      auto [u0, u1] = plan.range(t);
      int i0 = plan.along_m ? u0 * Path::mr : 0;
      int i1 = plan.along_m ? std::min(job.m, u1 * Path::mr) : job.m;
      int jp0 = plan.along_m ? 0 : u0;
      int jp1 = plan.along_m ? panels_of<Path>(job.n) : u1;
      for (int p0 = 0; p0 < job.k; p0 += kb) {
        int kc = std::min(kb, job.k - p0);
        const auto* bblock = job.packed + static_cast<size_t>(p0) * panel_count * Path::nr;
        compute_block<Path>(job, bblock, 0, p0, kc, i0, i1, jp0, jp1);
      }
    }
  });
}

// The plain call with enough rows: B packed block by block into a reused buffer.
template <typename Path, typename JobT>
void run_blocked(const JobT& job, int threads) {
  using PackB = typename Path::PackB;
  constexpr int nr = Path::nr;
  const int kb = block_k<Path>(job.k);
  Plan plan = plan_chunks<Path>(job.m, job.n, job.k, threads, false);
  size_t block_elems = b_panel_elements<Path>(Path::kc_block) *
                       static_cast<size_t>(panels_of<Path>(std::min(job.n, k_nc)));
  auto* buffers = static_cast<PackB*>(b_scratch().get(sizeof(PackB) * 2 * block_elems));
  int k_blocks = (job.k + kb - 1) / kb;
  int blocks = (job.n + k_nc - 1) / k_nc * k_blocks;
  // Panels q0..q1 of the block, k_pack_rows rows of all of them at a time: B is read as a few
  // long row streams, not one strip of nr columns down all kc rows per panel (a new DRAM page
  // or L3 miss per row, which the hardware prefetchers do not follow).
  auto pack = [&](int jc, int p0, int q0, int q1, PackB* buffer) {
    int kc = std::min(kb, job.k - p0);
    size_t panel = b_panel_elements<Path>(kc);
    const int step = std::max(k_pack_rows, Path::kc_align); // whole padded groups (AMX: 64)
    for (int r = 0; r < kc; r += step) {
      int rows = std::min(step, kc - r);
      for (int q = q0; q < q1; ++q) {
        int j0 = jc + q * nr;
        job.pack_b(rows, std::min(nr, job.n - j0), job.b + static_cast<long>(p0 + r) * job.ldb + j0,
                   job.ldb, buffer + static_cast<size_t>(q) * panel + static_cast<size_t>(r) * nr);
      }
    }
  };

  if (!plan.along_m) {
    // Column chunks: each packs the panels it computes, one k_nc-wide block at a time, into a
    // buffer of the thread running it, so chunks never share packed data.
    std::atomic<int> next{0};
    run_shared(plan.threads, [&] {
      auto* own = static_cast<PackB*>(block_scratch().get(sizeof(PackB) * block_elems));
      for (int t = next.fetch_add(1); t < plan.chunks; t = next.fetch_add(1)) {
        auto [u0, u1] = plan.range(t);
        for (int jc = 0; jc < job.n; jc += k_nc) {
          int jp0 = std::max(jc / nr, u0);
          int jp1 = std::min(panels_of<Path>(std::min(job.n, jc + k_nc)), u1);
          for (int p0 = 0; p0 < job.k && jp0 < jp1; p0 += kb) {
            pack(jp0 * nr, p0, 0, jp1 - jp0, own);
            compute_block<Path>(job, own, jp0, p0, std::min(kb, job.k - p0), 0, job.m, jp0, jp1);
          }
        }
      }
    });
    return;
  }

  // Row chunks share each packed block of B. Per block: pack chunks (slices of its panels),
  // then compute chunks (row ranges). Dependencies, all through counters:
  //   compute (b, t) after every pack chunk of b, and after compute (b - 1, t) (same rows of
  //   C, accumulated in order);
  //   packing b into buffer b % 2 after every compute chunk of b - 2 (its previous user).
  struct BlockState {
    std::atomic<int> pack_next{0}, pack_done{0}, compute_next{0}, compute_done{0};
  };
  std::unique_ptr<BlockState[]> state(new BlockState[static_cast<size_t>(blocks)]);
  std::unique_ptr<std::atomic<int>[]> chunk_done(
      new std::atomic<int>[static_cast<size_t>(blocks) * static_cast<size_t>(plan.chunks)]);
  for (size_t i = 0; i < static_cast<size_t>(blocks) * static_cast<size_t>(plan.chunks); ++i) {
    chunk_done[i].store(0, std::memory_order_relaxed);
  }
  run_shared(plan.threads, [&] {
    for (int b = 0; b < blocks; ++b) {
      int jc = b / k_blocks * k_nc;
      int p0 = b % k_blocks * kb;
      int kc = std::min(kb, job.k - p0);
      int jp_first = jc / nr;
      int block_panels = panels_of<Path>(std::min(job.n, jc + k_nc)) - jp_first;
      int pack_chunks = std::min(block_panels, k_chunks_per_thread * plan.threads);
      PackB* buffer = buffers + static_cast<size_t>(b % 2) * block_elems;
      BlockState& st = state[static_cast<size_t>(b)];
      for (int t = st.pack_next.fetch_add(1); t < pack_chunks; t = st.pack_next.fetch_add(1)) {
        if (b >= 2) {
          wait_for(state[static_cast<size_t>(b - 2)].compute_done, plan.chunks);
        }
        pack(jc, p0, static_cast<int>(static_cast<long>(block_panels) * t / pack_chunks),
             static_cast<int>(static_cast<long>(block_panels) * (t + 1) / pack_chunks), buffer);
        count_up(st.pack_done);
      }
      wait_for(st.pack_done, pack_chunks);
      for (int t = st.compute_next.fetch_add(1); t < plan.chunks;
           t = st.compute_next.fetch_add(1)) {
        if (b >= 1) {
          wait_for(chunk_done[static_cast<size_t>(b - 1) * plan.chunks + t], 1);
        }
        auto [u0, u1] = plan.range(t);
        compute_block<Path>(job, buffer, jp_first, p0, kc, u0 * Path::mr,
                            std::min(job.m, u1 * Path::mr), jp_first, jp_first + block_panels);
        count_up(chunk_done[static_cast<size_t>(b) * plan.chunks + t]);
        count_up(st.compute_done);
      }
    }
  });
}

// Rows [0, m) x panels [jp0, jp1) of the direct path (B read where it is).
template <typename Path, typename JobT>
void direct_range(const JobT& job, int jp0, int jp1) {
  using PackA = typename Path::PackA;
  using PackB = typename Path::PackB;
  const int kb = block_k<Path>(job.k);
  auto* abuf = static_cast<PackA*>(a_scratch().get(
      sizeof(PackA) * (k_mc * static_cast<size_t>(Path::a_depth(Path::kc_block)) + k_a_slack)));
  auto* panel = static_cast<PackB*>(
      panel_scratch().get(sizeof(PackB) * b_panel_elements<Path>(Path::kc_block)));
  for (int p0 = 0; p0 < job.k; p0 += kb) {
    int kc = std::min(kb, job.k - p0);
    int adepth = Path::a_depth(kc);
    for (int ic = 0; ic < job.m; ic += k_mc) {
      int mc = std::min(k_mc, job.m - ic);
      job.pack_a(mc, kc, job.a + static_cast<long>(ic) * job.lda + p0, job.lda, abuf);
      for (int ps = 0; ps < kc; ps += k_direct_ks) {
        int ks = std::min(k_direct_ks, kc - ps);
        bool accumulate = p0 + ps > 0;
        for (int jp = jp0; jp < jp1; ++jp) {
          int j0 = jp * k_nr;
          int nc = std::min(k_nr, job.n - j0);
          const auto* bsrc = job.b + static_cast<long>(p0 + ps) * job.ldb + j0;
          // Ask for the slab's rows k_direct_prefetch bytes ahead now, once per cache line
          // (every 1, 2 or 4 panels for fp32, bf16, int8): B comes from memory, in more row
          // streams than the hardware prefetchers follow. Into L2 only: rows whose stride is
          // a multiple of 4 KiB all map to one L1 set, and prefetching them into L1 would
          // evict the lines in use.
          size_t offset = static_cast<size_t>(j0) * sizeof(*bsrc);
          if (offset % 64 == 0 && j0 + k_nr < job.n) {
            const char* ahead = reinterpret_cast<const char*>(bsrc) + k_direct_prefetch;
            long row_bytes = job.ldb * static_cast<long>(sizeof(*bsrc));
            for (int r = 0; r < ks; ++r) {
              __builtin_prefetch(ahead + r * row_bytes, 0, 1);
            }
          }
          // The first row panel reads B where it is and packs it into `panel` on the way (a
          // ragged last panel is packed up front); the other row panels read `panel` from L1.
          // Re-reading B's rows instead would thrash L1: with a power-of-two ldb they all map
          // to the same cache set.
          bool packed = nc < k_nr;
          if (packed) {
            job.pack_b(ks, nc, bsrc, job.ldb, panel);
          }
          for (int ir = 0; ir < mc; ir += k_mr) {
            const PackA* ap = abuf + static_cast<size_t>(ir) * static_cast<size_t>(adepth) +
                              static_cast<size_t>(Path::a_depth(ps)) * k_mr;
            tile<Path>(*job.mk, std::min(k_mr, mc - ir), nc,
                       job.c + static_cast<long>(ic + ir) * job.ldc + j0, job.ldc, accumulate,
                       [&](typename Path::C* c, long ldc, bool acc, int tr, int tc) {
                         if (packed) {
                           Path::kernel(*job.mk, ks, ap, panel, c, ldc, acc, tr, tc);
                         } else {
                           job.direct(ks, ap, bsrc, job.ldb, c, ldc, acc,
                                      mc > k_mr ? panel : nullptr);
                         }
                       });
            packed = true;
          }
        }
      }
    }
  }
}

template <typename Path, typename JobT>
void run_direct(const JobT& job, int threads) {
  Plan plan = plan_chunks<Path>(job.m, job.n, job.k, threads, true);
  std::atomic<int> next{0};
  run_shared(plan.threads, [&] {
    for (int t = next.fetch_add(1); t < plan.chunks; t = next.fetch_add(1)) {
      auto [jp0, jp1] = plan.range(t);
      direct_range<Path>(job, jp0, jp1);
    }
  });
}

template <typename C>
void zero_c(int m, int n, C* c, long ldc) {
  for (int i = 0; i < m; ++i) {
    std::fill(c + static_cast<long>(i) * ldc, c + static_cast<long>(i) * ldc + n, C{});
  }
}

template <typename Path, typename JobT>
void run(const JobT& job, int threads) {
  if (job.m == 0 || job.n == 0) {
    return;
  }
  if (job.k == 0) {
    zero_c(job.m, job.n, job.c, job.ldc);
    return;
  }
  if (job.packed) {
    run_packed<Path>(job, threads);
    return;
  }
  if constexpr (Path::has_direct) {
    if (job.direct && job.m <= k_direct_max_m) {
      run_direct<Path>(job, threads);
      return;
    }
  }
  run_blocked<Path>(job, threads);
}

// Packs all of B (k x n) as run_packed reads it, the panels split among threads.
template <typename Path, typename BElem, typename PackB>
void pack_all(int threads, int k, int n, const BElem* b, long ldb, PackB* dst,
              void (*pack_b)(int, int, const BElem*, long, PackB*)) {
  int panels = panels_of<Path>(n);
  size_t panel_count = static_cast<size_t>(panels);
  double elems = static_cast<double>(k) * n;
  int parts = static_cast<int>(std::min<double>(threads, std::max(1.0, elems / (1 << 16))));
  const int kb = block_k<Path>(k);
  parallel_for(panels, std::max(1, std::min(parts, panels)), [&](int jp) {
    int j0 = jp * Path::nr;
    for (int p0 = 0; p0 < k; p0 += kb) {
      int kc = std::min(kb, k - p0);
      PackB* block = dst + static_cast<size_t>(p0) * panel_count * Path::nr;
      pack_b(kc, std::min(Path::nr, n - j0), b + static_cast<long>(p0) * ldb + j0, ldb,
             block + static_cast<size_t>(jp) * b_panel_elements<Path>(kc));
    }
  });
}

template <typename Path>
size_t packed_elements(int k, int n) {
  size_t depth = 0;
  int kb = block_k<Path>(k);
  for (int p0 = 0; p0 < k; p0 += kb) {
    depth += static_cast<size_t>(Path::b_depth(std::min(kb, k - p0)));
  }
  return depth * static_cast<size_t>(panels_of<Path>(n)) * Path::nr;
}

} // namespace

void* allocate_aligned(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 64) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    throw std::bad_alloc();
  }
  return p;
}

size_t packed_b_bytes(GemmDtype dtype, int k, int n) {
  return dtype == GemmDtype::int8 ? packed_elements<S8Path>(k, n) * sizeof(int16_t)
                                  : packed_elements<F32Path>(k, n) * sizeof(float);
}

void pack_b_full_f32(const MicroKernels& mk, int threads, int k, int n, const float* b, long ldb,
                     float* dst) {
  pack_all<F32Path>(threads, k, n, b, ldb, dst, mk.pack_b_f32);
}

void pack_b_full_bf16(const MicroKernels& mk, int threads, int k, int n, const bf16_t* b, long ldb,
                      float* dst) {
  pack_all<F32Path>(threads, k, n, b, ldb, dst, mk.pack_b_bf16);
}

void pack_b_full_s8(const MicroKernels& mk, int threads, int k, int n, const int8_t* b, long ldb,
                    int16_t* dst) {
  pack_all<S8Path>(threads, k, n, b, ldb, dst, mk.pack_b_s8);
}

void run_f32(const MicroKernels& mk, int threads, int m, int n, int k, const float* a, long lda,
             const float* b, long ldb, const float* packed, float* c, long ldc) {
  Job<F32Path, float, float> job{
      m, n, k, a, lda, b, ldb, packed, c, ldc, &mk, mk.pack_a_f32, mk.pack_b_f32, mk.f32_direct};
  run<F32Path>(job, threads);
}

void run_bf16(const MicroKernels& mk, int threads, int m, int n, int k, const bf16_t* a, long lda,
              const bf16_t* b, long ldb, const float* packed, float* c, long ldc) {
  Job<F32Path, bf16_t, bf16_t> job{
      m, n, k, a, lda, b, ldb, packed, c, ldc, &mk, mk.pack_a_bf16, mk.pack_b_bf16, mk.bf16_direct};
  run<F32Path>(job, threads);
}

void run_s8(const MicroKernels& mk, int threads, int m, int n, int k, const int8_t* a, long lda,
            const int8_t* b, long ldb, const int16_t* packed, int32_t* c, long ldc) {
  Job<S8Path, int8_t, int8_t> job{
      m, n, k, a, lda, b, ldb, packed, c, ldc, &mk, mk.pack_a_s8, mk.pack_b_s8, mk.s8_direct};
  run<S8Path>(job, threads);
}

template <typename G>
size_t packed_b_bytes_wide(int k, int n) {
  return packed_elements<WidePath<G>>(k, n) * sizeof(typename G::PackB);
}

template <typename G>
void pack_b_full_wide(const WideKernels<G>& mk, int threads, int k, int n,
                      const typename G::AElem* b, long ldb, typename G::PackB* dst) {
  pack_all<WidePath<G>>(threads, k, n, b, ldb, dst, mk.pack_b);
}

template <typename G>
void run_wide(const WideKernels<G>& mk, int threads, int m, int n, int k,
              const typename G::AElem* a, long lda, const typename G::AElem* b, long ldb,
              const typename G::PackB* packed, typename G::C* c, long ldc) {
  using AElem = typename G::AElem;
  Job<WidePath<G>, AElem, AElem> job{m,      n, k,   a,   lda,       b,         ldb,
                                     packed, c, ldc, &mk, mk.pack_a, mk.pack_b, nullptr};
  run<WidePath<G>>(job, threads);
}

#define TPUCTL_WIDE_PATH(G)                                                                        \
  template size_t packed_b_bytes_wide<G>(int, int);                                                \
  template void pack_b_full_wide<G>(const WideKernels<G>&, int, int, int, const G::AElem*, long,   \
                                    G::PackB*);                                                    \
  template void run_wide<G>(const WideKernels<G>&, int, int, int, int, const G::AElem*, long,      \
                            const G::AElem*, long, const G::PackB*, G::C*, long);
TPUCTL_WIDE_PATH(Avx512F32)
TPUCTL_WIDE_PATH(Avx512Bf16Widened)
TPUCTL_WIDE_PATH(Avx512Bf16)
TPUCTL_WIDE_PATH(Avx512S8)
TPUCTL_WIDE_PATH(AmxBf16)
TPUCTL_WIDE_PATH(AmxS8)
#undef TPUCTL_WIDE_PATH

} // namespace tpuctl::kernels::detail
