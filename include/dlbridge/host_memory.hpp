// Deprecated include path, kept for one release: the header is now
// <dlbridge/platform/host_memory.hpp> (what the core asks of the operating
// system lives in include/dlbridge/platform/). Include that instead; this
// forwarder goes away in the next release.
#pragma once

#include "platform/host_memory.hpp"
