// Deprecated include path, kept for one release: the header is now
// <dlbridge/copy/transfer.hpp> (the copy engine, copies between devices
// included, lives in include/dlbridge/copy/). Include that instead; this
// forwarder goes away in the next release.
#pragma once

#include "copy/transfer.hpp"
