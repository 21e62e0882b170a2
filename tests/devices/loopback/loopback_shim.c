/*
 * LOOPBACK TEST DOUBLE. This is not HailoRT and runs on no Hailo hardware.
 *
 * It implements the ABI declared in shim/hailort_shim.sigs (version 4) so that the Python
 * binding (loop/hailort/sigs.py, loop/hailort/shim.py) and the device (loop/devices/hailort.py) can be
 * exercised for real, through ctypes, without a Hailo device. The tests compile it with the
 * system C compiler into a temporary directory. (The real shim's C++ is exercised separately,
 * built over a fake HailoRT: tests/devices/fake_hailort.)
 *
 * Its "HEF" is a text file: "LOOPBACK <in_h> <in_w> <in_c> <out_h> <out_w> <out_c> [planes=N]
 * [badquant] [seed=HEX]" (only its first line is read). "LOOPBACK-ARCH <name>" is refused with 93,
 * the status HailoRT gives a HEF compiled for another architecture; anything else with 26 (not a
 * HEF). One uint8 input, one uint8 output; each output byte is a deterministic function of every
 * input byte and of the seed (0 when absent): the DFC's test double writes the CRC of the params a
 * HEF was compiled from there, so two HEFs of different params compute differently. planes=N (N > 1) declares a
 * multi-planar input: asked for hw_latency=1 it opens without it and says why in the layout's
 * notes, as the shim does. badquant reports the output as uint8 with scale 0 (HailoRT's
 * INVALID_QUANT_INFO), which a correct shim never does: it checks that Python refuses it.
 * Options understood: hw_latency, device_id (only "loopback/0" exists: others give 2, as
 * HailoRT's VDevice does). Sessions and holds (loop_hrt_device_acquire) of one process share its
 * one device whatever their group_id, as the shim's one VDevice per process; refusals between
 * processes are the fake HailoRT's to show (tests/devices/fake_hailort).
 * Timings are measured with a real clock around a real (tiny) computation; they say nothing
 * about any accelerator.
 *
 * Build with -DLOOPBACK_OMIT_HW_LATENCY to drop one symbol (to test the missing-symbol
 * error). Set LOOPBACK_EMIT_WARNING=1 to make open() print HailoRT's USB power warning text to
 * stderr, to test log capture; LOOPBACK_HEALTH_NUL=1 to put a NUL inside the health text, as
 * the first shim did with a board name. loopback_open_handles() and loopback_device_holds() (not in
 * the .sigs) count the sessions not yet closed and the holds not yet released.
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

#define BAD_BUFFER 1000
#define TEXT_TOO_SMALL 1001
#define BAD_ARGUMENT 1002
#define INVALID_ARGUMENT 2
#define INVALID_HEF 26
#define HEF_NOT_COMPATIBLE 93
#define QUEUE_SIZE 4

typedef struct {
    unsigned in_shape[3], out_shape[3];
    size_t in_bytes, out_bytes;
    double hw_latency_ms;
    int hw_latency, bad_quant;
    uint32_t seed;
    char note[200];
} Loopback;

static _Thread_local char last_error[256];
static int open_handles;
static int device_holds;

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
    uint32_t acc = 2166136261u ^ lb->seed;
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

/* "key=value;..." -> value of key, or "" */
static void option(const char *options, const char *key, char *out, size_t size) {
    out[0] = '\0';
    size_t klen = strlen(key);
    for (const char *p = options ? options : ""; *p; ) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t n = len - klen - 1 < size - 1 ? len - klen - 1 : size - 1;
            memcpy(out, p + klen + 1, n);
            out[n] = '\0';
        }
        p += len + (end ? 1 : 0);
    }
}

static int read_hef(const char *hef_path, unsigned s[6], int *planes, int *bad_quant, uint32_t *seed) {
    char head[32] = "", tail[128] = "";
    FILE *f = fopen(hef_path, "rb");
    if (!f) return fail(13, "cannot open HEF file");
    int got = fscanf(f, "%31s", head);
    if (got == 1 && strcmp(head, "LOOPBACK-ARCH") == 0) {
        fclose(f);
        return fail(HEF_NOT_COMPATIBLE, "HEF compiled for another architecture");
    }
    got = got == 1 && strcmp(head, "LOOPBACK") == 0 ?
          fscanf(f, "%u %u %u %u %u %u", &s[0], &s[1], &s[2], &s[3], &s[4], &s[5]) : 0;
    size_t n = fread(tail, 1, sizeof tail - 1, f);
    tail[n] = '\0';
    fclose(f);
    if (got != 6) return fail(INVALID_HEF, "not a loopback HEF");
    char *eol = strchr(tail, '\n');
    if (eol) *eol = '\0';
    const char *p = strstr(tail, "planes=");
    *planes = p ? atoi(p + 7) : 1;
    *bad_quant = strstr(tail, "badquant") != NULL;
    p = strstr(tail, "seed=");
    *seed = p ? (uint32_t)strtoul(p + 5, NULL, 16) : 0u;
    return 0;
}

/* The process has one device, shared by all its sessions and holds, as the shim's one VDevice. */
static int claim_device(const char *options) {
    char device[64];
    option(options, "device_id", device, sizeof device);
    if (device[0] && strcmp(device, "loopback/0") != 0) return fail(INVALID_ARGUMENT, "device_id not found");
    return 0;
}

