// Host copy speed against a fair floor: every candidate of a row, memcpy
// of the same bytes included, is measured the same way, so a ratio says
// what the copy costs and nothing about the order it ran in.
//
//   copy_bench [results.json] [--quick] [--only KIND[,KIND...]]
//
// KIND: contiguous, transpose, slice, threshold, subbyte (--only runs those
// groups alone, to look at one without waiting for the rest).
//
// How a row is measured:
// - One allocation policy for all: the candidates of a "touched" row write
//   into buffers allocated (dlbridge's host allocator) and written before
//   timing starts; those of a "fresh" row allocate their result on every
//   call with that same allocator (as copy_unpacked and Tensor.copy() do),
//   so page faults are part of each call alike: none where the allocator
//   keeps the last freed buffer of the size (8-256 MiB), new pages on every
//   call with DLBRIDGE_KEEP_FREED=0.
// - Rounds: each round runs every candidate once, in an order rotated by
//   one per round, so each follows each other equally often and none is
//   charged the previous one's dirty lines. Before its timed batch a
//   candidate runs once untimed (its own warm-up).
// - A figure is the median over rounds; ratios are the median of the
//   per-round ratio to the floor, with the 10th-90th percentile spread.
// - Page faults (getrusage) per call and the kernel's huge-page and
//   compaction counters (/proc/vmstat) are reported beside the speed, not
//   folded into it; the load average is recorded at the start and the end.
#include <dlbridge/copy/copy.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using dlbridge::TensorView;
namespace detail = dlbridge::detail;

// Host memory from dlbridge's own allocator (huge-page advice for large
// buffers), written once so that no timed call pays its first faults.
struct Buffer {
  std::shared_ptr<void> owner;
  unsigned char* data = nullptr;
  explicit Buffer(int64_t bytes, unsigned seed = 1) {
    owner = detail::allocate_host(std::max<int64_t>(bytes, 1));
    data = static_cast<unsigned char*>(owner.get());
    uint32_t x = seed * 2654435761u;
    for (int64_t i = 0; i < bytes; ++i) data[i] = (unsigned char)((x = x * 1664525u + 1013904223u) >> 24);
  }
};

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

