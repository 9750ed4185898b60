// CPUID, XCR0 and the Linux AMX permission (amx.md sections 1 and 2). Baseline x86-64 code: the
// only instructions it runs itself are cpuid and xgetbv (after checking OSXSAVE), and syscalls.
//
// Announced is not the same as usable. On 2026-11-28 a KVM guest of an Intel Xeon (family 6,
// model 207) listed avx512*, amx_tile, amx_int8 and amx_bf16, its kernel granted the tile-data
// permission, and the first peak probe of `tpuctl kernel run` died of SIGILL (bench/README.md,
// issue 34). So before the GEMM or a probe uses an extra unit, its probe loop runs once in a
// forked child (fault_signal): a unit whose child dies is left out, with the reason, and the
// GEMM falls back to the next family instead of killing the process. The child resets the fault
// signals to their default action (a test runner's or a sanitizer's handler would report the
// crash as its own) and dumps no core. If fork is refused, CPUID is trusted as before.
#include "kernels/cpu_features.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "kernels/peak_probe_loops.hpp"

namespace tpuctl::kernels {

namespace {

#if defined(__x86_64__)

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) {
    return Regs{};
  }
  return r;
}

uint64_t xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned reg, int n) {
  return ((reg >> n) & 1u) != 0;
}

struct Raw {
  unsigned max_leaf = 0;
  Regs l1, l7, l7_1;
  uint64_t xcr0 = 0;
  bool osxsave = false;
};

Raw read_raw() {
  Raw r;
  r.max_leaf = __get_cpuid_max(0, nullptr);
  if (r.max_leaf >= 1) {
    r.l1 = cpuid(1, 0);
  }
  if (r.max_leaf >= 7) {
    r.l7 = cpuid(7, 0);
    if (r.l7.a >= 1) {
      r.l7_1 = cpuid(7, 1);
    }
  }
  r.osxsave = bit(r.l1.c, 27);
  r.xcr0 = r.osxsave ? xgetbv0() : 0;
  return r;
}

const Raw& raw() {
  static const Raw r = read_raw();
  return r;
}

constexpr uint64_t k_xcr0_avx = 0x6;           // SSE and AVX state
constexpr uint64_t k_xcr0_avx512 = 0xe6;       // plus opmask and both zmm halves
constexpr uint64_t k_xcr0_amx = 0x60000;       // XTILECFG and XTILEDATA
constexpr long k_arch_get_xcomp_perm = 0x1022; // <asm/prctl.h>, Linux 5.16+
constexpr long k_arch_req_xcomp_perm = 0x1023;
constexpr long k_xfeature_xtiledata = 18;

// Everything but the permission: the reason AMX cannot be used, or "" when it could be.
std::string amx_hardware_problem(const Raw& r) {
  if (r.max_leaf < 7 || !bit(r.l7.d, 24)) {
    return "the CPU has no AMX-TILE (CPUID.(7,0):EDX[24])";
  }
  if (!bit(r.l7.d, 25) || !bit(r.l7.d, 22)) {
    return "the CPU has AMX-TILE but not both AMX-INT8 and AMX-BF16 (CPUID.(7,0):EDX[25], [22])";
  }
  if ((r.xcr0 & k_xcr0_amx) != k_xcr0_amx) {
    return "the OS does not enable the tile state (XCR0 bits 17 and 18 are not both set)";
  }
  if (r.max_leaf < 0x1e) {
    return "CPUID has no palette leaves 0x1D/0x1E";
  }
  Regs palette = cpuid(0x1d, 1);
  Regs tmul = cpuid(0x1e, 0);
  bool geometry = (palette.a & 0xffff) == 8192 && (palette.a >> 16) == 1024 &&
                  (palette.b & 0xffff) == 64 && (palette.b >> 16) >= 8 &&
                  (palette.c & 0xffff) >= 16 && (tmul.b & 0xff) >= 16 &&
                  ((tmul.b >> 8) & 0xffff) >= 64;
  if (!geometry) {
    return "the tile palette is not 8 tiles of 16 rows x 64 bytes (CPUID leaves 0x1D/0x1E)";
  }
  return "";
}

std::string signal_name(int sig) {
  switch (sig) {
  case SIGILL:
    return "SIGILL";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  default:
    return "signal " + std::to_string(sig);
  }
}

// "" when `loop` runs in a child (or cannot be tried), else why not, naming `instruction`.
std::string fault_reason(const char* announced, const char* instruction, void (*loop)(long)) {
  const int sig = detail::fault_signal(loop);
  if (sig <= 0) {
    return "";
  }
  return std::string(announced) + ", but " + instruction + " died of " + signal_name(sig) +
         " when tried once in a child process (a virtual machine that does not pass it through?)";
}

