// loop's HailoRT shim: HailoRT's C++ InferModel API behind a few extern "C" functions.
//
// Why it exists: on Hailo-10H the flat C API's configure path returns HAILO_NOT_IMPLEMENTED
// and only InferModel works, but InferModel returns Expected<std::shared_ptr<...>>, which
// ctypes cannot call, and libhailort exports no flat entry points for it. The ABI is
// declared in hailort_shim.sigs (keep the two in step) and bound from Python by
// loop/sigs.py. Status codes and options are documented there.

// hailo/platform.h includes winsock2.h on Windows, whose min/max macros would break std::min(
// and std::max(. Hailo builds its own code and examples with both defined (CMakeLists.txt passes
// them too); defining them here keeps a bare command-line build right. The shim's own calls are
// also written (std::min)(...) so that a header which defined the macros earlier cannot break it.
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif

#include "hailo/hailort.hpp"
#include "hailo/hef.hpp"
#include "hailo/infer_model.hpp"
#include "hailo/vdevice.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <climits>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#if defined(_WIN32)
#define LOOP_HRT_EXPORT extern "C" __declspec(dllexport)
#else
#include <unistd.h>
#define LOOP_HRT_EXPORT extern "C" __attribute__((visibility("default")))
#endif

using namespace hailort;

namespace {

// The shim's own statuses sit at 1000 and up so they never collide with a hailo_status
// (2 is HAILO_INVALID_ARGUMENT, 5 HAILO_INSUFFICIENT_BUFFER).
constexpr int ABI_VERSION = 4;
constexpr int LOOP_BAD_BUFFER = 1000;
constexpr int LOOP_TEXT_TOO_SMALL = 1001;
constexpr int LOOP_BAD_ARGUMENT = 1002;
constexpr int LOOP_EXCEPTION = 1003;
constexpr int LOOP_LEAKED = 1004;
constexpr auto TIMEOUT = std::chrono::milliseconds(10000);

// Per thread: a failure on one thread must not overwrite the text another is about to read.
thread_local std::string t_last_error;

int fail(int status, const std::string &what) {
    t_last_error = what + " (status " + std::to_string(status) + ")";
    return status;
}

// No C++ exception may cross extern "C": each export runs its body through this.
template <typename Body>
int guarded(const char *what, Body &&body) {
    try {
        return body();
    } catch (const std::exception &exc) {
        return fail(LOOP_EXCEPTION, std::string(what) + ": C++ exception: " + exc.what());
    } catch (...) {
        return fail(LOOP_EXCEPTION, std::string(what) + ": unknown C++ exception");
    }
}

size_t page_size() {
#if defined(_WIN32)
    return 4096;  // every Windows target HailoRT supports uses 4 KiB pages
#else
    return static_cast<size_t>(sysconf(_SC_PAGESIZE));
#endif
}

size_t page_round(size_t size) {
    const size_t page = page_size();
    return ((size ? size : 1) + page - 1) / page * page;
}

// hailo/infer_model.hpp (Bindings::InferStream::set_buffer): buffers should start on a page, and an
// output's allocation must end on one, or the device may write past it in the last page.
class PageBuffer {
public:
    explicit PageBuffer(size_t size)
        : capacity_(page_round(size)),
          data_(static_cast<uint8_t *>(::operator new(capacity_, std::align_val_t(page_size())))) {}
    ~PageBuffer() { ::operator delete(data_, std::align_val_t(page_size())); }
    PageBuffer(const PageBuffer &) = delete;
    PageBuffer &operator=(const PageBuffer &) = delete;
    uint8_t *data() const { return data_; }
    size_t capacity() const { return capacity_; }

private:
    size_t capacity_;
    uint8_t *data_;
};

struct Mapping {
    void *ptr;
    size_t size;
    hailo_dma_buffer_direction_t direction;
};

struct Stream {
    std::string name;
    size_t frame_size;
};

using Slot = std::vector<std::unique_ptr<PageBuffer>>;

// The jobs the shim started whose completion callback HailoRT has not called yet. Each callback holds
// it, so it outlives a session freed or leaked while a callback is still due.
class Inflight {
public:
    void start() {
        std::lock_guard<std::mutex> lock(mutex_);
        count_++;
    }
    void finish() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            count_--;
        }
        done_.notify_all();
    }
    bool drained(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(mutex_);
        return done_.wait_for(lock, timeout, [this] { return count_ == 0; });
    }
    size_t count() {
        std::lock_guard<std::mutex> lock(mutex_);
        return count_;
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;
    size_t count_ = 0;
};

// Members die in reverse order of declaration: the buffers jobs write into are declared before the
// model, so they outlive it (and the wait for in-flight transfers its destruction does).
struct Session {
    std::shared_ptr<VDevice> vdevice;  // this process's, shared with every other session and hold (shared_vdevice)
    std::vector<std::unique_ptr<PageBuffer>> bounce;  // per output, for callers' tight buffers
    std::vector<Slot> slots;                          // per pipelined slot, one buffer per output
    std::shared_ptr<Inflight> inflight = std::make_shared<Inflight>();
    std::chrono::milliseconds drain = TIMEOUT;  // how long close waits for callbacks still due
    std::shared_ptr<InferModel> model;
    ConfiguredInferModel configured;
    bool is_configured = false;
    std::vector<Stream> inputs, outputs;
    size_t queue_size = 1;
    bool dma_map = false;
    bool hw_latency = false;
    double last_hw_latency_ms = std::numeric_limits<double>::quiet_NaN();
    std::vector<std::string> notes;  // what was done other than asked, and why
    // Mapped once and kept until close, as Hailo's async_infer_advanced example does.
    std::vector<Mapping> mapped;