// The counters of /proc/vmstat that say the kernel spent a copy's time on
// huge pages: faults that got one or fell back, and compaction stalls.
std::map<std::string, long> vmstat() {
  static const char* wanted[] = {"thp_fault_alloc", "thp_fault_fallback", "compact_stall",
                                 "compact_success", "compact_fail"};
  std::map<std::string, long> out;
  std::ifstream in("/proc/vmstat");
  std::string key;
  long value;
  while (in >> key >> value)
    for (const char* w : wanted)
      if (key == w) out[key] = value;
  return out;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  char text[64];
  std::snprintf(text, sizeof text, "[%.2f, %.2f, %.2f]", a, b, c);
  return text;
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Candidate {
  std::string name;
  std::function<void()> call;
};

struct Measured {
  std::vector<std::vector<double>> seconds;  // [candidate][round], per call
  std::vector<double> faults;                // per call, over all rounds
  std::map<std::string, long> vmstat_delta;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const size_t lo = size_t(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

double budget_s = 0.6;
int min_rounds = 7;

Measured measure(const std::vector<Candidate>& candidates) {
  const size_t n = candidates.size();
  // Calls per batch so that a batch lasts ~2 ms (one call for large copies).
  std::vector<int> calls(n, 1);
  double round_s = 0;
  for (size_t c = 0; c < n; ++c) {
    candidates[c].call();
    const auto t0 = Clock::now();
    candidates[c].call();
    const double once = std::chrono::duration<double>(Clock::now() - t0).count();
    calls[c] = int(std::clamp(0.002 / std::max(once, 1e-9), 1.0, 10000.0));
    round_s += once * (calls[c] + 1);
  }
  const int rounds = int(std::clamp(budget_s / std::max(round_s, 1e-9), double(min_rounds), 400.0));
  Measured m;
  m.seconds.assign(n, {});
  m.faults.assign(n, 0);
  const auto before = vmstat();
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < n; ++k) {
      const size_t c = (k + size_t(r)) % n;
      candidates[c].call();  // warm-up: the candidate's own cache and TLB state
      const long f0 = minor_faults();
      const auto t0 = Clock::now();
      for (int i = 0; i < calls[c]; ++i) candidates[c].call();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      m.faults[c] += double(minor_faults() - f0) / calls[c] / rounds;
      m.seconds[c].push_back(s / calls[c]);
    }
  const auto after = vmstat();
  for (const auto& [key, value] : after) m.vmstat_delta[key] = value - before.at(key);
  return m;
}

// One printed and recorded row: candidate 0 is dlbridge, `floor` the index
// of the memcpy floor; `bytes` are what GB/s counts (the result's bytes).
struct Row {
  std::string kind, name, mode;
  int64_t bytes;
  unsigned threads;
  std::vector<std::string> names;
  std::vector<double> gbps, faults;
  double ratio, ratio_p10, ratio_p90;  // dlbridge over the floor
  std::map<std::string, long> vmstat_delta;
};
std::vector<Row> rows;

void record(const std::string& kind, const std::string& name, const std::string& mode,
            int64_t bytes, unsigned threads, const std::vector<Candidate>& candidates,
            size_t floor = 1) {
  const Measured m = measure(candidates);
  Row row{kind, name, mode, bytes, threads, {}, {}, {}, 0, 0, 0, m.vmstat_delta};
  for (size_t c = 0; c < candidates.size(); ++c) {
    row.names.push_back(candidates[c].name);
    row.gbps.push_back(double(bytes) / quantile(m.seconds[c], 0.5) / 1e9);
    row.faults.push_back(m.faults[c]);
  }
  std::vector<double> ratios;
  for (size_t r = 0; r < m.seconds[0].size(); ++r)
    ratios.push_back(m.seconds[floor][r] / m.seconds[0][r]);
  row.ratio = quantile(ratios, 0.5);
  row.ratio_p10 = quantile(ratios, 0.1);
  row.ratio_p90 = quantile(ratios, 0.9);
  std::printf("%-10s %-30s %-7s %9.0f KiB %u thr ", kind.c_str(), name.c_str(), mode.c_str(),
              double(bytes) / 1024, threads);
  for (size_t c = 0; c < candidates.size(); ++c)
    std::printf(" %s %6.2f", row.names[c].c_str(), row.gbps[c]);
  std::printf("  ratio %.2f (%.2f-%.2f)", row.ratio, row.ratio_p10, row.ratio_p90);
  if (row.faults[0] > 0.5 || row.faults[floor] > 0.5)
    std::printf("  faults/call %.0f vs %.0f", row.faults[0], row.faults[floor]);
  if (m.vmstat_delta.count("compact_stall") && m.vmstat_delta.at("compact_stall") > 0)
    std::printf("  compact_stall +%ld", m.vmstat_delta.at("compact_stall"));
  std::printf("\n");
  std::fflush(stdout);
  rows.push_back(row);
}

dlbridge::CopyOptions with_threads(unsigned threads) {
  dlbridge::CopyOptions options;
  options.max_threads = threads;
  return options;
}

// Keeps the compiler from dropping a copy whose result is never read (a
// fresh buffer filled and freed would otherwise cost nothing).
inline void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// memcpy of `bytes` between two touched buffers: the floor of touched rows.
Candidate memcpy_touched(unsigned char* dst, const unsigned char* src, int64_t bytes) {
  return {"memcpy", [=] { std::memcpy(dst, src, size_t(bytes)); }};
}

// A result from dlbridge's allocator, filled by memcpy and let go: the floor
// of fresh rows, whose candidates allocate their result the same way (so
// both sides take the kept buffer of host_memory.hpp, or with
// DLBRIDGE_KEEP_FREED=0 both map new pages).
Candidate memcpy_fresh(const unsigned char* src, int64_t bytes) {
  return {"memcpy", [=] {
            std::shared_ptr<void> out = detail::allocate_host(bytes);
            std::memcpy(out.get(), src, size_t(bytes));
            escape(out.get());
          }};
}

void contiguous(int64_t bytes, unsigned threads) {
  Buffer src(bytes), dst(bytes, 2);
  const auto dtype = dlbridge::dtype_of<uint8_t>();
  const auto s = TensorView::from_data(src.data, dtype, {bytes});
  const auto d = TensorView::from_data(dst.data, dtype, {bytes});
  const auto options = with_threads(threads);
  record("contiguous", "uint8[n]", "touched", bytes, threads,
         {{"dlbridge", [&] { dlbridge::copy_into(s, d, options); }},
          memcpy_touched(dst.data, src.data, bytes)});
}

// n x n row-major into its transpose, row-major: dst[i][j] = src[j][i].
template <typename T>
void transpose(int64_t n, unsigned threads) {
  const int64_t bytes = n * n * int64_t(sizeof(T));
  Buffer src(bytes), dst(bytes, 2), contiguous_src(bytes, 3);
  const auto dtype = dlbridge::DType{dlbridge::abi::kDLUInt, uint8_t(sizeof(T) * 8), 1};
  const auto s = TensorView::from_data(src.data, dtype, {n, n}, {1, n});
  const auto d = TensorView::from_data(dst.data, dtype, {n, n});
  const auto options = with_threads(threads);
  auto naive = [&] {
    const T* in = reinterpret_cast<const T*>(src.data);
    T* out = reinterpret_cast<T*>(dst.data);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = in[j * n + i];
  };
  record("transpose", std::to_string(n) + "x" + std::to_string(n) + " " +
                          std::to_string(sizeof(T) * 8) + "-bit",
         "touched", bytes, threads,
         {{"dlbridge", [&] { dlbridge::copy_into(s, d, options); }},
          memcpy_touched(dst.data, contiguous_src.data, bytes), {"loop", naive}});
}

// A transpose as Tensor.copy() makes it: a fresh result every call.
void transpose_fresh(int64_t n, unsigned threads) {
  const int64_t bytes = n * n * 4;
  Buffer src(bytes), contiguous_src(bytes, 3);
  const auto s = TensorView::from_data(src.data, dlbridge::dtype_of<float>(), {n, n}, {1, n});
  const auto options = with_threads(threads);
  record("transpose", std::to_string(n) + "x" + std::to_string(n) + " 32-bit", "fresh", bytes,
         threads,
         {{"dlbridge", [&] { dlbridge::copy_to_compact(s, DLBRIDGE_FLAG_IS_COPIED, options); }},
          memcpy_fresh(contiguous_src.data, bytes)});
}

// A strided slice of a larger float32 matrix into a compact one; bytes are
// those of the result.
void slice(const char* name, int64_t rows_out, int64_t cols_out, int64_t row_stride,
           int64_t col_stride, unsigned threads) {
  const int64_t bytes = rows_out * cols_out * 4;
  const int64_t row_reach = row_stride * (rows_out - 1);
  const int64_t col_reach = col_stride * (cols_out - 1);
  // Element 0 sits past the reach of any negative stride.
  const int64_t origin = std::max<int64_t>(0, -row_reach) + std::max<int64_t>(0, -col_reach);
  Buffer src((1 + std::llabs(row_reach) + std::llabs(col_reach)) * 4), dst(bytes, 2),
      contiguous_src(bytes, 3);
  float* first = reinterpret_cast<float*>(src.data) + origin;
  const auto dtype = dlbridge::dtype_of<float>();
  const auto s = TensorView::from_data(first, dtype, {rows_out, cols_out}, {row_stride, col_stride});
  const auto d = TensorView::from_data(dst.data, dtype, {rows_out, cols_out});
  const auto options = with_threads(threads);
  auto loop = [&] {
    const float* in = first;
    float* out = reinterpret_cast<float*>(dst.data);
    for (int64_t i = 0; i < rows_out; ++i)
      for (int64_t j = 0; j < cols_out; ++j) out[i * cols_out + j] = in[i * row_stride + j * col_stride];
  };
  record("slice", name, "touched", bytes, threads,
         {{"dlbridge", [&] { dlbridge::copy_into(s, d, options); }},
          memcpy_touched(dst.data, contiguous_src.data, bytes), {"loop", loop}});
}

// Where threads start to pay: the same copies on one thread and with all
// of them forced on (min_bytes_per_thread = 1); the floor is one thread.
void threshold(int64_t bytes, unsigned all) {
  Buffer src(bytes), dst(bytes, 2);
  const dlbridge::CopyOptions one{1, 1, 1}, many{all, 1, 1};
  const int64_t n = 1024, rows_ = bytes / 4 / n;
  const auto ts = TensorView::from_data(src.data, dlbridge::dtype_of<float>(), {rows_, n}, {1, rows_});
  const auto td = TensorView::from_data(dst.data, dlbridge::dtype_of<float>(), {rows_, n});
  const auto cs = TensorView::from_data(src.data, dlbridge::dtype_of<uint8_t>(), {bytes});
  const auto cd = TensorView::from_data(dst.data, dlbridge::dtype_of<uint8_t>(), {bytes});
  record("threshold", "contiguous forced threads", "touched", bytes, all,
         {{"threads", [&] { dlbridge::copy_into(cs, cd, many); }},
          {"one", [&] { dlbridge::copy_into(cs, cd, one); }}});
  record("threshold", "transpose forced threads", "touched", bytes, all,
         {{"threads", [&] { dlbridge::copy_into(ts, td, many); }},
          {"one", [&] { dlbridge::copy_into(ts, td, one); }}});
}

// Sub-byte values (`bits` wide) unpacked to a byte each and packed back, on
// one thread: the kernels into touched buffers, and copy_unpacked /
// copy_packed as a user calls them (a fresh result each call). GB/s count
// the bytes written: `values` for unpacking, values * bits / 8 for packing.
void subbyte(const char* name, dlbridge::DType dtype, int64_t values) {
  const unsigned bits = dtype.bits;
  const int64_t packed_bytes = values * bits / 8;
  Buffer packed(packed_bytes), bytes(values, 2), packed_out(packed_bytes, 3);
  // Values within range, as a padded tensor holds them.
  for (int64_t i = 0; i < values; ++i) bytes.data[i] &= (unsigned char)((1u << bits) - 1);
  Buffer bytes_out(values, 4);
  const auto packed_view = TensorView::from_data(packed.data, dtype, {values});
  const auto padded_view = TensorView::from_data(bytes.data, dtype, {values}, {}, {},
                                                 DLBRIDGE_FLAG_IS_SUBBYTE_TYPE_PADDED);
  const bool sign = dtype.code == dlbridge::abi::kDLInt;
  record("unpack", name, "touched", values, 1,
         {{"dlbridge", [&] { detail::unpack_run(bytes_out.data, packed.data, 0, values, bits, sign); }},
          memcpy_touched(bytes_out.data, bytes.data, values)});
  record("unpack", name, "fresh", values, 1,
         {{"dlbridge", [&] { dlbridge::copy_unpacked(packed_view); }},
          memcpy_fresh(bytes.data, values)});
  record("pack", name, "touched", packed_bytes, 1,
         {{"dlbridge", [&] { detail::pack_run(packed_out.data, 0, bytes.data, values, bits); }},
          memcpy_touched(packed_out.data, packed.data, packed_bytes)});
  record("pack", name, "fresh", packed_bytes, 1,
         {{"dlbridge", [&] { dlbridge::copy_packed(padded_view); }},
          memcpy_fresh(packed.data, packed_bytes)});
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string json_list(const std::vector<double>& v, const char* format) {
  std::string out = "[";
  char item[64];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(item, sizeof item, format, v[i]);
    out += (i ? ", " : "") + std::string(item);
  }
  return out + "]";
}

void write_json(const char* path, unsigned all, const std::string& load_start,
                const std::string& load_end, const char* isa) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::perror(path);
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"machine\": {\"cpu\": \"%s\", \"threads\": %u, \"load_average_start\": %s, "
                  "\"load_average_end\": %s, \"thp_enabled\": \"%s\", \"thp_defrag\": \"%s\", "
                  "\"subbyte_isa\": \"%s\"},\n",
               cpu_model().c_str(), all, load_start.c_str(), load_end.c_str(),
               first_line("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
               first_line("/sys/kernel/mm/transparent_hugepage/defrag").c_str(), isa);
  std::fprintf(f, "  \"compiler\": \"%s\",\n  \"dlbridge\": \"%s\",\n", __VERSION__,
               DLBRIDGE_VERSION_STRING);
  std::fprintf(f, "  \"note\": \"GB/s of result bytes (medians over rounds in rotating order, each "
                  "batch after its own warm-up call); ratio = dlbridge over the memcpy floor of the "
                  "same bytes measured the same way (touched: preallocated, written buffers; fresh: "
                  "a new result from dlbridge's allocator every call, which keeps the last freed buffer of 8-256 MiB "
                  "unless DLBRIDGE_KEEP_FREED=0), median of the per-round "
                  "ratios with the 10th-90th percentile; faults are per call, vmstat deltas over "
                  "the row\",\n");
  std::fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::string names = "[", vm = "{";
    for (size_t c = 0; c < r.names.size(); ++c) names += (c ? ", \"" : "\"") + r.names[c] + "\"";
    for (const auto& [key, value] : r.vmstat_delta)
      vm += (vm.size() > 1 ? ", \"" : "\"") + key + "\": " + std::to_string(value);
    const double loop = r.names.size() > 2 ? r.gbps[2] : 0;
    std::fprintf(f,
                 "    {\"kind\": \"%s\", \"name\": \"%s\", \"mode\": \"%s\", \"bytes\": %lld, "
                 "\"threads\": %u, \"candidates\": %s], \"gbps\": %s, \"faults_per_call\": %s, "
                 "\"dlbridge_gbps\": %.4f, \"baseline_gbps\": %.4f, \"loop_gbps\": %.4f, "
                 "\"ratio\": %.4f, \"ratio_p10\": %.4f, \"ratio_p90\": %.4f, \"vmstat\": %s}}%s\n",
                 r.kind.c_str(), r.name.c_str(), r.mode.c_str(), (long long)r.bytes, r.threads,
                 names.c_str(), json_list(r.gbps, "%.4f").c_str(),
                 json_list(r.faults, "%.1f").c_str(), r.gbps[0], r.gbps[1], loop, r.ratio,
                 r.ratio_p10, r.ratio_p90, vm.c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = "," + std::string(argv[++i]) + ",";
    else json = argv[i];
  }
  const auto wanted = [&](const char* kind) {
    return only.empty() || only.find("," + std::string(kind) + ",") != std::string::npos;
  };
  if (quick) {
    budget_s = 0.1;
    min_rounds = 3;
  }
  const std::string load_start = load_average();
  const char* isa_names[] = {"portable", "avx2", "avx512"};
  const char* isa = isa_names[int(detail::subbyte_isa().load())];
  std::printf("load average %s; sub-byte kernels: %s\n", load_start.c_str(), isa);
  const unsigned all = detail::resolve_thread_count(0);
  const int64_t max_bytes = quick ? int64_t(16) << 20 : int64_t(1) << 30;
  for (int64_t bytes = 4096; bytes <= max_bytes && wanted("contiguous"); bytes *= 4)
    for (unsigned threads : {1u, all}) contiguous(bytes, threads);
  for (unsigned threads : {1u, all}) {
    if (!wanted("transpose")) break;
    transpose<uint8_t>(4096, threads);
    transpose<uint16_t>(4096, threads);
    transpose<float>(4096, threads);
    transpose<double>(4096, threads);
    transpose<float>(512, threads);
    transpose_fresh(4096, threads);
  }
  for (unsigned threads : {1u, all}) {
    if (!wanted("slice")) break;
    slice("a[:, ::2] of 4096x8192", 4096, 4096, 8192, 2, threads);
    slice("a[::2, :] of 8192x4096", 4096, 4096, 8192, 1, threads);
    slice("a[:, :-1] of 4096x4097", 4096, 4096, 4097, 1, threads);
    slice("a[::-1, ::-1] of 2048x2048", 2048, 2048, -2048, -1, threads);
  }
  for (int64_t bytes = 256 << 10; bytes <= (int64_t(16) << 20) && wanted("threshold"); bytes *= 4)
    threshold(bytes, all);
  const dlbridge::DType int4{dlbridge::abi::kDLInt, 4, 1};
  const int64_t max_values = quick ? int64_t(16) << 20 : int64_t(256) << 20;
  if (wanted("subbyte")) {
    for (int64_t values = int64_t(64) << 10; values <= max_values; values *= 16)
      subbyte("int4", int4, values);
    subbyte("uint2", {dlbridge::abi::kDLUInt, 2, 1}, int64_t(1) << 20);
    subbyte("uint1", {dlbridge::abi::kDLUInt, 1, 1}, int64_t(1) << 20);
    subbyte("float6_e2m3fn", {dlbridge::abi::kDLFloat6_e2m3fn, 6, 1}, int64_t(1) << 20);
  }
  const std::string load_end = load_average();
  std::printf("load average at the end %s\n", load_end.c_str());
  if (json != nullptr) write_json(json, all, load_start, load_end, isa);
  return 0;
}
