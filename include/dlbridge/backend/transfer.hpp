// Moved to <dlbridge/transfer.hpp>: copying between devices uses the
// backends but is not one. This header stays so that existing includes
// keep compiling.
#pragma once

#include "../transfer.hpp"