    // Runs only once no job holds a buffer (close_session), or before any job ran (a failed open).
    ~Session() {
        for (auto &m : mapped) vdevice->dma_unmap(m.ptr, m.size, m.direction);
    }
};

struct Options {
    std::string device_id, group_id, power_mode;
    bool dma_map = false, hw_latency = false, has_batch = false;
    uint16_t batch_size = 0;
    std::chrono::milliseconds drain = TIMEOUT;
};

std::map<std::string, std::string> split_options(const char *text) {
    std::map<std::string, std::string> out;
    std::stringstream stream(text ? text : "");
    std::string item;
    while (std::getline(stream, item, ';')) {
        auto eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return out;
}

bool parse_flag(const std::map<std::string, std::string> &raw, const char *key, bool &out) {
    auto it = raw.find(key);
    if (it == raw.end()) return true;
    out = it->second == "1";
    return it->second == "0" || it->second == "1";
}

bool parse_number(const std::map<std::string, std::string> &raw, const char *key, unsigned long most, unsigned long &out) {
    auto it = raw.find(key);
    if (it == raw.end()) return true;
    char *end = nullptr;
    unsigned long value = std::strtoul(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || value > most) return false;
    out = value;
    return true;
}

bool parse_numbers(const std::map<std::string, std::string> &raw, Options &o) {
    unsigned long batch = ULONG_MAX, drain = static_cast<unsigned long>(TIMEOUT.count());
    if (!parse_number(raw, "batch_size", (std::numeric_limits<uint16_t>::max)(), batch)) return false;
    if (!parse_number(raw, "drain_ms", 3600000, drain)) return false;
    o.has_batch = batch != ULONG_MAX;
    o.batch_size = o.has_batch ? static_cast<uint16_t>(batch) : 0;
    o.drain = std::chrono::milliseconds(drain);
    return true;
}

int parse_options(const char *text, Options &o) {
    auto raw = split_options(text);
    o.device_id = raw.count("device_id") ? raw["device_id"] : "";
    o.group_id = raw.count("group_id") ? raw["group_id"] : "";
    o.power_mode = raw.count("power_mode") ? raw["power_mode"] : "";
    bool known_power = o.power_mode.empty() || o.power_mode == "performance" || o.power_mode == "ultra_performance";
    if (!parse_flag(raw, "dma_map", o.dma_map) || !parse_flag(raw, "hw_latency", o.hw_latency) ||
        !parse_numbers(raw, o) || !known_power) {
        return fail(LOOP_BAD_ARGUMENT, std::string("open: bad options '") + (text ? text : "") + "'");
    }
    return HAILO_SUCCESS;
}

// Hailo-10H shares a device between processes through the VDevice group_id (no service);
// the default group "UNIQUE" makes a second open wait about 5 s and then fail.
Expected<std::unique_ptr<VDevice>> create_vdevice(const Options &o) {
    hailo_vdevice_params_t params{};
    auto status = hailo_init_vdevice_params(&params);
    if (status != HAILO_SUCCESS) return make_unexpected(status);
    hailo_device_id_t id{};
    if (!o.device_id.empty()) {
        auto parsed = HailoRTCommon::to_device_id(o.device_id);
        if (!parsed) return make_unexpected(parsed.status());
        id = parsed.value();
        params.device_ids = &id;
        params.device_count = 1;
    }
    if (!o.group_id.empty()) params.group_id = o.group_id.c_str();
    return VDevice::create(params);
}

// One VDevice per process and device selection, shared by every session and hold of the process.
// On Hailo-10H each VDevice::create is a client of the device's HRPC server, which makes a second
// "UNIQUE" one wait 5 s and fail (hailort_server.cpp, VDeviceManager::create_vdevice), so two
// sessions of one process (compare's A, B and A') must never each create their own. The map holds
// weak references: the VDevice goes when its last session or hold does, which frees the device for
// other processes (hailortcli). Heap-allocated and never destroyed, so nothing of it runs during
// static destruction, after HailoRT's own singletons may be gone.
struct SharedEntry {
    std::weak_ptr<VDevice> vdevice;
    std::string group;  // the group_id it was created with
};

std::mutex &registry_mutex() {
    static auto *mutex = new std::mutex;
    return *mutex;
}

std::map<std::string, SharedEntry> &registry() {
    static auto *entries = new std::map<std::string, SharedEntry>;
    return *entries;
}

struct Hold {
    std::shared_ptr<VDevice> vdevice;
    std::string group;  // the group_id the shared VDevice was created with
};

Expected<Hold> shared_vdevice(const Options &o) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto &entry = registry()[o.device_id];
    if (auto live = entry.vdevice.lock()) return Hold{live, entry.group};
    auto created = create_vdevice(o);
    if (!created) return make_unexpected(created.status());
    std::shared_ptr<VDevice> vdevice(created.release());
    entry = SharedEntry{vdevice, o.group_id};
    return Hold{vdevice, o.group_id};
}

std::string group_name(const std::string &group) {
    return group.empty() ? std::string(HAILO_DEFAULT_VDEVICE_GROUP_ID) : group;
}

