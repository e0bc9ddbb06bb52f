// Tensors that leave the process: pickling (protocol 5 out-of-band buffers,
// in-band bytes below 5), copy.copy / copy.deepcopy, and tensors in shared
// memory that other processes on the machine map by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <dlbridge/buffer_view.hpp>
#include <dlbridge/shared_memory.hpp>

#include "bindings.hpp"

namespace dlbridge::python {

// Adds the pickling and sharing methods to dlbridge.Tensor and the
// reconstructors that pickles name to the module; after bind_tensor.
void bind_pickling(nb::module_& m);

// --- shared_memory.cpp
void bind_shared_memory(nb::module_& m);
// The segment of this process that holds all of v's elements, or NULL.
std::shared_ptr<SharedSegment> find_shared_segment(const TensorView& v);
// dlbridge.empty(..., shared=True): a zero-filled compact tensor in a new
// segment; device must be the CPU.
Tensor empty_shared(const std::vector<int64_t>& shape, DType dtype, Device device);
// A tensor over a segment that a pickle named; redeems the pickle's ticket.
Tensor open_shared_tensor(const std::string& name, uint64_t ticket, const BufferLayout& layout);

}  // namespace dlbridge::python
