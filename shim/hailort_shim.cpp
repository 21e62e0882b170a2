// loop's HailoRT shim: HailoRT's C++ InferModel API behind a few extern "C" functions.
//
// Why it exists: on Hailo-10H the flat C API's configure path returns HAILO_NOT_IMPLEMENTED
// and only InferModel works, but InferModel returns Expected<std::shared_ptr<...>>, which
// ctypes cannot call, and libhailort exports no flat entry points for it. The ABI is
// declared in hailort_shim.sigs (keep the two in step) and bound from Python by
// loop/devices/sigs.py. Status codes and options are documented there.
#include "hailo/hailort.hpp"
#include "hailo/infer_model.hpp"
#include "hailo/vdevice.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#if defined(_WIN32)
#define LOOP_HRT_EXPORT extern "C" __declspec(dllexport)
#else
#define LOOP_HRT_EXPORT extern "C" __attribute__((visibility("default")))
#endif

using namespace hailort;

namespace {

constexpr int BAD_BUFFER = 2;       // the seed's shim used 2 for a refused buffer
constexpr int TEXT_TOO_SMALL = 5;   // same value as HAILO_INSUFFICIENT_BUFFER
constexpr auto TIMEOUT = std::chrono::milliseconds(10000);

std::mutex g_error_mutex;
std::string g_last_error;

int fail(int status, const std::string &what) {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    g_last_error = what + " (status " + std::to_string(status) + ")";
    return status;
}

struct Mapping {
    void *ptr;
    size_t size;
    hailo_dma_buffer_direction_t direction;
};

struct Session {
    std::unique_ptr<VDevice> vdevice;
    std::shared_ptr<InferModel> model;
    ConfiguredInferModel configured;
    std::vector<std::string> input_names, output_names;
    std::vector<size_t> input_sizes, output_sizes;
    size_t queue_size = 1;
    bool dma_map = false;
    // Mappings live for one call only: the caller's buffers may be freed once it returns.
    std::vector<Mapping> mapped;