// A session that asked for another group than the process's VDevice was created with still uses
// it: a second VDevice of another group would be refused by HailoRT all the same.
void note_group(std::vector<std::string> &notes, const Hold &hold, const Options &o) {
    if (group_name(hold.group) == group_name(o.group_id)) return;
    notes.push_back("shares this process's VDevice, created with group_id '" + group_name(hold.group) +
                    "', not the '" + group_name(o.group_id) + "' asked for");
}

std::string json_escape(const std::string &text) {
    std::string out;
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20) {  // a NUL or control byte would end or break the JSON text
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\u%04x", u);
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

// A fixed-size char field: Hailo-10H leaves *_length unset (hrpc_protocol/serializer.cpp,
// IdentifyDeviceSerializer), so the text's own end bounds it, as hailortcli uses strnlen.
std::string fixed_text(const char *text, size_t capacity, size_t stated_length) {
    size_t length = strnlen(text, capacity);
    if (stated_length) length = (std::min)(length, stated_length);
    return std::string(text, length);
}

const char *dtype_name(hailo_format_type_t type) {
    switch (type) {
    case HAILO_FORMAT_TYPE_UINT8: return "uint8";
    case HAILO_FORMAT_TYPE_UINT16: return "uint16";
    case HAILO_FORMAT_TYPE_FLOAT32: return "float32";
    default: return "auto";
    }
}

bool is_integer(hailo_format_type_t type) {
    return type == HAILO_FORMAT_TYPE_UINT8 || type == HAILO_FORMAT_TYPE_UINT16;
}

// get_quant_infos()[0] is INVALID_QUANT_INFO (scale 0) when a stream has several quantization
// params (libhailort/src/hef/hef.cpp, output_scale_by_feature): it must not be used.
bool quant_valid(const std::vector<hailo_quant_info_t> &quants) {
    return quants.size() == 1 && quants[0].qp_scale > 0.0f;
}

void stream_fields(std::ostringstream &out, const std::string &name, const hailo_3d_image_shape_t &shape,
                   size_t frame_size, hailo_format_type_t type, const std::vector<hailo_quant_info_t> &quants,
                   bool nms) {
    bool valid = quant_valid(quants);
    out << "{\"name\": \"" << json_escape(name) << "\", \"shape\": [" << shape.height << ", " << shape.width
        << ", " << shape.features << "], \"frame_bytes\": " << frame_size << ", \"dtype\": \"" << dtype_name(type)
        << "\", \"quant_count\": " << quants.size() << ", \"quant_valid\": " << (valid ? "true" : "false")
        << ", \"is_nms\": " << (nms ? "true" : "false");
    if (valid && is_integer(type)) out << ", \"scale\": " << quants[0].qp_scale << ", \"zero_point\": " << quants[0].qp_zp;
    out << "}";
}

std::string stream_json(const InferModel::InferStream &stream) {
    std::ostringstream out;
    out.precision(9);
    stream_fields(out, stream.name(), stream.shape(), stream.get_frame_size(), stream.format().type,
                  stream.get_quant_infos(), stream.is_nms());
    return out.str();
}

std::string vstream_json(const hailo_vstream_info_t &info) {
    std::ostringstream out;
    out.precision(9);
    bool nms = HailoRTCommon::is_nms(info);
    hailo_3d_image_shape_t shape = nms ? hailo_3d_image_shape_t{1, 1, 1} : info.shape;
    stream_fields(out, fixed_text(info.name, sizeof info.name, 0), shape,
                  HailoRTCommon::get_frame_size(info, info.format), info.format.type, {info.quant_info}, nms);
    return out.str();
}

std::string notes_json(const std::vector<std::string> &notes) {
    std::string out = "[";
    for (size_t i = 0; i < notes.size(); i++) out += (i ? ", \"" : "\"") + json_escape(notes[i]) + "\"";
    return out + "]";
}

int write_text(const std::string &text, char *buffer, size_t capacity, size_t *needed, const char *what) {
    if (needed) *needed = text.size() + 1;
    if (!buffer || capacity < text.size() + 1) return fail(LOOP_TEXT_TOO_SMALL, std::string(what) + ": text buffer too small");
    std::memcpy(buffer, text.c_str(), text.size() + 1);
    return HAILO_SUCCESS;
}

// An output whose quantization cannot be trusted is asked for as float32: HailoRT then
// dequantizes it with the right per-feature params itself.
void float_for_invalid_quant(Session &s) {
    for (const auto &out : s.model->outputs()) {
        if (quant_valid(out.get_quant_infos()) || !is_integer(out.format().type)) continue;
        auto stream = s.model->output(out.name());
        if (!stream) continue;
        stream->set_format_type(HAILO_FORMAT_TYPE_FLOAT32);
        s.notes.push_back("output '" + out.name() + "' has several quantization params (INVALID_QUANT_INFO): "
                          "read as float32, dequantized by HailoRT");
    }
}

// HailoRT refuses hardware latency for several physical inputs (planes counted) or an output stream
// of order HAILO_NMS_ON_CHIP (configure fails with HAILO_INVALID_OPERATION: create_hw_latency_meter in
// libhailort/src/core_op/resource_manager/resource_manager.cpp). The HEF's stream infos are those
// physical streams (LayerInfoUtils::get_stream_infos_from_layer_info); an InferModel output's is_nms()
// is also true for NMS done on the host, which HailoRT measures. Unreadable: configure decides.
std::string latency_refusal(const std::string &hef_path) {
    auto hef = Hef::create(hef_path);
    if (!hef) return "";
    auto inputs = hef->get_input_stream_infos();
    if (inputs && inputs->size() > 1) return "the model has " + std::to_string(inputs->size()) + " physical inputs";
    auto outputs = hef->get_output_stream_infos();
    if (!outputs) return "";
    for (const auto &info : outputs.value()) {
        if (info.format.order == HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP) return "the model has on-chip NMS";
    }
    return "";
}

void ask_for_latency(Session &s, bool requested, const std::string &hef_path) {
    if (!requested) return;
    std::string refusal = latency_refusal(hef_path);
    if (!refusal.empty()) {
        s.notes.push_back("hardware latency not measured: HailoRT refuses it when " + refusal);
        return;
    }
    s.hw_latency = true;
    // CLEAR_AFTER_GET: each read covers the frames since the last one, not everything since configure.
    s.model->set_hw_latency_measurement_flags(
        static_cast<hailo_latency_measurement_flags_t>(HAILO_LATENCY_MEASURE | HAILO_LATENCY_CLEAR_AFTER_GET));
}

Expected<ConfiguredInferModel> configure_model(Session &s) {
    auto first = s.model->configure();
    if (first || !s.hw_latency || first.status() != HAILO_INVALID_OPERATION) return first;
    s.hw_latency = false;
    s.notes.push_back("hardware latency not measured: configure refused it (status 6; several physical inputs "
                      "or on-chip NMS), so the model was configured without it");
    s.model->set_hw_latency_measurement_flags(HAILO_LATENCY_NONE);
    return s.model->configure();
}

void apply_options(Session &s, const Options &o, const std::string &hef_path) {
    s.dma_map = o.dma_map;
    s.drain = o.drain;
    if (o.has_batch) s.model->set_batch_size(o.batch_size);  // else HAILO_DEFAULT_BATCH_SIZE, as hailortcli
    if (o.power_mode == "ultra_performance") s.model->set_power_mode(HAILO_POWER_MODE_ULTRA_PERFORMANCE);
    if (o.power_mode == "performance") s.model->set_power_mode(HAILO_POWER_MODE_PERFORMANCE);
    float_for_invalid_quant(s);
    ask_for_latency(s, o.hw_latency, hef_path);
}

int configure(Session &s, const Options &o, const std::string &hef_path) {
    apply_options(s, o, hef_path);
    auto configured = configure_model(s);
    if (!configured) return fail(configured.status(), "configure failed");
    s.configured = configured.release();
    s.is_configured = true;
    for (const auto &in : s.model->inputs()) s.inputs.push_back({in.name(), in.get_frame_size()});
    for (const auto &out : s.model->outputs()) {
        s.outputs.push_back({out.name(), out.get_frame_size()});
        s.bounce.push_back(std::make_unique<PageBuffer>(out.get_frame_size()));
    }
    auto queue = s.configured.get_async_queue_size();
    s.queue_size = queue ? (std::max)(static_cast<size_t>(1), queue.value()) : 1;
    return HAILO_SUCCESS;
}

// A mapping lives until close: buffers passed with dma_map=1 must outlive the session (.sigs).
hailo_status ensure_mapped(Session &s, void *ptr, size_t size, hailo_dma_buffer_direction_t direction) {
    if (!s.dma_map) return HAILO_SUCCESS;
    for (auto &m : s.mapped) {
        if (m.ptr == ptr && m.size >= size && m.direction == direction) return HAILO_SUCCESS;
    }
    auto status = s.vdevice->dma_map(ptr, size, direction);
    if (status == HAILO_SUCCESS) s.mapped.push_back(Mapping{ptr, size, direction});
    return status;
}

// Sizes come from the layout, never from the caller's claims; refused before anything runs.
int check_buffers(const std::vector<Stream> &streams, void **buffers, const size_t *sizes, size_t n, bool exact,
                  const char *what) {
    if (n != streams.size() || (n && (!buffers || !sizes))) {
        return fail(LOOP_BAD_BUFFER, std::string(what) + ": expected " + std::to_string(streams.size()) + " buffers");
    }
    for (size_t i = 0; i < n; i++) {
        size_t frame = streams[i].frame_size;
        if (!buffers[i] || sizes[i] < frame || (exact && sizes[i] != frame)) {
            return fail(LOOP_BAD_BUFFER, std::string(what) + " " + std::to_string(i) + ": " +
                        std::to_string(sizes[i]) + " bytes given, frame is " + std::to_string(frame));
        }
    }
    return HAILO_SUCCESS;
}

hailo_status bind(Session &s, ConfiguredInferModel::Bindings &bindings, void **inputs, void **outputs) {
    for (size_t i = 0; i < s.inputs.size(); i++) {
        auto status = ensure_mapped(s, inputs[i], s.inputs[i].frame_size, HAILO_DMA_BUFFER_DIRECTION_H2D);
        if (status != HAILO_SUCCESS) return status;
        auto stream = bindings.input(s.inputs[i].name);
        if (!stream) return stream.status();
        status = stream->set_buffer(MemoryView(inputs[i], s.inputs[i].frame_size));
        if (status != HAILO_SUCCESS) return status;
    }
    for (size_t i = 0; i < s.outputs.size(); i++) {
        auto status = ensure_mapped(s, outputs[i], s.outputs[i].frame_size, HAILO_DMA_BUFFER_DIRECTION_D2H);
        if (status != HAILO_SUCCESS) return status;
        auto stream = bindings.output(s.outputs[i].name);
        if (!stream) return stream.status();
        status = stream->set_buffer(MemoryView(outputs[i], s.outputs[i].frame_size));
        if (status != HAILO_SUCCESS) return status;
    }
    return HAILO_SUCCESS;
}

Expected<ConfiguredInferModel::Bindings> make_bindings(Session &s, void **inputs, void **outputs) {
    auto bindings = s.configured.create_bindings();
    if (!bindings) return make_unexpected(bindings.status());
    auto status = bind(s, bindings.value(), inputs, outputs);
    if (status != HAILO_SUCCESS) return make_unexpected(status);
    return bindings;
}

// A caller's output that does not end on a page is written through the session's own buffer.
std::vector<void *> output_targets(Session &s, void **outputs, const size_t *capacities) {
    std::vector<void *> targets;
    for (size_t i = 0; i < s.outputs.size(); i++) {
        bool rounded = capacities[i] >= page_round(s.outputs[i].frame_size);
        targets.push_back(rounded ? outputs[i] : s.bounce[i]->data());
    }
    return targets;
}

void ensure_slots(Session &s, size_t count) {
    while (s.slots.size() < count) {
        Slot slot;
        for (const auto &out : s.outputs) slot.push_back(std::make_unique<PageBuffer>(out.frame_size));
        s.slots.push_back(std::move(slot));
    }
}

// The first failure the jobs of one call reported to their callbacks. On Hailo-8 (ConfiguredInferModelImpl)
// only the callback carries a job's status: AsyncInferJob::wait answers success once the callback ran,
// whatever the job did (AsyncInferJobImpl::wait, infer_model.cpp, hailort v4.23.0 and v5.2.0), while
// Hailo-10H's wait answers the job's status (AsyncInferJobHrpcClient::wait, configured_infer_model_hrpc_client.cpp).
using Failure = std::shared_ptr<std::atomic<int>>;

Failure no_failure() { return std::make_shared<std::atomic<int>>(HAILO_SUCCESS); }

// run_async with a callback that counts the job out and keeps its failure. A job whose run_async answered an
// error stays counted until a callback comes: HailoRT may have queued some of its transfers before failing
// (infer_model.cpp, ConfiguredInferModelImpl::run_async), and close then leaks the session rather than guess.
// One that threw is taken as never queued: HailoRT reports its own failures as statuses, not exceptions.
Expected<AsyncInferJob> start_job(Session &s, const ConfiguredInferModel::Bindings &bindings, const Failure &failed) {
    auto inflight = s.inflight;
    inflight->start();
    try {
        return s.configured.run_async(bindings, [inflight, failed](const AsyncInferCompletionInfo &info) {
            int none = HAILO_SUCCESS;
            if (info.status != HAILO_SUCCESS) failed->compare_exchange_strong(none, info.status);
            inflight->finish();
        });
    } catch (...) {
        inflight->finish();
        throw;
    }
}

// ConfiguredInferModel::run as HailoRT writes it (wait_for_async_ready, run_async, wait), with the job counted
// and its own status checked.
hailo_status run_counted(Session &s, const ConfiguredInferModel::Bindings &bindings, std::chrono::milliseconds timeout) {
    auto status = s.configured.wait_for_async_ready(timeout, 1);
    if (status != HAILO_SUCCESS) return status;
    auto failed = no_failure();
    auto job = start_job(s, bindings, failed);
    if (!job) return job.status();
    status = job->wait(timeout);
    // An undetached job's destructor waits for it, up to 10 s (WAIT_FOR_ASYNC_IN_DTOR_TIMEOUT,
    // infer_model.cpp): one still out after a timeout is detached, counted in flight, and kept by the session.
    if (status != HAILO_SUCCESS) job->detach();
    return status != HAILO_SUCCESS ? status : static_cast<hailo_status>(failed->load());
}

double read_hw_latency(Session &s) {
    if (!s.hw_latency) return s.last_hw_latency_ms;
    auto latency = s.configured.get_hw_latency_measurement();
    if (latency) s.last_hw_latency_ms = std::chrono::duration<double, std::milli>(latency->avg_hw_latency).count();
    return s.last_hw_latency_ms;
}

int run_pipelined(Session &s, void **inputs, uint64_t count, size_t slots, double *elapsed_s) {
    ensure_slots(s, slots);
    std::vector<ConfiguredInferModel::Bindings> bindings;
    for (size_t k = 0; k < slots; k++) {
        std::vector<void *> outs;
        for (auto &buffer : s.slots[k]) outs.push_back(buffer->data());
        auto made = make_bindings(s, inputs, outs.data());
        if (!made) return fail(made.status(), "pipelined: binding buffers failed");
        bindings.push_back(made.release());
    }
    // Slots are the session's own, so jobs still in flight after an early return write into live memory.
    std::vector<AsyncInferJob> jobs(slots);
    std::vector<bool> pending(slots, false);
    // On an early return the jobs still out are detached: an undetached job's destructor waits up to
    // 10 s each (WAIT_FOR_ASYNC_IN_DTOR_TIMEOUT, infer_model.cpp); they stay counted in flight.
    struct DetachPending {
        std::vector<AsyncInferJob> &jobs;
        std::vector<bool> &pending;
        ~DetachPending() {
            for (size_t k = 0; k < jobs.size(); k++)
                if (pending[k]) jobs[k].detach();
        }
    } detach_pending{jobs, pending};
    auto failed = no_failure();  // a frame that failed is a failure, never a frame done
    auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < count; i++) {
        size_t k = static_cast<size_t>(i % slots);
        hailo_status status = HAILO_SUCCESS;
        if (pending[k] && (status = jobs[k].wait(TIMEOUT)) != HAILO_SUCCESS) return fail(status, "pipelined: wait failed");
        pending[k] = false;
        if (failed->load() != HAILO_SUCCESS) return fail(static_cast<hailo_status>(failed->load()), "pipelined: a frame failed");
        if ((status = s.configured.wait_for_async_ready(TIMEOUT, 1)) != HAILO_SUCCESS) return fail(status, "pipelined: device not ready");
        auto job = start_job(s, bindings[k], failed);
        if (!job) return fail(job.status(), "pipelined: run_async failed");
        jobs[k] = job.release();
        pending[k] = true;
    }
    for (size_t k = 0; k < slots; k++) {
        hailo_status status = HAILO_SUCCESS;
        if (pending[k] && (status = jobs[k].wait(TIMEOUT)) != HAILO_SUCCESS) return fail(status, "pipelined: wait failed");
        pending[k] = false;
    }
    if (failed->load() != HAILO_SUCCESS) return fail(static_cast<hailo_status>(failed->load()), "pipelined: a frame failed");
    *elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return HAILO_SUCCESS;
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
        out << ", \"serial\": \"" << json_escape(fixed_text(id.serial_number, sizeof id.serial_number, id.serial_number_length))
            << "\", \"board\": \"" << json_escape(fixed_text(id.board_name, sizeof id.board_name, id.board_name_length))
            << "\", \"firmware\": \"" << id.fw_version.major << "." << id.fw_version.minor << "."
            << id.fw_version.revision << "\"";
    }
    out << "}";
    return out.str();
}

