// Umbrella header: everything a C++ user of dlbridge needs.
#pragma once

#include "version.hpp"
#include "abi.hpp"
#include "error.hpp"
#include "device.hpp"
#include "dtype.hpp"
