// The byte swap of data in the byte order this machine does not use (NumPy's
// '>' arrays): DLPack has no byte order, so plan_convert plans one copy into
// dlbridge's own buffer (ConvertPlan::swap_bytes) and this swaps it there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../abi.hpp"
#include "../tensor_view.hpp"

namespace dlbridge {

// Reverses the bytes of every value of a compact tensor in place: of each
// element, or of each half of a complex one.
inline void swap_byte_order(const TensorView& compact) noexcept {
  const DType dtype = compact.dtype();
  const bool complex = dtype.code == abi::kDLComplex;
  const size_t width = size_t(dtype.bits) / 8 / (complex ? 2 : 1);
  if (width < 2) return;
  const size_t values = size_t(compact.size()) * dtype.lanes * (complex ? 2 : 1);
  auto* p = static_cast<unsigned char*>(compact.data());
  for (size_t i = 0; i < values; ++i, p += width) std::reverse(p, p + width);
}

}  // namespace dlbridge