int open_session(const char *hef_path, const char *options, void **handle) {
    Options o;
    int status = parse_options(options, o);
    if (status != HAILO_SUCCESS) return status;
    auto session = std::make_unique<Session>();
    auto hold = shared_vdevice(o);
    if (!hold) return fail(hold.status(), "cannot open a Hailo device");
    session->vdevice = hold->vdevice;
    note_group(session->notes, hold.value(), o);
    auto model = session->vdevice->create_infer_model(hef_path);
    if (!model) return fail(model.status(), std::string("cannot load HEF ") + hef_path);
    session->model = model.release();
    status = configure(*session, o, hef_path);
    if (status != HAILO_SUCCESS) return status;
    *handle = session.release();
    return HAILO_SUCCESS;
}

int layout_text(Session &s, char *json, size_t capacity, size_t *needed) {
    std::ostringstream out;
    const char *sep = "";
    out << "{\"inputs\": [";
    for (const auto &in : s.model->inputs()) { out << sep << stream_json(in); sep = ", "; }
    sep = "";
    out << "], \"outputs\": [";
    for (const auto &o : s.model->outputs()) { out << sep << stream_json(o); sep = ", "; }
    out << "], \"async_queue_size\": " << s.queue_size << ", \"hw_latency\": " << (s.hw_latency ? "true" : "false")
        << ", \"notes\": " << notes_json(s.notes) << "}";
    return write_text(out.str(), json, capacity, needed, "layout");
}

