#include <dlbridge/dlbridge.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <vector>

namespace dl = dlbridge;

int main() {
  // Producer: C++-owned memory, shared with the export until the consumer
  // calls its deleter.
  auto data = std::make_shared<std::vector<float>>(6, 0.5f);
  auto view = dl::TensorView::from_data(data->data(), dl::dtype_of<float>(), {2, 3});

  // The consumer asked for max_version=(1, 3): it gets a versioned struct.
  auto format = dl::negotiate_format(dl::abi::DLPackVersion{1, 3});
  dl::abi::DLManagedTensorVersioned* handed =
      dl::export_tensor(view, data, DLBRIDGE_FLAG_READ_ONLY, format).release_versioned();

  // Consumer: validate and take ownership; the deleter runs when tensor dies.
  dl::ManagedTensor tensor = dl::ManagedTensor::adopt(handed);
  const dl::TensorView& t = tensor.view();
  std::cout << "shape (" << t.shape(0) << ", " << t.shape(1) << "), "
            << dl::dtype_name(t.dtype()) << ", " << dl::to_string(t.device())
            << (t.readonly() ? ", read-only\n" : "\n");

  // A legacy consumer (no max_version) cannot be told the data is read-only.
  try {
    dl::export_tensor(view, data, DLBRIDGE_FLAG_READ_ONLY, dl::negotiate_format(std::nullopt));
    return 1;  // not reached: read-only data never leaves as legacy
  } catch (const dl::Error& e) {
    std::cout << "legacy request: " << e.code_name() << "\n";
  }
}
