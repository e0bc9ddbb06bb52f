// Settings (from the environment, changeable through the control API),
// fault injection and counters.
#include <cstdlib>
#include <random>

#include "cudasim.h"
#include "sim_state.hpp"

namespace cudasim {
namespace {

long env_number(const char* name, long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return (*end == '\0' && value >= 0) ? value : fallback;
}

struct Control {
  std::mutex mutex;
  const int devices = int(env_number("CUDASIM_DEVICES", 2));
  const size_t device_bytes = size_t(env_number("CUDASIM_DEVICE_MIB", 256)) << 20;
  unsigned delay_us = unsigned(env_number("CUDASIM_DELAY_US", 300));
  unsigned jitter_us = unsigned(env_number("CUDASIM_JITTER_US", 300));
  std::minstd_rand random{12345};
  std::atomic<bool> ignore_waits{env_number("CUDASIM_IGNORE_STREAM_WAITS", 0) != 0};
  std::atomic<bool> old_driver{false};
  struct Fault {
    cudaError_t error;
    int times;
  };
  std::map<std::string, Fault> faults;
  std::map<std::string, long long> counts;
};

Control& control() {
  static Control* c = new Control();  // never destroyed: workers may count at exit
  return *c;
}

}  // namespace

int device_count() { return control().devices; }
size_t device_bytes() { return control().device_bytes; }
bool ignore_stream_waits() { return control().ignore_waits; }
bool insufficient_driver() { return control().old_driver; }

unsigned next_delay_us() {
  Control& c = control();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.delay_us + (c.jitter_us ? unsigned(c.random() % c.jitter_us) : 0);
}

cudaError_t injected(const char* function) {
  Control& c = control();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.faults.find(function);
  if (it == c.faults.end()) return cudaSuccess;
  const cudaError_t error = it->second.error;
  if (--it->second.times <= 0) c.faults.erase(it);
  return error;
}

void count(const std::string& what, long long n) {
  Control& c = control();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.counts[what] += n;
}

}  // namespace cudasim

using cudasim::control;

extern "C" {

void cudasim_set_delay(unsigned delay_us, unsigned jitter_us) {
  std::lock_guard<std::mutex> lock(control().mutex);
  control().delay_us = delay_us;
  control().jitter_us = jitter_us;
}

void cudasim_fail_next(const char* function, int error, int times) {
  std::lock_guard<std::mutex> lock(control().mutex);
  if (times <= 0) control().faults.erase(function);
  else control().faults[function] = {cudaError_t(error), times};
}

void cudasim_set_insufficient_driver(int on) { control().old_driver = on != 0; }
void cudasim_set_ignore_stream_waits(int on) { control().ignore_waits = on != 0; }

long long cudasim_count(const char* what) {
  std::lock_guard<std::mutex> lock(control().mutex);
  auto it = control().counts.find(what);
  return it == control().counts.end() ? 0 : it->second;
}

void cudasim_reset_counts(void) {
  std::lock_guard<std::mutex> lock(control().mutex);
  control().counts.clear();
}

}  // extern "C"