int hef_layout_text(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    auto hef = Hef::create(hef_path);
    if (!hef) return fail(hef.status(), std::string("cannot read HEF ") + hef_path);
    auto inputs = hef->get_input_vstream_infos();
    if (!inputs) return fail(inputs.status(), "hef_layout: no input stream infos");
    auto outputs = hef->get_output_vstream_infos();
    if (!outputs) return fail(outputs.status(), "hef_layout: no output stream infos");
    std::ostringstream out;
    const char *sep = "";
    out << "{\"inputs\": [";
    for (const auto &info : inputs.value()) { out << sep << vstream_json(info); sep = ", "; }
    sep = "";
    out << "], \"outputs\": [";
    for (const auto &info : outputs.value()) { out << sep << vstream_json(info); sep = ", "; }
    out << "]}";
    return write_text(out.str(), json, capacity, needed, "hef_layout");
}

// The C API's HEF functions (hailo/hailort.h): a HEF's network groups and physical streams, no device.
struct HefHandle {
    hailo_hef hef = nullptr;
    HefHandle() = default;
    HefHandle(const HefHandle &) = delete;
    HefHandle &operator=(const HefHandle &) = delete;
    ~HefHandle() {
        if (hef) hailo_release_hef(hef);
    }
};

std::string shape_json(const hailo_3d_image_shape_t &shape) {
    return "[" + std::to_string(shape.height) + ", " + std::to_string(shape.width) + ", " +
           std::to_string(shape.features) + "]";
}