AmxStatus check_amx() {
  AmxStatus s;
  s.reason = amx_hardware_problem(raw());
  if (!s.reason.empty()) {
    return s;
  }
#if defined(__linux__)
  if (syscall(SYS_arch_prctl, k_arch_req_xcomp_perm, k_xfeature_xtiledata) != 0) {
    int err = errno;
    s.reason = "the kernel refused the tile-data permission: arch_prctl(ARCH_REQ_XCOMP_PERM, "
               "XFEATURE_XTILEDATA) failed with errno " +
               std::to_string(err) + " (" + std::strerror(err) + ")";
    return s;
  }
  unsigned long perm = 0;
  if (syscall(SYS_arch_prctl, k_arch_get_xcomp_perm, &perm) != 0 ||
      ((perm >> k_xfeature_xtiledata) & 1u) == 0) {
    s.reason = "the kernel granted the tile-data permission but ARCH_GET_XCOMP_PERM does not "
               "show XTILEDATA (bit 18)";
    return s;
  }
  for (auto [instruction, loop] : {std::pair{"tdpbssd", &detail::amx_int8_loop},
                                   std::pair{"tdpbf16ps", &detail::amx_bf16_loop}}) {
    s.reason = fault_reason("CPUID, XCR0 and the kernel allow AMX", instruction, loop);
    if (!s.reason.empty()) {
      return s;
    }
  }
  s.usable = true;
#else
  s.reason = "AMX needs Linux's tile-data permission; this build is not for Linux";
#endif
  return s;
}

CpuFeatures detect() {
  const Raw& r = raw();
  CpuFeatures f;
  bool avx_os = (r.xcr0 & k_xcr0_avx) == k_xcr0_avx;
  bool avx512_os = (r.xcr0 & k_xcr0_avx512) == k_xcr0_avx512;
  f.avx2_fma = avx_os && bit(r.l7.b, 5) && bit(r.l1.c, 12) && bit(r.l1.c, 28);
  // F (EBX[16]), DQ (EBX[17]), BW (EBX[30]), VL (EBX[31]).
  f.avx512 = f.avx2_fma && avx512_os && bit(r.l7.b, 16) && bit(r.l7.b, 17) && bit(r.l7.b, 30) &&
             bit(r.l7.b, 31);
  f.avx512_vnni = f.avx512 && bit(r.l7.c, 11);
  f.avx512_bf16 = f.avx512 && bit(r.l7_1.a, 5);
  // Each announced family is tried once (the file's essay); one that faults is left out.
  auto tried = [&f](bool& has, const char* family, const char* instruction, void (*loop)(long)) {
    if (!has) {
      return;
    }
    std::string why = fault_reason("CPUID and XCR0 announce it", instruction, loop);
    if (!why.empty()) {
      has = false;
      f.refused.emplace_back(family, why);
    }
  };
  tried(f.avx512, "avx512", "vfmadd231ps zmm", &detail::zmm_fma_loop);
  f.avx512_vnni = f.avx512_vnni && f.avx512;
  f.avx512_bf16 = f.avx512_bf16 && f.avx512;
  tried(f.avx512_vnni, "avx512-vnni", "vpdpbusd zmm", &detail::zmm_vnni_loop);
  tried(f.avx512_bf16, "avx512-bf16", "vdpbf16ps zmm", &detail::zmm_bf16_loop);
  // The AMX paths also run their epilogues and packers with AVX-512 (every AMX CPU has it).
  f.amx = f.avx512_bf16 && f.avx512_vnni && amx_status().usable;
  if (!amx_status().usable && r.max_leaf >= 7 && bit(r.l7.d, 24)) {
    f.refused.emplace_back("amx", amx_status().reason);
  }
  return f;
}

#else // not x86-64: no vector ISA this library knows

AmxStatus check_amx() {
  AmxStatus s;
  s.reason = "AMX is an x86-64 feature";
  return s;
}

CpuFeatures detect() {
  return CpuFeatures{};
}

#endif

} // namespace

namespace detail {

int fault_signal(void (*loop)(long)) {
#if defined(__linux__)
  const pid_t pid = ::fork();
  if (pid < 0) {
    return -1;
  }
  if (pid == 0) {
    for (int sig : {SIGILL, SIGSEGV, SIGBUS, SIGFPE}) {
      std::signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    loop(1);
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return -1;
    }
  }
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
#else
  (void)loop;
  return -1;
#endif
}

} // namespace detail

const AmxStatus& amx_status() {
  static const AmxStatus s = check_amx();
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

} // namespace tpuctl::kernels
