// Host copy speed: dlbridge::copy_into against memcpy of the same bytes (the
// ceiling) and against the plain loop a user would write, side by side in
// one run, interleaved, median of several repetitions.
//
//   copy_bench [results.json] [--quick]
//
// Prints a table; writes JSON when a path is given. Ratios are dlbridge's
// bandwidth over memcpy's (bytes moved / time), so 1.0 is memcpy speed.
#include <dlbridge/copy.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Buffer {
  std::shared_ptr<void> owner;
  char* data = nullptr;
  explicit Buffer(int64_t bytes) {
    void* p = std::aligned_alloc(64, size_t((bytes + 63) / 64 * 64));
    if (p == nullptr) throw std::bad_alloc();
    owner.reset(p, std::free);
    data = static_cast<char*>(p);
    // Touch every page now, so no measurement pays for first faults.
    for (int64_t i = 0; i < bytes; ++i) data[i] = char(i * 131);
  }
};

double seconds(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs each candidate in turn, repetition by repetition, so drift in clock
// speed or background load hits all of them alike. Repetitions fill about
// budget_s seconds, between 3 and 200.
std::vector<double> compare(const std::vector<std::function<void()>>& fns,
                            double budget_s) {
  double once = 0;
  for (const auto& f : fns) once += seconds(f);  // also warms caches and code
  const int reps = int(std::clamp(budget_s / std::max(once, 1e-9), 3.0, 200.0));
  std::vector<std::vector<double>> times(fns.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) times[i].push_back(seconds(fns[i]));
  std::vector<double> out;
  for (auto& t : times) out.push_back(median(t));
  return out;
}

struct Row {
  std::string kind, name;
  int64_t bytes;
  unsigned threads;
  double dlbridge_gbps, memcpy_gbps, loop_gbps;  // loop 0 when not measured
};

std::vector<Row> rows;
double budget_s = 0.3;

double gbps(int64_t bytes, double s) { return double(bytes) / s / 1e9; }

void record(const Row& row) {
  rows.push_back(row);
  std::printf("%-10s %-34s %10.1f KiB %2u thr  %7.2f GB/s  memcpy %7.2f  ratio %5.2f",
              row.kind.c_str(), row.name.c_str(), double(row.bytes) / 1024,
              row.threads, row.dlbridge_gbps, row.memcpy_gbps,
              row.dlbridge_gbps / row.memcpy_gbps);
  if (row.loop_gbps > 0)
    std::printf("  loop %7.2f  vs loop %5.2fx", row.loop_gbps,
                row.dlbridge_gbps / row.loop_gbps);
  std::printf("\n");
  std::fflush(stdout);
}

dlbridge::CopyOptions with_threads(unsigned threads) {
  dlbridge::CopyOptions options;
  options.max_threads = threads;
  return options;
}

void contiguous(int64_t bytes, unsigned threads) {
  Buffer src(bytes), dst(bytes);
  const auto dtype = dlbridge::dtype_of<uint8_t>();
  const auto s = dlbridge::TensorView::from_data(src.data, dtype, {bytes});
  const auto d = dlbridge::TensorView::from_data(dst.data, dtype, {bytes});
  const auto options = with_threads(threads);
  auto t = compare({[&] { dlbridge::copy_into(s, d, options); },
                    [&] { std::memcpy(dst.data, src.data, size_t(bytes)); }},
                   budget_s);
  record({"contiguous", "uint8[n]", bytes, threads, gbps(bytes, t[0]),
          gbps(bytes, t[1]), 0});
}

// n x n row-major into its transpose, row-major: dst[i][j] = src[j][i].
template <typename T>
void transpose(int64_t n, unsigned threads) {
  const int64_t bytes = n * n * int64_t(sizeof(T));
  Buffer src(bytes), dst(bytes);
  const auto dtype = dlbridge::DType{dlbridge::abi::kDLUInt, uint8_t(sizeof(T) * 8), 1};
  const auto s = dlbridge::TensorView::from_data(src.data, dtype, {n, n}, {1, n});
  const auto d = dlbridge::TensorView::from_data(dst.data, dtype, {n, n});
  const auto options = with_threads(threads);
  auto naive = [&] {
    const T* in = reinterpret_cast<const T*>(src.data);
    T* out = reinterpret_cast<T*>(dst.data);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = in[j * n + i];
  };
  auto t = compare({[&] { dlbridge::copy_into(s, d, options); },
                    [&] { std::memcpy(dst.data, src.data, size_t(bytes)); }, naive},
                   budget_s);
  record({"transpose", std::to_string(n) + "x" + std::to_string(n) + " " +
                           std::to_string(sizeof(T) * 8) + "-bit",
          bytes, threads, gbps(bytes, t[0]), gbps(bytes, t[1]), gbps(bytes, t[2])});
}

// A strided slice of a larger float32 matrix into a compact one; bytes are
// those of the result.
void slice(const char* name, int64_t rows_out, int64_t cols_out,
           int64_t row_stride, int64_t col_stride, unsigned threads) {
  const int64_t bytes = rows_out * cols_out * 4;
  const int64_t row_reach = row_stride * (rows_out - 1);
  const int64_t col_reach = col_stride * (cols_out - 1);
  // Element 0 sits past the reach of any negative stride.
  const int64_t origin = std::max<int64_t>(0, -row_reach) + std::max<int64_t>(0, -col_reach);
  Buffer src((1 + std::llabs(row_reach) + std::llabs(col_reach)) * 4), dst(bytes);
  float* first = reinterpret_cast<float*>(src.data) + origin;
  const auto dtype = dlbridge::dtype_of<float>();
  const auto s = dlbridge::TensorView::from_data(first, dtype, {rows_out, cols_out},
                                                 {row_stride, col_stride});
  const auto d = dlbridge::TensorView::from_data(dst.data, dtype, {rows_out, cols_out});
  const auto options = with_threads(threads);
  auto loop = [&] {
    const float* in = first;
    float* out = reinterpret_cast<float*>(dst.data);
    for (int64_t i = 0; i < rows_out; ++i)
      for (int64_t j = 0; j < cols_out; ++j)
        out[i * cols_out + j] = in[i * row_stride + j * col_stride];
  };
  auto t = compare({[&] { dlbridge::copy_into(s, d, options); },
                    [&] { std::memcpy(dst.data, src.data, size_t(bytes)); }, loop},
                   budget_s);
  record({"slice", name, bytes, threads, gbps(bytes, t[0]), gbps(bytes, t[1]),
          gbps(bytes, t[2])});
}

// Where threads start to pay: the same contiguous copy with one thread and
// with all of them forced on (min_bytes_per_thread = 1).
void threshold(int64_t bytes, unsigned all) {
  Buffer src(bytes), dst(bytes);
  const auto dtype = dlbridge::dtype_of<uint8_t>();
  const auto s = dlbridge::TensorView::from_data(src.data, dtype, {bytes});
  const auto d = dlbridge::TensorView::from_data(dst.data, dtype, {bytes});
  const dlbridge::CopyOptions one{1, 1, 1}, many{all, 1, 1};
  const int64_t n = 1024, rows_ = bytes / 4 / n;
  const auto ts = dlbridge::TensorView::from_data(src.data, dlbridge::dtype_of<float>(),
                                                  {rows_, n}, {1, rows_});
  const auto td = dlbridge::TensorView::from_data(dst.data, dlbridge::dtype_of<float>(),
                                                  {rows_, n});
  auto t = compare({[&] { dlbridge::copy_into(s, d, one); },
                    [&] { dlbridge::copy_into(s, d, many); },
                    [&] { dlbridge::copy_into(ts, td, one); },
                    [&] { dlbridge::copy_into(ts, td, many); }},
                   budget_s);
  std::printf("threshold  %10.1f KiB  contiguous 1 thr %7.2f GB/s, %u thr %7.2f GB/s"
              " | transpose 1 thr %7.2f, %u thr %7.2f\n",
              double(bytes) / 1024, gbps(bytes, t[0]), all, gbps(bytes, t[1]),
              gbps(bytes, t[2]), all, gbps(bytes, t[3]));
  rows.push_back({"threshold", "contiguous forced threads", bytes, all,
                  gbps(bytes, t[1]), gbps(bytes, t[0]), 0});
  rows.push_back({"threshold", "transpose forced threads", bytes, all,
                  gbps(bytes, t[3]), gbps(bytes, t[2]), 0});
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

void write_json(const char* path, unsigned all) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::perror(path);
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"machine\": {\"cpu\": \"%s\", \"threads\": %u},\n",
               cpu_model().c_str(), all);
  std::fprintf(f, "  \"compiler\": \"%s\",\n  \"dlbridge\": \"%s\",\n", __VERSION__,
               DLBRIDGE_VERSION_STRING);
  std::fprintf(f, "  \"note\": \"ratio = dlbridge GB/s / memcpy GB/s of the same bytes; "
                  "for threshold rows the baseline is dlbridge on one thread\",\n");
  std::fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "    {\"kind\": \"%s\", \"name\": \"%s\", \"bytes\": %lld, "
                 "\"threads\": %u, \"dlbridge_gbps\": %.4f, \"baseline_gbps\": %.4f, "
                 "\"ratio\": %.4f, \"loop_gbps\": %.4f}%s\n",
                 r.kind.c_str(), r.name.c_str(), (long long)r.bytes, r.threads,
                 r.dlbridge_gbps, r.memcpy_gbps, r.dlbridge_gbps / r.memcpy_gbps,
                 r.loop_gbps, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else json = argv[i];
  }
  if (quick) budget_s = 0.1;
  const unsigned all = dlbridge::detail::resolve_thread_count(0);
  const int64_t max_bytes = quick ? int64_t(64) << 20 : int64_t(1) << 30;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4)
    for (unsigned threads : {1u, all}) contiguous(bytes, threads);
  for (unsigned threads : {1u, all}) {
    transpose<uint8_t>(4096, threads);
    transpose<uint16_t>(4096, threads);
    transpose<float>(4096, threads);
    transpose<double>(4096, threads);
    transpose<float>(512, threads);
  }
  for (unsigned threads : {1u, all}) {
    slice("a[:, ::2] of 4096x8192", 4096, 4096, 8192, 2, threads);
    slice("a[::2, :] of 8192x4096", 4096, 4096, 8192, 1, threads);
    slice("a[:, :-1] of 4096x4097", 4096, 4096, 4097, 1, threads);
    slice("a[::-1, ::-1] of 2048x2048", 2048, 2048, -2048, -1, threads);
  }
  for (int64_t bytes = 64 << 10; bytes <= (int64_t(16) << 20); bytes *= 2)
    threshold(bytes, all);
  if (json != nullptr) write_json(json, all);
  return 0;
}
