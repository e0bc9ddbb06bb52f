// dlbridge._core._testing: capsules built to order, with a counting deleter,
// so the Python suite can feed hostile or unusual tensors to the consumer
// and check that every deleter runs exactly once.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "entry_points.hpp"

namespace dlbridge::python {

namespace {

std::atomic<int64_t> deleter_calls{0};

template <typename Managed>
struct TestTensor {
  Managed managed{};
  std::vector<int64_t> shape, strides;
  std::vector<unsigned char> data;
  std::string name;

  static void destroy(Managed* self) noexcept {
    deleter_calls.fetch_add(1);
    delete static_cast<TestTensor*>(self->manager_ctx);
  }
};

template <typename Managed>
TestTensor<Managed>* build(std::optional<std::vector<int64_t>> shape,
                           std::optional<std::vector<int64_t>> strides,
                           std::optional<int32_t> ndim, nb::tuple dtype, nb::tuple device,
                           bool null_data, uint64_t byte_offset, int64_t data_bytes) {
  auto* t = new TestTensor<Managed>;
  t->data.assign(size_t(data_bytes), 0);
  abi::DLTensor& d = t->managed.dl_tensor;
  d.data = null_data ? nullptr : t->data.data();
  d.device = {DeviceType(nb::cast<int32_t>(device[0])), nb::cast<int32_t>(device[1])};
  d.dtype = {nb::cast<uint8_t>(dtype[0]), nb::cast<uint8_t>(dtype[1]), nb::cast<uint16_t>(dtype[2])};
  if (shape) t->shape = *shape;
  if (strides) t->strides = *strides;
  d.ndim = ndim ? *ndim : int32_t(t->shape.size());
  d.shape = shape ? t->shape.data() : nullptr;
  d.strides = strides ? t->strides.data() : nullptr;
  d.byte_offset = byte_offset;
  t->managed.manager_ctx = t;
  t->managed.deleter = &TestTensor<Managed>::destroy;
  return t;
}

template <typename Managed>
void free_unconsumed(PyObject* capsule) {
  const char* name = PyCapsule_GetName(capsule);
  if (name == nullptr || std::string(name).rfind("used_", 0) == 0) return;
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

nb::object make_capsule_for_test(std::optional<std::vector<int64_t>> shape,
                                 std::optional<std::vector<int64_t>> strides,
                                 std::optional<int32_t> ndim, nb::tuple dtype, nb::tuple device,
                                 bool versioned, nb::tuple version, uint64_t flags,
                                 std::optional<std::string> name, bool null_data,
                                 uint64_t byte_offset, int64_t data_bytes) {
  PyObject* capsule = nullptr;
  if (versioned) {
    auto* t = build<abi::DLManagedTensorVersioned>(shape, strides, ndim, dtype, device, null_data,
                                                   byte_offset, data_bytes);
    t->managed.version = {nb::cast<uint32_t>(version[0]), nb::cast<uint32_t>(version[1])};
    t->managed.flags = flags;
    t->name = name.value_or("dltensor_versioned");
    capsule = PyCapsule_New(&t->managed, t->name.c_str(),
                            free_unconsumed<abi::DLManagedTensorVersioned>);
  } else {
    auto* t = build<abi::DLManagedTensor>(shape, strides, ndim, dtype, device, null_data,
                                          byte_offset, data_bytes);
    t->name = name.value_or("dltensor");
    capsule = PyCapsule_New(&t->managed, t->name.c_str(), free_unconsumed<abi::DLManagedTensor>);
  }
  if (capsule == nullptr) throw nb::python_error();
  return nb::steal(capsule);
}

// Exchange tables whose managed_tensor_to_py_object_no_sync builds a
// dlbridge.Tensor or fails in each way a library may: after running the
// deleter, without running it (torch), or without setting an error. They
// let the suite check that convert frees a handed-over tensor exactly once.
enum class BuilderMode { wrap, fail_after_deleting, fail_keeping, fail_silently };

std::atomic<int64_t> builder_calls{0};

template <BuilderMode mode>
int build_array(abi::DLManagedTensorVersioned* tensor, void** out) {
  builder_calls.fetch_add(1);
  if (mode == BuilderMode::wrap) {
    return python_boundary<int>(-1, [&] {
      *out = wrap_tensor(tensor_adopting(tensor)).release().ptr();
      return 0;
    });
  }
  if (mode == BuilderMode::fail_after_deleting) tensor->deleter(tensor);
  if (mode != BuilderMode::fail_silently) PyErr_SetString(PyExc_RuntimeError, "builder refused");
  return -1;
}

int refuse_export(void*, abi::DLManagedTensorVersioned**) {
  PyErr_SetString(PyExc_RuntimeError, "this test table exports nothing");
  return -1;
}

template <BuilderMode mode>
nb::object builder_table() {
  static abi::DLPackExchangeAPI table = [] {
    abi::DLPackExchangeAPI api{};
    api.header.version = {DLBRIDGE_DLPACK_MAJOR, DLBRIDGE_DLPACK_MINOR};
    api.managed_tensor_from_py_object_no_sync = &refuse_export;
    api.managed_tensor_to_py_object_no_sync = &build_array<mode>;
    return api;
  }();
  return nb::steal(PyCapsule_New(&table, "dlpack_exchange_api", nullptr));
}

nb::object builder_table_for(const std::string& mode) {
  if (mode == "wrap") return builder_table<BuilderMode::wrap>();
  if (mode == "fail_after_deleting") return builder_table<BuilderMode::fail_after_deleting>();
  if (mode == "fail_keeping") return builder_table<BuilderMode::fail_keeping>();
  if (mode == "fail_silently") return builder_table<BuilderMode::fail_silently>();
  throw nb::value_error("unknown builder mode");
}

// Builtin functions that break the calling contract, for the callers that
// enter builtins directly (py::call_one_arg): NULL with no exception, and a
// result with an exception set.
PyObject* null_without_error(PyObject*, PyObject*) { return nullptr; }

PyObject* result_beside_error(PyObject*, PyObject* arg) {
  PyErr_SetString(PyExc_ValueError, "raised beside a result");
  return Py_NewRef(arg);
}

PyMethodDef misbehaving_defs[] = {
    {"null_without_error", null_without_error, METH_O, "Returns NULL and sets no exception."},
    {"result_beside_error", result_beside_error, METH_O, "Returns its argument with ValueError set."},
};

}  // namespace

void bind_testing(nb::module_& m) {
  nb::module_ t = m.def_submodule("_testing", "Test helpers; not part of the public API.");
  t.def("make_capsule", &make_capsule_for_test, nb::kw_only(),
        nb::arg("shape") = std::vector<int64_t>{2, 3}, nb::arg("strides") = nb::none(),
        nb::arg("ndim") = nb::none(), nb::arg("dtype") = nb::make_tuple(2, 32, 1),
        nb::arg("device") = nb::make_tuple(1, 0), nb::arg("versioned") = true,
        nb::arg("version") = nb::make_tuple(1, 3), nb::arg("flags") = 0,
        nb::arg("name") = nb::none(), nb::arg("null_data") = false, nb::arg("byte_offset") = 0,
        nb::arg("data_bytes") = 4096,
        "A capsule over a zeroed buffer with a counting deleter. The capsule "
        "name is stored with the tensor, so a renamed capsule keeps a valid name.");
  t.def("deleter_calls", []() { return deleter_calls.load(); });
  t.def("builder_table", &builder_table_for, nb::arg("mode"),
        "A 'dlpack_exchange_api' capsule whose managed_tensor_to_py_object_no_sync "
        "wraps the tensor in a dlbridge.Tensor (mode 'wrap') or fails: "
        "'fail_after_deleting', 'fail_keeping', 'fail_silently'.");
  t.def("builder_calls", []() { return builder_calls.load(); });
  for (PyMethodDef& def : misbehaving_defs) add_function(t, &def);
}

}  // namespace dlbridge::python
