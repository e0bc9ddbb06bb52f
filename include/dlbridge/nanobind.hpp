// Deprecated include path, kept for one release: the header is now
// <dlbridge/python/nanobind.hpp> (what extension authors compile against Python
// lives in include/dlbridge/python/). Include that instead; this forwarder
// goes away in the next release.
#pragma once

#include "python/nanobind.hpp"
