/*
 * LOOPBACK TEST DOUBLE. This is not HailoRT and runs on no Hailo hardware.
 *
 * It implements the ABI declared in shim/hailort_shim.sigs so that the Python binding
 * (loop/devices/sigs.py) and the device (loop/devices/hailort.py) can be exercised for
 * real, through ctypes, without a Hailo device. The tests compile it with the system C
 * compiler into a temporary directory.
 *
 * Its "HEF" is a text file: "LOOPBACK <in_h> <in_w> <in_c> <out_h> <out_w> <out_c>".
 * Anything else is refused with 26, the status HailoRT gives a HEF for another
 * architecture. One uint8 input, one uint8 output; each output byte is a deterministic
 * function of every input byte, so different inputs give different outputs.
 * Timings are measured with a real clock around a real (tiny) computation; they say
 * nothing about any accelerator.
 *
 * Build with -DLOOPBACK_OMIT_HW_LATENCY to drop one symbol (to test the missing-symbol
 * error). Set LOOPBACK_EMIT_WARNING=1 to make open() print HailoRT's USB power warning
 * text to stderr, to test log capture.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

#define BAD_BUFFER 2
#define TEXT_TOO_SMALL 5
#define INVALID_HEF 26
#define QUEUE_SIZE 4

typedef struct {
    unsigned in_shape[3], out_shape[3];
    size_t in_bytes, out_bytes;
    double hw_latency_ms;
} Loopback;

static char last_error[256];

static int fail(int status, const char *what) {
    snprintf(last_error, sizeof last_error, "loopback: %s (status %d)", what, status);
    return status;
}

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The "network": a checksum of the input, spread over the output bytes. */
static void compute(const Loopback *lb, const uint8_t *in, uint8_t *out) {
    uint32_t acc = 2166136261u;
    for (size_t i = 0; i < lb->in_bytes; i++) acc = (acc ^ in[i]) * 16777619u;
    for (size_t j = 0; j < lb->out_bytes; j++) out[j] = (uint8_t)((acc >> (j % 24)) + j * 31u + in[j % lb->in_bytes]);
}

static int write_text(const char *text, char *buf, size_t capacity, size_t *needed) {
    size_t n = strlen(text) + 1;
    if (needed) *needed = n;
    if (!buf || capacity < n) return fail(TEXT_TOO_SMALL, "text buffer too small");
    memcpy(buf, text, n);
    return 0;
}

static int check(size_t expected, void **bufs, const size_t *sizes, size_t n, int exact, const char *what) {
    if (n != 1 || !bufs || !sizes || !bufs[0]) return fail(BAD_BUFFER, what);
    if (sizes[0] < expected || (exact && sizes[0] != expected)) return fail(BAD_BUFFER, what);
    return 0;
}

EXPORT int loop_hrt_open(const char *hef_path, const char *options, void **handle) {
    (void)options;
    unsigned s[6];
    FILE *f = fopen(hef_path, "rb");
    if (!f) return fail(13, "cannot open HEF file");
    int got = fscanf(f, "LOOPBACK %u %u %u %u %u %u", &s[0], &s[1], &s[2], &s[3], &s[4], &s[5]);
    fclose(f);
    if (got != 6) return fail(INVALID_HEF, "not a loopback HEF");
    if (getenv("LOOPBACK_EMIT_WARNING")) {
        fprintf(stderr, "[HailoRT] [warning] USB-C source electrical current advertised: 1.5A.\n");
        fflush(stderr);
    }
    Loopback *lb = calloc(1, sizeof *lb);
    memcpy(lb->in_shape, s, sizeof lb->in_shape);
    memcpy(lb->out_shape, s + 3, sizeof lb->out_shape);
    lb->in_bytes = (size_t)s[0] * s[1] * s[2];
    lb->out_bytes = (size_t)s[3] * s[4] * s[5];
    lb->hw_latency_ms = NAN;
    *handle = lb;
    return 0;
}

EXPORT int loop_hrt_layout(void *handle, char *json, size_t capacity, size_t *needed) {
    Loopback *lb = handle;
    char text[512];
    snprintf(text, sizeof text,
             "{\"inputs\": [{\"name\": \"loopback/input0\", \"shape\": [%u, %u, %u], \"frame_bytes\": %zu, "
             "\"dtype\": \"uint8\", \"quant_count\": 1, \"is_nms\": false, \"scale\": 0.0078125, \"zero_point\": 128}], "
             "\"outputs\": [{\"name\": \"loopback/output0\", \"shape\": [%u, %u, %u], \"frame_bytes\": %zu, "
             "\"dtype\": \"uint8\", \"quant_count\": 1, \"is_nms\": false, \"scale\": 0.5, \"zero_point\": 3}], "
             "\"async_queue_size\": %d}",
             lb->in_shape[0], lb->in_shape[1], lb->in_shape[2], lb->in_bytes,
             lb->out_shape[0], lb->out_shape[1], lb->out_shape[2], lb->out_bytes, QUEUE_SIZE);
    return write_text(text, json, capacity, needed);
}

EXPORT int loop_hrt_infer(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                          void **outputs, size_t *output_sizes, size_t n_outputs, unsigned timeout_ms) {
    (void)timeout_ms;
    Loopback *lb = handle;
    if (check(lb->in_bytes, inputs, input_sizes, n_inputs, 1, "input buffer does not match the frame")) return BAD_BUFFER;
    if (check(lb->out_bytes, outputs, output_sizes, n_outputs, 0, "output buffer smaller than the frame")) return BAD_BUFFER;
    compute(lb, inputs[0], outputs[0]);
    return 0;
}

EXPORT int loop_hrt_pipelined(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                              uint64_t count, unsigned depth, double *elapsed_s, double *hw_latency_ms) {
    Loopback *lb = handle;
    (void)depth; /* one thread: the loopback has no queue to fill */
    if (check(lb->in_bytes, inputs, input_sizes, n_inputs, 1, "input buffer does not match the frame")) return BAD_BUFFER;
    uint8_t *out = malloc(lb->out_bytes);
    double start = now_s();
    for (uint64_t i = 0; i < count; i++) compute(lb, inputs[0], out);
    *elapsed_s = now_s() - start;
    free(out);
    lb->hw_latency_ms = count ? *elapsed_s * 1000.0 / (double)count : NAN;
    *hw_latency_ms = lb->hw_latency_ms;
    return 0;
}

#ifndef LOOPBACK_OMIT_HW_LATENCY
EXPORT int loop_hrt_hw_latency(void *handle, double *hw_latency_ms) {
    *hw_latency_ms = ((Loopback *)handle)->hw_latency_ms;
    return 0;
}
#endif

/* No chip, so no temperature: null, never invented. */
EXPORT int loop_hrt_health(void *handle, char *json, size_t capacity, size_t *needed) {
    (void)handle;
    return write_text("{\"device_path\": \"loopback/0\", \"temperature_c\": null, \"serial\": \"LOOPBACK\"}",
                      json, capacity, needed);
}

EXPORT size_t loop_hrt_last_error(char *text, size_t capacity) {
    size_t n = strlen(last_error);
    if (text && capacity) {
        size_t k = n < capacity - 1 ? n : capacity - 1;
        memcpy(text, last_error, k);
        text[k] = '\0';
    }
    return n;
}

EXPORT int loop_hrt_close(void *handle) {
    free(handle);
    return 0;
}
