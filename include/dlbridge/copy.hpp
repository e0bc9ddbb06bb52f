// Deprecated include path, kept for one release: the header is now
// <dlbridge/copy/copy.hpp> (the copy engine lives in include/dlbridge/copy/).
// Include that instead; this forwarder goes away in the next release.
#pragma once

#include "copy/copy.hpp"
