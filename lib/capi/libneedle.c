/* libneedle.so is the core library's objects (needle_capi.cpp among them); this file only gives
 * the shared-library target a source of its own. */
#include "capi/needle.h"