// An NMS stream's shape and hw_shape share their memory with its nms_info (hailo_stream_info_t's union).
std::string stream_info_json(const hailo_stream_info_t &info) {
    std::ostringstream out;
    out.precision(9);
    bool nms = info.format.order == HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP;
    out << "{\"name\": \"" << json_escape(fixed_text(info.name, sizeof info.name, 0)) << "\", \"direction\": \""
        << (info.direction == HAILO_H2D_STREAM ? "input" : "output") << "\", \"order\": " << info.format.order
        << ", \"type\": " << info.format.type << ", \"flags\": " << info.format.flags
        << ", \"index\": " << unsigned(info.index) << ", \"hw_data_bytes\": " << info.hw_data_bytes
        << ", \"hw_frame_size\": " << info.hw_frame_size << ", \"is_mux\": " << (info.is_mux ? "true" : "false")
        << ", \"zero_point\": " << info.quant_info.qp_zp << ", \"scale\": " << info.quant_info.qp_scale
        << ", \"limvals\": [" << info.quant_info.limvals_min << ", " << info.quant_info.limvals_max << "]";
    if (nms) {
        out << ", \"nms\": {\"classes\": " << info.nms_info.number_of_classes
            << ", \"max_bboxes_per_class\": " << info.nms_info.max_bboxes_per_class << "}";
    } else {
        out << ", \"shape\": " << shape_json(info.shape) << ", \"hw_shape\": " << shape_json(info.hw_shape);
    }
    out << "}";
    return out.str();
}

