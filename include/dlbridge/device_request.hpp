// Deprecated include path, kept for one release: whether a device is here,
// and the errors that say why not, are now <dlbridge/backend/device_support.hpp>
// (served_backend), beside the registry that answers; the message sentence
// is in <dlbridge/device.hpp>. Include that instead; this forwarder goes away
// in the next release.
#pragma once

#include "backend/device_support.hpp"
