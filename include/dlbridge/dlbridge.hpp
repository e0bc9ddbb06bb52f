// Umbrella header: everything a C++ user of dlbridge needs.
#pragma once

#include "version.hpp"
#include "abi.hpp"
#include "error.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "layout.hpp"
#include "tensor_view.hpp"
#include "managed_tensor.hpp"
#include "export.hpp"
#include "device_request.hpp"
#include "producer.hpp"
#include "allocate.hpp"
#include "exchange_api.hpp"
#include "copy.hpp"
#include "backend/transfer.hpp"
