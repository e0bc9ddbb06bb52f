// Umbrella header: everything a C++ user of dlbridge needs, floor by floor
// (CONTRIBUTING.md, "The layers"). Not included: buffer_view.hpp and
// platform/shared_memory.hpp (pickles and shared memory), dlpack_compat.hpp
// (needs the official <dlpack/dlpack.h>), and python/ (needs Python).
#pragma once

#include "abi.hpp"
#include "error.hpp"
#include "version.hpp"

#include "allocate.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "exchange_api.hpp"
#include "export.hpp"
#include "layout.hpp"
#include "managed_tensor.hpp"
#include "request.hpp"
#include "tensor_view.hpp"

#include "backend/device_support.hpp"
#include "backend/registry.hpp"

#include "copy/copy.hpp"
#include "copy/transfer.hpp"

#include "exchange/carry_out.hpp"
#include "exchange/plan.hpp"
#include "exchange/plan_convert.hpp"
#include "exchange/plan_export.hpp"
#include "exchange/plan_import.hpp"
