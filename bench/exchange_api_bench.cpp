// Cost of the DLPack 1.3 C exchange API as a C/C++ consumer pays it: the
// function pointers of type(obj).__dlpack_c_exchange_api__ called in a tight
// C++ loop with the GIL held, no Python bytecode in between. dlbridge's
// table against PyTorch's, side by side, interleaved, median of batches.
//
//   exchange_api_bench [--quick] [--python EXE] [results.json]
//
// EXE is the interpreter whose environment (venv, site-packages) to embed;
// by default the one CMake found. Writes JSON when a path is given.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/abi.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace abi = dlbridge::abi;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  if (PyErr_Occurred()) PyErr_Print();
  std::fprintf(stderr, "exchange_api_bench: %s\n", what);
  std::exit(1);
}

// Keeps a result alive as far as the optimiser can tell, so that a loop body
// whose only effect is a pointer read is not removed.
template <typename T>
void keep(T const& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

struct Case {
  std::string label;  // e.g. "dlbridge.Tensor via dlbridge's table"
  std::string object_type, table_type, op;
  double target_ns;   // 0 when issue 5 sets no target for this row
  std::function<void(int64_t)> loop;  // runs the operation n times
  std::vector<double> ns;
  int64_t per_batch = 0;
};

double seconds_of(const std::function<void(int64_t)>& loop, int64_t n) {
  const auto t0 = Clock::now();
  loop(n);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const abi::DLPackExchangeAPI* table_of(PyObject* object) {
  PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(object)),
                                             "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  void* pointer = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);  // the table is static in its library; the capsule only names it
  if (pointer == nullptr) PyErr_Clear();
  return static_cast<const abi::DLPackExchangeAPI*>(pointer);
}

// One call of each entry before timing: a table that fails here is reported
// as unsupported for that object rather than timed.
bool managed_works(const abi::DLPackExchangeAPI* api, PyObject* object) {
  abi::DLManagedTensorVersioned* m = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object, &m) != 0 || m == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool ok = m->dl_tensor.ndim == 2 && m->dl_tensor.shape[0] == 8;
  if (m->deleter) m->deleter(m);
  return ok;
}

bool borrowed_works(const abi::DLPackExchangeAPI* api, PyObject* object) {
  if (api->dltensor_from_py_object_no_sync == nullptr) return false;
  abi::DLTensor dl{};
  if (api->dltensor_from_py_object_no_sync(object, &dl) != 0) {
    PyErr_Clear();
    return false;
  }
  return dl.ndim == 2 && dl.shape[0] == 8;
}

void add_cases(std::vector<Case>& cases, const std::string& object_type,
               const std::string& table_type, PyObject* object,
               const abi::DLPackExchangeAPI* api, bool primary) {
  const std::string via = " via " + table_type + "'s table";
  if (managed_works(api, object)) {
    cases.push_back({object_type + via, object_type, table_type, "managed_import_delete",
                     primary ? 50.0 : 0.0,
                     [api, object](int64_t n) {
                       for (int64_t i = 0; i < n; ++i) {
                         abi::DLManagedTensorVersioned* m = nullptr;
                         api->managed_tensor_from_py_object_no_sync(object, &m);
                         keep(m->dl_tensor.data);
                         m->deleter(m);
                       }
                     }, {}, 0});
    if (api->managed_tensor_to_py_object_no_sync != nullptr)
      cases.push_back({object_type + via, object_type, table_type, "managed_to_object_roundtrip",
                       0.0,
                       [api, object](int64_t n) {
                         for (int64_t i = 0; i < n; ++i) {
                           abi::DLManagedTensorVersioned* m = nullptr;
                           api->managed_tensor_from_py_object_no_sync(object, &m);
                           void* back = nullptr;
                           api->managed_tensor_to_py_object_no_sync(m, &back);
                           Py_DECREF(static_cast<PyObject*>(back));
                         }
                       }, {}, 0});
  }
  if (borrowed_works(api, object))
    cases.push_back({object_type + via, object_type, table_type, "borrowed_dltensor",
                     primary ? 20.0 : 0.0,
                     [api, object](int64_t n) {
                       for (int64_t i = 0; i < n; ++i) {
                         abi::DLTensor dl;
                         api->dltensor_from_py_object_no_sync(object, &dl);
                         keep(dl.data);
                       }
                     }, {}, 0});
}

