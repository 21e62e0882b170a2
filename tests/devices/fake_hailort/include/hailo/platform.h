/* FAKE HailoRT header (a test double for loop's tests, not HailoRT): platform bits.
 *
 * Like HailoRT's own platform.h, which includes <winsock2.h> under MSVC, this one includes it when
 * FAKE_HAILORT_SIMULATE_WINDOWS is defined, so a test can put a winsock2.h stand-in (with the
 * min/max macros Windows defines unless NOMINMAX is set) on the include path. */
#ifndef FAKE_HAILO_PLATFORM_H_
#define FAKE_HAILO_PLATFORM_H_

#if defined(FAKE_HAILORT_SIMULATE_WINDOWS)
#include <winsock2.h>
#endif

#define HAILORTAPI __attribute__((visibility("default")))

#endif