    ~Session() { unmap_all(); }
    void unmap_all() {
        for (auto &m : mapped) vdevice->dma_unmap(m.ptr, m.size, m.direction);
        mapped.clear();
    }
};

struct MappingScope {
    Session &session;
    ~MappingScope() { session.unmap_all(); }
};

std::map<std::string, std::string> parse_options(const char *text) {
    std::map<std::string, std::string> out;
    std::stringstream stream(text ? text : "");
    std::string item;
    while (std::getline(stream, item, ';')) {
        auto eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return out;
}

Expected<std::unique_ptr<VDevice>> create_vdevice(const std::string &device_id) {
    if (device_id.empty()) return VDevice::create();
    return VDevice::create(std::vector<std::string>{device_id});
}

std::string json_escape(const std::string &text) {
    std::string out;
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

const char *dtype_name(hailo_format_type_t type) {
    switch (type) {
    case HAILO_FORMAT_TYPE_UINT8: return "uint8";
    case HAILO_FORMAT_TYPE_UINT16: return "uint16";
    case HAILO_FORMAT_TYPE_FLOAT32: return "float32";
    default: return "auto";
    }
}

std::string stream_json(const InferModel::InferStream &stream) {
    auto shape = stream.shape();
    auto quants = stream.get_quant_infos();
    std::ostringstream out;
    out.precision(9);
    out << "{\"name\": \"" << json_escape(stream.name()) << "\", \"shape\": [" << shape.height << ", "
        << shape.width << ", " << shape.features << "], \"frame_bytes\": " << stream.get_frame_size()
        << ", \"dtype\": \"" << dtype_name(stream.format().type) << "\", \"quant_count\": " << quants.size()
        << ", \"is_nms\": " << (stream.is_nms() ? "true" : "false");
    if (!quants.empty()) {
        out << ", \"scale\": " << quants[0].qp_scale << ", \"zero_point\": " << quants[0].qp_zp;
    }
    out << "}";
    return out.str();
}

int write_text(const std::string &text, char *buffer, size_t capacity, size_t *needed) {
    if (needed) *needed = text.size() + 1;
    if (!buffer || capacity < text.size() + 1) return TEXT_TOO_SMALL;
    std::memcpy(buffer, text.c_str(), text.size() + 1);
    return HAILO_SUCCESS;
}

hailo_status ensure_mapped(Session &s, void *ptr, size_t size, hailo_dma_buffer_direction_t direction) {
    if (!s.dma_map) return HAILO_SUCCESS;
    for (auto &m : s.mapped) {
        if (m.ptr == ptr && m.size >= size && m.direction == direction) return HAILO_SUCCESS;
    }
    auto status = s.vdevice->dma_map(ptr, size, direction);
    if (status == HAILO_SUCCESS) s.mapped.push_back(Mapping{ptr, size, direction});
    return status;
}

// Refuses before anything runs: sizes come from the layout, never from the caller's claims.
int check_buffers(const std::vector<size_t> &expected, void **buffers, const size_t *sizes, size_t n,
                  bool exact, const char *what) {
    if (n != expected.size() || (n && (!buffers || !sizes))) {
        return fail(BAD_BUFFER, std::string(what) + ": expected " + std::to_string(expected.size()) + " buffers");
    }
    for (size_t i = 0; i < n; i++) {
        bool bad = !buffers[i] || sizes[i] < expected[i] || (exact && sizes[i] != expected[i]);
        if (bad) {
            return fail(BAD_BUFFER, std::string(what) + " " + std::to_string(i) + ": " + std::to_string(sizes[i]) +
                        " bytes given, frame is " + std::to_string(expected[i]));
        }
    }
    return HAILO_SUCCESS;
}

Expected<ConfiguredInferModel::Bindings> make_bindings(Session &s, void **inputs, void **outputs) {
    auto bindings = s.configured.create_bindings();
    if (!bindings) return make_unexpected(bindings.status());
    for (size_t i = 0; i < s.input_names.size(); i++) {
        auto status = ensure_mapped(s, inputs[i], s.input_sizes[i], HAILO_DMA_BUFFER_DIRECTION_H2D);
        if (status != HAILO_SUCCESS) return make_unexpected(status);
        status = bindings->input(s.input_names[i])->set_buffer(MemoryView(inputs[i], s.input_sizes[i]));
        if (status != HAILO_SUCCESS) return make_unexpected(status);
    }
    for (size_t i = 0; i < s.output_names.size(); i++) {
        auto status = ensure_mapped(s, outputs[i], s.output_sizes[i], HAILO_DMA_BUFFER_DIRECTION_D2H);
        if (status != HAILO_SUCCESS) return make_unexpected(status);
        status = bindings->output(s.output_names[i])->set_buffer(MemoryView(outputs[i], s.output_sizes[i]));
        if (status != HAILO_SUCCESS) return make_unexpected(status);
    }
    return bindings;
}

int configure(Session &s, const std::map<std::string, std::string> &opts) {
    auto get = [&](const char *key, const char *fallback) {
        auto it = opts.find(key);
        return it == opts.end() ? std::string(fallback) : it->second;
    };
    s.dma_map = get("dma_map", "0") == "1";
    s.model->set_batch_size(static_cast<uint16_t>(std::stoi(get("batch_size", "1"))));
    if (get("power_mode", "") == "ultra_performance") s.model->set_power_mode(HAILO_POWER_MODE_ULTRA_PERFORMANCE);
    if (get("power_mode", "") == "performance") s.model->set_power_mode(HAILO_POWER_MODE_PERFORMANCE);
    if (get("hw_latency", "1") == "1") s.model->set_hw_latency_measurement_flags(HAILO_LATENCY_MEASURE);
    auto configured = s.model->configure();
    if (!configured) return fail(configured.status(), "configure failed");
    s.configured = configured.release();
    for (const auto &in : s.model->inputs()) {
        s.input_names.push_back(in.name());
        s.input_sizes.push_back(in.get_frame_size());
    }
    for (const auto &out : s.model->outputs()) {
        s.output_names.push_back(out.name());
        s.output_sizes.push_back(out.get_frame_size());
    }
    auto queue = s.configured.get_async_queue_size();
    s.queue_size = queue ? queue.value() : 1;
    return HAILO_SUCCESS;
}

double hw_latency(Session &s) {
    auto latency = s.configured.get_hw_latency_measurement();
    if (!latency) return std::numeric_limits<double>::quiet_NaN();
    return std::chrono::duration<double, std::milli>(latency.value().avg_hw_latency).count();
}

// Anything the device cannot report is null: on Windows over USB only temperature is known.
std::string health_json(Device &device) {
    std::ostringstream out;
    out.precision(6);
    out << "{\"device_path\": \"" << json_escape(device.get_dev_id()) << "\", \"temperature_c\": ";
    auto temperature = device.get_chip_temperature();
    if (temperature) out << temperature->ts0_temperature; else out << "null";
    auto identity = device.identify();
    if (identity) {
        const auto &id = identity.value();
        out << ", \"serial\": \"" << json_escape(std::string(id.serial_number, id.serial_number_length))
            << "\", \"board\": \"" << json_escape(std::string(id.board_name, id.board_name_length))
            << "\", \"firmware\": \"" << id.fw_version.major << "." << id.fw_version.minor << "."
            << id.fw_version.revision << "\"";
    }
    out << "}";
    return out.str();
}

}  // namespace

LOOP_HRT_EXPORT int loop_hrt_open(const char *hef_path, const char *options, void **handle) {
    if (!hef_path || !handle) return fail(HAILO_INVALID_ARGUMENT, "open: null argument");
    *handle = nullptr;
    auto opts = parse_options(options);
    auto session = std::make_unique<Session>();
    auto vdevice = create_vdevice(opts.count("device_id") ? opts["device_id"] : "");
    if (!vdevice) return fail(vdevice.status(), "cannot open a Hailo device");
    session->vdevice = vdevice.release();
    auto model = session->vdevice->create_infer_model(hef_path);
    if (!model) return fail(model.status(), std::string("cannot load HEF ") + hef_path);
    session->model = model.release();
    try {
        int status = configure(*session, opts);
        if (status != HAILO_SUCCESS) return status;
    } catch (const std::exception &exc) {  // std::stoi on a bad batch_size
        return fail(HAILO_INVALID_ARGUMENT, std::string("bad option: ") + exc.what());
    }
    *handle = session.release();
    return HAILO_SUCCESS;
}

LOOP_HRT_EXPORT int loop_hrt_layout(void *handle, char *json, size_t capacity, size_t *needed) {
    if (!handle) return fail(HAILO_INVALID_ARGUMENT, "layout: null handle");
    auto &s = *static_cast<Session *>(handle);
    std::ostringstream out;
    const char *sep = "";
    out << "{\"inputs\": [";
    for (const auto &in : s.model->inputs()) { out << sep << stream_json(in); sep = ", "; }
    sep = "";
    out << "], \"outputs\": [";
    for (const auto &o : s.model->outputs()) { out << sep << stream_json(o); sep = ", "; }
    out << "], \"async_queue_size\": " << s.queue_size << "}";
    int status = write_text(out.str(), json, capacity, needed);
    return status == HAILO_SUCCESS ? status : fail(status, "layout: text buffer too small");
}

LOOP_HRT_EXPORT int loop_hrt_infer(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                                   void **outputs, size_t *output_sizes, size_t n_outputs, unsigned timeout_ms) {
    if (!handle) return fail(HAILO_INVALID_ARGUMENT, "infer: null handle");
    auto &s = *static_cast<Session *>(handle);
    int status = check_buffers(s.input_sizes, inputs, input_sizes, n_inputs, true, "input");
    if (status == HAILO_SUCCESS) status = check_buffers(s.output_sizes, outputs, output_sizes, n_outputs, false, "output");
    if (status != HAILO_SUCCESS) return status;
    MappingScope scope{s};
    auto bindings = make_bindings(s, inputs, outputs);
    if (!bindings) return fail(bindings.status(), "infer: binding buffers failed");
    auto run = s.configured.run(bindings.value(), std::chrono::milliseconds(timeout_ms ? timeout_ms : 10000));
    return run == HAILO_SUCCESS ? run : fail(run, "infer: run failed");
}

LOOP_HRT_EXPORT int loop_hrt_pipelined(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                                       uint64_t count, unsigned depth, double *elapsed_s, double *hw_latency_ms) {
    if (!handle || !elapsed_s || !hw_latency_ms) return fail(HAILO_INVALID_ARGUMENT, "pipelined: null argument");
    auto &s = *static_cast<Session *>(handle);
    int status = check_buffers(s.input_sizes, inputs, input_sizes, n_inputs, true, "input");
    if (status != HAILO_SUCCESS) return status;
    size_t slots = std::max<size_t>(1, std::min<size_t>(depth, s.queue_size));
    // Each slot in flight owns its outputs, so completions never overwrite each other.
    std::vector<std::vector<std::vector<uint8_t>>> storage(slots);
    std::vector<ConfiguredInferModel::Bindings> bindings;
    MappingScope scope{s};  // declared after the storage so it unmaps before the storage is freed
    for (auto &slot : storage) {
        std::vector<void *> outs;
        for (size_t size : s.output_sizes) { slot.emplace_back(size); outs.push_back(slot.back().data()); }
        auto made = make_bindings(s, inputs, outs.data());
        if (!made) return fail(made.status(), "pipelined: binding buffers failed");
        bindings.push_back(made.release());
    }
    std::vector<AsyncInferJob> jobs(slots);
    std::vector<bool> pending(slots, false);
    auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < count; i++) {
        size_t slot = static_cast<size_t>(i % slots);
        if (pending[slot] && (status = jobs[slot].wait(TIMEOUT)) != HAILO_SUCCESS) return fail(status, "pipelined: wait failed");
        status = s.configured.wait_for_async_ready(TIMEOUT, 1);
        if (status != HAILO_SUCCESS) return fail(status, "pipelined: device not ready");
        auto job = s.configured.run_async(bindings[slot]);
        if (!job) return fail(job.status(), "pipelined: run_async failed");
        jobs[slot] = job.release();
        pending[slot] = true;
    }
    for (size_t slot = 0; slot < slots; slot++) {
        if (pending[slot] && (status = jobs[slot].wait(TIMEOUT)) != HAILO_SUCCESS) return fail(status, "pipelined: wait failed");
    }
    *elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *hw_latency_ms = hw_latency(s);
    return HAILO_SUCCESS;
}

LOOP_HRT_EXPORT int loop_hrt_hw_latency(void *handle, double *hw_latency_ms) {
    if (!handle || !hw_latency_ms) return fail(HAILO_INVALID_ARGUMENT, "hw_latency: null argument");
    *hw_latency_ms = hw_latency(*static_cast<Session *>(handle));
    return HAILO_SUCCESS;
}

LOOP_HRT_EXPORT int loop_hrt_health(void *handle, char *json, size_t capacity, size_t *needed) {
    std::unique_ptr<VDevice> own;
    VDevice *vdevice = handle ? static_cast<Session *>(handle)->vdevice.get() : nullptr;
    if (!vdevice) {
        auto created = VDevice::create();
        if (!created) return fail(created.status(), "health: cannot open a Hailo device");
        own = created.release();
        vdevice = own.get();
    }
    auto devices = vdevice->get_physical_devices();
    if (!devices) return fail(devices.status(), "health: cannot list physical devices");
    if (devices->empty()) return fail(HAILO_INVALID_OPERATION, "health: no physical device");
    int status = write_text(health_json(devices->front().get()), json, capacity, needed);
    return status == HAILO_SUCCESS ? status : fail(status, "health: text buffer too small");
}

LOOP_HRT_EXPORT size_t loop_hrt_last_error(char *text, size_t capacity) {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    if (text && capacity) {
        size_t n = std::min(capacity - 1, g_last_error.size());
        std::memcpy(text, g_last_error.data(), n);
        text[n] = '\0';
    }
    return g_last_error.size();
}

LOOP_HRT_EXPORT int loop_hrt_close(void *handle) {
    if (!handle) return HAILO_SUCCESS;
    auto *s = static_cast<Session *>(handle);
    s->configured.shutdown();
    delete s;
    return HAILO_SUCCESS;
}