// The path without the table, for scale: obj.__dlpack__(max_version=(1, 3))
// through vectorcall and the capsule freed unconsumed (its destructor calls
// the deleter), i.e. what a C consumer of the Python protocol pays at least.
void add_protocol_case(std::vector<Case>& cases, const std::string& object_type,
                       PyObject* object) {
  static PyObject* name = PyUnicode_InternFromString("__dlpack__");
  static PyObject* kwnames = Py_BuildValue("(s)", "max_version");
  static PyObject* version = Py_BuildValue("(ii)", 1, 3);
  PyObject* args[] = {object, version};
  PyObject* probe = PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
  if (probe == nullptr) {
    PyErr_Clear();
    return;
  }
  Py_DECREF(probe);
  cases.push_back({object_type + " via __dlpack__", object_type, "__dlpack__ (Python protocol)",
                   "dunder_dlpack_capsule", 0.0,
                   [object](int64_t n) {
                     PyObject* call_args[] = {object, version};
                     for (int64_t i = 0; i < n; ++i)
                       Py_DECREF(PyObject_VectorcallMethod(
                           name, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames));
                   }, {}, 0});
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string python_string(PyObject* globals, const char* name) {
  PyObject* value = PyDict_GetItemString(globals, name);  // borrowed
  const char* text = value ? PyUnicode_AsUTF8(value) : nullptr;
  if (text == nullptr) die(name);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  const char* python = DLBRIDGE_BENCH_PYTHON;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--python") == 0 && i + 1 < argc) python = argv[++i];
    else json_path = argv[i];
  }

  // Naming the venv's interpreter as the program makes the embedded Python
  // find pyvenv.cfg and run its .pth files, as `python` itself would; the
  // editable dlbridge install is one of those .pth files.
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  if (PyStatus_Exception(PyConfig_SetBytesString(&config, &config.program_name, python)))
    die("cannot set program_name");
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) Py_ExitStatusException(status);

  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyDict_SetItemString(globals, "bench_dir", PyUnicode_FromString(DLBRIDGE_BENCH_DIR));
  const char* setup = R"PY(
import json, sys
sys.path.insert(0, bench_dir)
import benchlib
import numpy as np
import dlbridge
a = np.arange(64, dtype=np.float32).reshape(8, 8)
d = dlbridge.from_dlpack(a)
try:
    import torch
    t = torch.arange(64, dtype=torch.float32).reshape(8, 8)
except ImportError:
    t = None