EXPORT int loop_hrt_abi_version(void) { return 4; }

EXPORT int loop_hrt_device_acquire(const char *options, void **device) {
    int status;
    if (!device) return fail(BAD_ARGUMENT, "device_acquire: null argument");
    *device = NULL;
    if ((status = claim_device(options))) return status;
    *device = &device_holds;
    device_holds++;
    return 0;
}

EXPORT int loop_hrt_device_release(void *device) {
    if (device) device_holds--;
    return 0;
}

EXPORT int loop_hrt_open(const char *hef_path, const char *options, void **handle) {
    unsigned s[6];
    int planes = 1, bad_quant = 0, status;
    char latency[8];
    if (!hef_path || !handle) return fail(BAD_ARGUMENT, "open: null argument");
    if ((status = claim_device(options))) return status;
    uint32_t seed = 0;
    if ((status = read_hef(hef_path, s, &planes, &bad_quant, &seed))) return status;
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
    lb->bad_quant = bad_quant;
    lb->seed = seed;
    option(options, "hw_latency", latency, sizeof latency);
    lb->hw_latency = strcmp(latency, "1") == 0 && planes <= 1;
    if (strcmp(latency, "1") == 0 && planes > 1) {
        snprintf(lb->note, sizeof lb->note, "hardware latency not measured: configure refused it (status 6; "
                 "%d physical inputs), so the model was configured without it", planes);
    }
    open_handles++;
    *handle = lb;
    return 0;
}

static void stream_json(char *out, size_t size, const char *name, const unsigned shape[3], size_t bytes,
                        double scale, int zero_point, int valid) {
    snprintf(out, size, "{\"name\": \"%s\", \"shape\": [%u, %u, %u], \"frame_bytes\": %zu, \"dtype\": \"uint8\", "
             "\"quant_count\": 1, \"quant_valid\": %s, \"is_nms\": false, \"scale\": %g, \"zero_point\": %d}",
             name, shape[0], shape[1], shape[2], bytes, valid ? "true" : "false", scale, zero_point);
}

static int layout_json(const Loopback *lb, int with_session, char *json, size_t capacity, size_t *needed) {
    char in[256], out[256], text[1024];
    stream_json(in, sizeof in, "loopback/input0", lb->in_shape, lb->in_bytes, 0.0078125, 128, 1);
    stream_json(out, sizeof out, "loopback/output0", lb->out_shape, lb->out_bytes, lb->bad_quant ? 0.0 : 0.5, 3,
                !lb->bad_quant);
    if (!with_session) {
        snprintf(text, sizeof text, "{\"inputs\": [%s], \"outputs\": [%s]}", in, out);
    } else {
        snprintf(text, sizeof text, "{\"inputs\": [%s], \"outputs\": [%s], \"async_queue_size\": %d, "
                 "\"hw_latency\": %s, \"notes\": [%s%s%s]}", in, out, QUEUE_SIZE, lb->hw_latency ? "true" : "false",
                 lb->note[0] ? "\"" : "", lb->note, lb->note[0] ? "\"" : "");
    }
    return write_text(text, json, capacity, needed);
}

EXPORT int loop_hrt_layout(void *handle, char *json, size_t capacity, size_t *needed) {
    if (!handle) return fail(BAD_ARGUMENT, "layout: null handle");
    return layout_json(handle, 1, json, capacity, needed);
}

EXPORT int loop_hrt_hef_layout(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    Loopback lb = {0};
    unsigned s[6];
    int planes = 1, status;
    if ((status = read_hef(hef_path, s, &planes, &lb.bad_quant, &lb.seed))) return status;
    memcpy(lb.in_shape, s, sizeof lb.in_shape);
    memcpy(lb.out_shape, s + 3, sizeof lb.out_shape);
    lb.in_bytes = (size_t)s[0] * s[1] * s[2];
    lb.out_bytes = (size_t)s[3] * s[4] * s[5];
    return layout_json(&lb, 0, json, capacity, needed);
}

/* A loopback "HEF" is no HEF the C API reads: 92, HAILO_HEF_NOT_SUPPORTED, as hailo_create_hef_file answers. */
EXPORT int loop_hrt_hef_info(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    (void)json;
    (void)capacity;
    (void)needed;
    if (!hef_path) return fail(BAD_ARGUMENT, "hef_info: null path");
    return fail(92, "hef_info: the loopback reads no HEF through the C API");
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
    lb->hw_latency_ms = count && lb->hw_latency ? *elapsed_s * 1000.0 / (double)count : NAN;
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
EXPORT int loop_hrt_health(void *device, char *json, size_t capacity, size_t *needed) {
    static const char with_nul[] = "{\"device_path\": \"loopback/0\", \"board\": \"Hailo\0-10H\"}";
    if (!device) return fail(BAD_ARGUMENT, "health: null device hold");
    if (getenv("LOOPBACK_HEALTH_NUL")) {
        if (needed) *needed = sizeof with_nul;
        if (capacity < sizeof with_nul) return fail(TEXT_TOO_SMALL, "text buffer too small");
        memcpy(json, with_nul, sizeof with_nul);
        return 0;
    }
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
    if (handle) {
        free(handle);
        open_handles--;
    }
    return 0;
}

EXPORT int loopback_open_handles(void) { return open_handles; }
EXPORT int loopback_device_holds(void) { return device_holds; }
