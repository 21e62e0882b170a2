/* FAKE HailoRT header (a test double for loop's tests, not HailoRT): everything is in hailort.hpp. */
#include "hailo/hailort.hpp"
