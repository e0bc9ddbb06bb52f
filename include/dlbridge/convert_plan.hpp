// Deprecated include path, kept for one release: the header is now
// <dlbridge/exchange/plan_convert.hpp> (the plans of an exchange live in
// include/dlbridge/exchange/). Include that instead; this forwarder goes away
// in the next release.
#pragma once

#include "exchange/plan_convert.hpp"