machine = json.dumps(benchlib.machine_info())
)PY";
  PyObject* done = PyRun_String(setup, Py_file_input, globals, globals);
  if (done == nullptr) die("setup failed");
  Py_DECREF(done);

  PyObject* d = PyDict_GetItemString(globals, "d");
  PyObject* a = PyDict_GetItemString(globals, "a");
  PyObject* t = PyDict_GetItemString(globals, "t");
  const abi::DLPackExchangeAPI* mine = table_of(d);
  if (mine == nullptr) die("dlbridge.Tensor has no __dlpack_c_exchange_api__");
  const abi::DLPackExchangeAPI* torch_api = (t != nullptr && t != Py_None) ? table_of(t) : nullptr;

  std::vector<Case> cases;
  add_cases(cases, "dlbridge.Tensor", "dlbridge.Tensor", d, mine, true);
  // dlbridge's table also takes any array-like, imported zero-copy first.
  add_cases(cases, "numpy.ndarray", "dlbridge.Tensor", a, mine, false);
  if (torch_api != nullptr) add_cases(cases, "torch.Tensor", "torch.Tensor", t, torch_api, false);
  add_protocol_case(cases, "dlbridge.Tensor", d);
  add_protocol_case(cases, "numpy.ndarray", a);
  if (torch_api != nullptr) add_protocol_case(cases, "torch.Tensor", t);

  const double batch_s = quick ? 1e-4 : 1e-3;
  const int rounds = quick ? 3 : 201;
  for (Case& c : cases) {
    int64_t n = 16;
    while (seconds_of(c.loop, n) < batch_s / 4) n *= 4;  // also warms caches and pools
    c.per_batch = std::max<int64_t>(1, int64_t(double(n) * batch_s / seconds_of(c.loop, n)));
  }
  // Round-robin with a rotating start, as in benchlib.compare.
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < cases.size(); ++k) {
      Case& c = cases[(r + k) % cases.size()];
      c.ns.push_back(seconds_of(c.loop, c.per_batch) / double(c.per_batch) * 1e9);
    }

  std::string machine = python_string(globals, "machine");
  std::string rows;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    std::sort(c.ns.begin(), c.ns.end());
    const double median = c.ns[c.ns.size() / 2];
    std::printf("%-44s %-28s %8.1f ns%s\n", c.label.c_str(), c.op.c_str(), median,
                c.target_ns > 0 ? (median <= c.target_ns ? "  (target met)" : "  (target missed)") : "");
    char row[768];
    std::snprintf(row, sizeof row,
                  "    {\"object\": \"%s\", \"table\": \"%s\", \"op\": \"%s\", \"ns\": %.2f, "
                  "\"ns_min\": %.2f, \"batches\": %zu, \"calls_per_batch\": %lld, \"target_ns\": %s}%s\n",
                  json_escape(c.object_type).c_str(), json_escape(c.table_type).c_str(),
                  c.op.c_str(), median, c.ns.front(), c.ns.size(), (long long)c.per_batch,
                  c.target_ns > 0 ? std::to_string(c.target_ns).c_str() : "null",
                  i + 1 < cases.size() ? "," : "");
    rows += row;
  }
  auto version = [](const abi::DLPackExchangeAPI* api) {
    return std::to_string(api->header.version.major) + "." + std::to_string(api->header.version.minor);
  };
  if (json_path != nullptr) {
    std::FILE* f = std::fopen(json_path, "w");
    if (f == nullptr) die("cannot open the output file");
    std::fprintf(f, "{\n  \"benchmark\": \"exchange_api\",\n  \"machine\": %s,\n", machine.c_str());
    std::fprintf(f, "  \"compiler\": \"%s\",\n", json_escape(__VERSION__).c_str());
    std::fprintf(f, "  \"tables\": {\"dlbridge.Tensor\": \"%s\"%s%s%s},\n", version(mine).c_str(),
                 torch_api ? ", \"torch.Tensor\": \"" : "",
                 torch_api ? version(torch_api).c_str() : "", torch_api ? "\"" : "");
    std::fprintf(f, "  \"settings\": {\"batch_s\": %g, \"rounds\": %d, \"quick\": %s, "
                    "\"shape\": [8, 8], \"dtype\": \"float32\"},\n",
                 batch_s, rounds, quick ? "true" : "false");
    std::fprintf(f, "  \"note\": \"ns per tensor, median of interleaved batches, GIL held, "
                    "called from a C++ loop; managed_import_delete = "
                    "managed_tensor_from_py_object_no_sync + deleter; borrowed_dltensor = "
                    "dltensor_from_py_object_no_sync; managed_to_object_roundtrip adds "
                    "managed_tensor_to_py_object_no_sync + Py_DECREF; dunder_dlpack_capsule = "
                    "obj.__dlpack__(max_version=(1, 3)) + capsule release, for scale\",\n");
    std::fprintf(f, "  \"results\": [\n%s  ]\n}\n", rows.c_str());
    std::fclose(f);
  }
  // Results are written before finalisation: a library that misbehaves at
  // shutdown must not cost the measurements.
  Py_DECREF(globals);
  return Py_FinalizeEx() < 0 ? 1 : 0;
}