int group_streams_json(hailo_hef hef, const std::string &group, std::ostringstream &out) {
    std::vector<hailo_stream_info_t> infos(HAILO_MAX_STREAMS_COUNT);
    size_t count = 0;
    auto status = hailo_hef_get_all_stream_infos(hef, group.c_str(), infos.data(), infos.size(), &count);
    if (status == HAILO_INSUFFICIENT_BUFFER) {
        infos.resize(count);
        status = hailo_hef_get_all_stream_infos(hef, group.c_str(), infos.data(), infos.size(), &count);
    }
    if (status != HAILO_SUCCESS) return fail(status, "hef_info: no stream infos for network group " + group);
    for (size_t i = 0; i < count; i++) out << (i ? ", " : "") << stream_info_json(infos[i]);
    return HAILO_SUCCESS;
}

int hef_info_text(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    HefHandle handle;
    auto status = hailo_create_hef_file(&handle.hef, hef_path);
    if (status != HAILO_SUCCESS) return fail(status, std::string("cannot read HEF ") + hef_path);
    std::vector<hailo_network_group_info_t> groups(HAILO_MAX_NETWORK_GROUPS);
    size_t count = groups.size();
    status = hailo_get_network_groups_infos(handle.hef, groups.data(), &count);
    if (status == HAILO_INSUFFICIENT_BUFFER) {
        groups.resize(count);
        status = hailo_get_network_groups_infos(handle.hef, groups.data(), &count);
    }
    if (status != HAILO_SUCCESS) return fail(status, "hef_info: no network group infos");
    std::ostringstream out;
    out << "{\"groups\": [";
    for (size_t g = 0; g < count; g++) {
        std::string name = fixed_text(groups[g].name, sizeof groups[g].name, 0);
        out << (g ? ", " : "") << "{\"name\": \"" << json_escape(name) << "\", \"multi_context\": "
            << (groups[g].is_multi_context ? "true" : "false") << ", \"streams\": [";
        int failed = group_streams_json(handle.hef, name, out);
        if (failed != HAILO_SUCCESS) return failed;
        out << "]}";
    }
    out << "]}";
    return write_text(out.str(), json, capacity, needed, "hef_info");
}

int infer(Session &s, void **inputs, size_t *input_sizes, size_t n_inputs, void **outputs, size_t *output_sizes,
          size_t n_outputs, unsigned timeout_ms) {
    int status = check_buffers(s.inputs, inputs, input_sizes, n_inputs, true, "input");
    if (status == HAILO_SUCCESS) status = check_buffers(s.outputs, outputs, output_sizes, n_outputs, false, "output");
    if (status != HAILO_SUCCESS) return status;
    auto targets = output_targets(s, outputs, output_sizes);
    auto bindings = make_bindings(s, inputs, targets.data());
    if (!bindings) return fail(bindings.status(), "infer: binding buffers failed");
    auto run = run_counted(s, bindings.value(), std::chrono::milliseconds(timeout_ms ? timeout_ms : 10000));
    if (run != HAILO_SUCCESS) return fail(run, "infer: run failed");
    for (size_t i = 0; i < n_outputs; i++) {
        if (targets[i] != outputs[i]) std::memcpy(outputs[i], targets[i], s.outputs[i].frame_size);
    }
    return HAILO_SUCCESS;
}

int acquire(const char *options, void **device) {
    Options o;
    int status = parse_options(options, o);
    if (status != HAILO_SUCCESS) return status;
    auto hold = shared_vdevice(o);
    if (!hold) return fail(hold.status(), "cannot open a Hailo device");
    *device = new Hold(hold.release());
    return HAILO_SUCCESS;
}

// Read through the held VDevice: the very device the sessions of this selection use.
int health_text(Hold &hold, char *json, size_t capacity, size_t *needed) {
    auto devices = hold.vdevice->get_physical_devices();
    if (!devices) return fail(devices.status(), "health: cannot list physical devices");
    if (devices->empty()) return fail(HAILO_INVALID_OPERATION, "health: no physical device");
    return write_text(health_json(devices->front().get()), json, capacity, needed, "health");
}

// A session is freed only once HailoRT holds none of its buffers. shutdown() aborts and then waits up to
// 10 s for transfers in flight, but HailoRT v5.2.0 returns deactivate()'s status whatever that wait
// did (net_flow/pipeline/infer_model.cpp, ConfiguredInferModelImpl::shutdown), and on Hailo-10H it is
// one request to the device's server (configured_infer_model_hrpc_client.cpp): so the shim also waits
// for its own jobs' callbacks. A session that failed either is leaked, never freed, and said so (1004).
int close_session(Session *s) {
    hailo_status status = s->is_configured ? s->configured.shutdown() : HAILO_SUCCESS;
    bool drained = s->inflight->drained(s->drain);
    if (status == HAILO_SUCCESS && drained) {
        delete s;
        return HAILO_SUCCESS;
    }
    std::string why = status != HAILO_SUCCESS ? "shutdown failed with status " + std::to_string(status) : "";
    if (!drained) {
        why += (why.empty() ? "" : " and ") + std::to_string(s->inflight->count()) + " job(s) still in flight after " +
               std::to_string(s->drain.count()) + " ms";
    }
    return fail(LOOP_LEAKED, "close: " + why + ": the session and its buffers are leaked, not freed, since the "
                             "device may still write into them (the caller's buffers must stay allocated too)");
}

}  // namespace

LOOP_HRT_EXPORT int loop_hrt_abi_version(void) {
    return ABI_VERSION;
}

LOOP_HRT_EXPORT int loop_hrt_open(const char *hef_path, const char *options, void **handle) {
    if (!hef_path || !handle) return fail(LOOP_BAD_ARGUMENT, "open: null argument");
    *handle = nullptr;
    return guarded("open", [&] { return open_session(hef_path, options, handle); });
}

LOOP_HRT_EXPORT int loop_hrt_layout(void *handle, char *json, size_t capacity, size_t *needed) {
    if (!handle) return fail(LOOP_BAD_ARGUMENT, "layout: null handle");
    return guarded("layout", [&] { return layout_text(*static_cast<Session *>(handle), json, capacity, needed); });
}

LOOP_HRT_EXPORT int loop_hrt_hef_layout(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    if (!hef_path) return fail(LOOP_BAD_ARGUMENT, "hef_layout: null path");
    return guarded("hef_layout", [&] { return hef_layout_text(hef_path, json, capacity, needed); });
}

LOOP_HRT_EXPORT int loop_hrt_hef_info(const char *hef_path, char *json, size_t capacity, size_t *needed) {
    if (!hef_path) return fail(LOOP_BAD_ARGUMENT, "hef_info: null path");
    return guarded("hef_info", [&] { return hef_info_text(hef_path, json, capacity, needed); });
}

LOOP_HRT_EXPORT int loop_hrt_infer(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                                   void **outputs, size_t *output_sizes, size_t n_outputs, unsigned timeout_ms) {
    if (!handle) return fail(LOOP_BAD_ARGUMENT, "infer: null handle");
    return guarded("infer", [&] {
        return infer(*static_cast<Session *>(handle), inputs, input_sizes, n_inputs, outputs, output_sizes,
                     n_outputs, timeout_ms);
    });
}

LOOP_HRT_EXPORT int loop_hrt_pipelined(void *handle, void **inputs, size_t *input_sizes, size_t n_inputs,
                                       uint64_t count, unsigned depth, double *elapsed_s, double *hw_latency_ms) {
    if (!handle || !elapsed_s || !hw_latency_ms) return fail(LOOP_BAD_ARGUMENT, "pipelined: null argument");
    return guarded("pipelined", [&] {
        auto &s = *static_cast<Session *>(handle);
        int status = check_buffers(s.inputs, inputs, input_sizes, n_inputs, true, "input");
        if (status != HAILO_SUCCESS) return status;
        size_t slots = (std::max)(static_cast<size_t>(1), (std::min)(static_cast<size_t>(depth), s.queue_size));
        status = run_pipelined(s, inputs, count, slots, elapsed_s);
        if (status == HAILO_SUCCESS) *hw_latency_ms = read_hw_latency(s);
        return status;
    });
}

LOOP_HRT_EXPORT int loop_hrt_hw_latency(void *handle, double *hw_latency_ms) {
    if (!handle || !hw_latency_ms) return fail(LOOP_BAD_ARGUMENT, "hw_latency: null argument");
    return guarded("hw_latency", [&] {
        *hw_latency_ms = read_hw_latency(*static_cast<Session *>(handle));
        return HAILO_SUCCESS;
    });
}

LOOP_HRT_EXPORT int loop_hrt_device_acquire(const char *options, void **device) {
    if (!device) return fail(LOOP_BAD_ARGUMENT, "device_acquire: null argument");
    *device = nullptr;
    return guarded("device_acquire", [&] { return acquire(options, device); });
}

LOOP_HRT_EXPORT int loop_hrt_device_release(void *device) {
    if (!device) return HAILO_SUCCESS;
    return guarded("device_release", [&] {
        delete static_cast<Hold *>(device);
        return HAILO_SUCCESS;
    });
}

LOOP_HRT_EXPORT int loop_hrt_health(void *device, char *json, size_t capacity, size_t *needed) {
    if (!device) return fail(LOOP_BAD_ARGUMENT, "health: null device hold");
    return guarded("health", [&] { return health_text(*static_cast<Hold *>(device), json, capacity, needed); });
}

LOOP_HRT_EXPORT size_t loop_hrt_last_error(char *text, size_t capacity) {
    if (text && capacity) {
        size_t n = (std::min)(capacity - 1, t_last_error.size());
        std::memcpy(text, t_last_error.data(), n);
        text[n] = '\0';
    }
    return t_last_error.size();
}

LOOP_HRT_EXPORT int loop_hrt_close(void *handle) {
    if (!handle) return HAILO_SUCCESS;
    return guarded("close", [&] { return close_session(static_cast<Session *>(handle)); });
}
