// FAKE HailoRT: a test double for loop's tests. It is not HailoRT and runs on no Hailo hardware.
//
// It implements the API declared in include/hailo/hailort.hpp so that the real shim
// (shim/hailort_shim.cpp) can be compiled, loaded through ctypes and driven by the tests. The
// behaviours it mimics are HailoRT v5.2.0's, each named where it is implemented below.
//
// Its "HEF" is a text file of tokens: "FAKEHEF in=HxWxC [in=...] out=HxWxC[:multiquant][:nms|:hostnms]
// [...] [planes=N] [arch=NAME] [throw=open|layout|run]". Inputs are uint8 (scale 1/128, zero point 128);
// outputs uint8 (scale 0.5, zero point 3) unless ":multiquant" makes their quantization info
// INVALID_QUANT_INFO, as a HEF with per-feature output scales does. ":nms" is NMS on the chip (its
// physical stream is of order HAILO_NMS_ON_CHIP), ":hostnms" NMS that HailoRT runs on the host (an
// NMS output over an ordinary stream). Anything else is refused with HAILO_INVALID_HEF. Each output
// byte is a deterministic function of every input byte.
//
// Devices: "fake/0" (the one a VDevice without device ids gets) and "fake/1".
// Environment: FAKE_HAILORT_ARCH (the device's architecture, default hailo10h),
// FAKE_HAILORT_BOARD_NUL=1 (a board name with a NUL inside its stated length),
// FAKE_HAILORT_PAGE_TAIL=1 (writes fill the rest of an output's last page, as the DMA may),
// FAKE_HAILORT_EVENTS=<file> (each VDevice created or destroyed appends "create <group> <pid>" or
// "destroy <pid>": what processes of a sweep did, for tests and for a stand-in hailortcli).
// fake_hailort_counters() reports what the shim asked for; fake_hailort_reset() clears it;
// fake_hailort_fail_runs(status, n) makes the next n runs (sync or async) answer status.
// On a Hailo-8 (FAKE_HAILORT_ARCH=hailo8...) a failed async job's wait answers success; its callback the status.
// fake_hailort_stall_jobs(1, status): async jobs started from now on stay in flight, holding their
// buffers (their wait answers HAILO_TIMEOUT at once), and shutdown() leaves them so and answers status:
// what HailoRT does when its 10 s wait for transfers runs out (infer_model.cpp,
// ConfiguredInferModelImpl::shutdown, whose status is deactivate()'s whatever the wait did).
// fake_hailort_stall_jobs(0, 0) completes them (callbacks with HAILO_STREAM_ABORT) and ends the mode.
// Freed buffers: the shim's aligned ::operator delete is wrapped at link time (-Wl,--wrap, see
// tests/devices/conftest.py); freeing a block that holds a stalled job's buffer counts
// freed_in_flight, says so on stderr and leaves the block allocated, as live DMA would still use it.
#include "hailo/hailort.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <new>

#include <malloc.h>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace hailort {

namespace {

constexpr float IN_SCALE = 1.0f / 128, IN_ZP = 128, OUT_SCALE = 0.5f, OUT_ZP = 3;
constexpr size_t QUEUE_SIZE = 4;

struct Counters {
    int dma_maps = 0, dma_unmaps = 0, live_vdevices = 0, configures = 0, output_binds = 0, misaligned_outputs = 0;
    int last_batch = -1, last_power_mode = -1, last_latency_flags = 0, shutdowns = 0;
    int vdevice_creates = 0, peak_live_vdevices = 0, fail_runs = 0, fail_status = 0;
    int stall = 0, stall_shutdown_status = 0, freed_in_flight = 0;
    int dtor_waits = 0;  // destructors of undetached jobs still in flight: 10 s each on HailoRT
    std::string active_group;
};

// A job started while jobs stall: the buffers it holds and the callback it owes.
struct StalledJob {
    std::vector<MemoryView> buffers;
    std::function<void(const AsyncInferCompletionInfo &)> callback;
};
std::vector<StalledJob> g_stalled;  // guarded by g_mutex

std::mutex g_mutex;
Counters g_counters;

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

void record_event(const std::string &what) {
    const char *path = std::getenv("FAKE_HAILORT_EVENTS");
    if (!path) return;
    std::ofstream(path, std::ios::app) << what << " " << getpid() << "\n";
}

bool env_on(const char *name) {
    const char *value = std::getenv(name);
    return value && std::strcmp(value, "1") == 0;
}

std::string device_arch() {
    const char *arch = std::getenv("FAKE_HAILORT_ARCH");
    return arch ? arch : "hailo10h";
}

}  // namespace

struct FakeStreamState {
    std::string name;
    hailo_3d_image_shape_t shape;
    hailo_format_t format;
    hailo_quant_info_t quant;
    bool nms = false;  // an NMS output
    bool on_chip = false;  // its NMS runs on the chip (physical stream of order HAILO_NMS_ON_CHIP)
    bool throws = false;

    size_t frame_size() const {
        size_t item = format.type == HAILO_FORMAT_TYPE_FLOAT32 ? 4 : format.type == HAILO_FORMAT_TYPE_UINT16 ? 2 : 1;
        return size_t(shape.height) * shape.width * shape.features * item;
    }
};

struct FakeHefSpec {
    std::vector<FakeStreamState> inputs, outputs;
    int planes = 1;
    std::string arch = "hailo10h", throw_at;
};

namespace {

bool parse_shape(const std::string &text, hailo_3d_image_shape_t &shape) {
    return std::sscanf(text.c_str(), "%ux%ux%u", &shape.height, &shape.width, &shape.features) == 3;
}

bool parse_stream(const std::string &text, bool output, size_t index, FakeStreamState &s) {
    s.name = std::string(output ? "fake/output" : "fake/input") + std::to_string(index);
    s.format = {HAILO_FORMAT_TYPE_UINT8, output ? HAILO_FORMAT_ORDER_NHWC : HAILO_FORMAT_ORDER_NHWC, HAILO_FORMAT_FLAGS_NONE};
    s.quant = output ? hailo_quant_info_t{OUT_ZP, OUT_SCALE, 0, 0} : hailo_quant_info_t{IN_ZP, IN_SCALE, 0, 0};
    if (text.find(":multiquant") != std::string::npos) s.quant = hailo_quant_info_t{0, 0, 0, 0};  // INVALID_QUANT_INFO
    s.on_chip = text.find(":nms") != std::string::npos;
    s.nms = s.on_chip || text.find(":hostnms") != std::string::npos;
    return parse_shape(text.substr(0, text.find(':')), s.shape);
}

hailo_status read_spec(const std::string &path, FakeHefSpec &spec) {
    std::ifstream file(path);
    if (!file) return HAILO_OPEN_FILE_FAILURE;
    std::string word;
    if (!(file >> word) || word != "FAKEHEF") return HAILO_INVALID_HEF;
    while (file >> word) {
        auto eq = word.find('=');
        std::string key = word.substr(0, eq), value = eq == std::string::npos ? "" : word.substr(eq + 1);
        FakeStreamState stream;
        if (key == "in" && parse_stream(value, false, spec.inputs.size(), stream)) spec.inputs.push_back(stream);
        else if (key == "out" && parse_stream(value, true, spec.outputs.size(), stream)) spec.outputs.push_back(stream);
        else if (key == "planes") spec.planes = std::atoi(value.c_str());
        else if (key == "arch") spec.arch = value;
        else if (key == "throw") spec.throw_at = value;
        else return HAILO_INVALID_HEF;
    }
    return spec.inputs.empty() || spec.outputs.empty() ? HAILO_INVALID_HEF : HAILO_SUCCESS;
}

void compute(const FakeHefSpec &spec, const std::vector<MemoryView> &ins, std::vector<MemoryView> &outs) {
    uint32_t acc = 2166136261u;
    for (auto &in : ins) {
        for (size_t i = 0; i < in.size(); i++) acc = (acc ^ in.data()[i]) * 16777619u;
    }
    const uint8_t *first = ins.front().data();
    size_t first_size = ins.front().size();
    for (size_t k = 0; k < outs.size(); k++) {
        const FakeStreamState &out = spec.outputs[k];
        size_t count = size_t(out.shape.height) * out.shape.width * out.shape.features;
        for (size_t j = 0; j < count; j++) {
            auto q = static_cast<uint8_t>((acc >> (j % 24)) + j * 31u + first[j % first_size]);
            if (out.format.type == HAILO_FORMAT_TYPE_FLOAT32) {
                reinterpret_cast<float *>(outs[k].data())[j] = (q - OUT_ZP) * OUT_SCALE;  // per-feature dequantized
            } else {
                outs[k].data()[j] = q;
            }
        }
        if (env_on("FAKE_HAILORT_PAGE_TAIL")) {  // infer_model.hpp: the DMA may fill the last page
            size_t end = (outs[k].size() + page() - 1) / page() * page();
            std::memset(outs[k].data() + outs[k].size(), 0xEE, end - outs[k].size());
        }
    }
}

}  // namespace

struct FakeBindingsState {
    std::map<std::string, MemoryView> inputs, outputs;
};

struct FakeConfiguredState {
    std::shared_ptr<FakeHefSpec> spec;
    bool hw_latency = false, clear_after_get = false;
    double latency_sum_ms = 0;
    int latency_frames = 0;
};

// ---------------------------------------------------------------- common, hef

Expected<hailo_device_id_t> HailoRTCommon::to_device_id(const std::string &device_id) {
    hailo_device_id_t id{};
    if (device_id.size() >= sizeof id.id) return make_unexpected(HAILO_INVALID_ARGUMENT);
    std::memcpy(id.id, device_id.c_str(), device_id.size());
    return id;
}

uint32_t HailoRTCommon::get_frame_size(const hailo_vstream_info_t &info, hailo_format_t format) {
    if (is_nms(info)) return 64;
    uint32_t item = format.type == HAILO_FORMAT_TYPE_FLOAT32 ? 4 : format.type == HAILO_FORMAT_TYPE_UINT16 ? 2 : 1;
    return info.shape.height * info.shape.width * info.shape.features * item;
}

bool HailoRTCommon::is_nms(const hailo_vstream_info_t &info) { return info.format.order == HAILO_FORMAT_ORDER_HAILO_NMS; }

namespace {

hailo_vstream_info_t vstream_info(const FakeStreamState &s, hailo_stream_direction_t direction) {
    hailo_vstream_info_t info{};
    std::snprintf(info.name, sizeof info.name, "%s", s.name.c_str());
    info.direction = direction;
    info.format = s.format;
    if (s.nms) info.format.order = HAILO_FORMAT_ORDER_HAILO_NMS;
    if (s.nms) info.nms_shape = {1, 8};
    else info.shape = s.shape;
    info.quant_info = s.quant;
    return info;
}

}  // namespace

Expected<Hef> Hef::create(const std::string &hef_path) {
    auto spec = std::make_shared<FakeHefSpec>();
    auto status = read_spec(hef_path, *spec);
    if (status != HAILO_SUCCESS) return make_unexpected(status);
    return Hef(spec);
}

Expected<std::vector<hailo_vstream_info_t>> Hef::get_input_vstream_infos(const std::string &) const {
    std::vector<hailo_vstream_info_t> out;
    for (auto &s : m_spec->inputs) out.push_back(vstream_info(s, HAILO_H2D_STREAM));
    return out;
}

Expected<std::vector<hailo_vstream_info_t>> Hef::get_output_vstream_infos(const std::string &) const {
    std::vector<hailo_vstream_info_t> out;
    for (auto &s : m_spec->outputs) out.push_back(vstream_info(s, HAILO_D2H_STREAM));
    return out;
}

namespace {

hailo_stream_info_t stream_info(const FakeStreamState &s, hailo_stream_direction_t direction) {
    hailo_stream_info_t info{};
    std::snprintf(info.name, sizeof info.name, "%s", s.name.c_str());
    info.direction = direction;
    info.format = s.format;
    if (s.on_chip) info.format.order = HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP;
    return info;
}

}  // namespace

// layer_info.hpp (get_stream_infos_from_layer_info): one physical stream per plane of an input.
Expected<std::vector<hailo_stream_info_t>> Hef::get_input_stream_infos(const std::string &) const {
    std::vector<hailo_stream_info_t> out;
    for (auto &s : m_spec->inputs) {
        for (int plane = 0; plane < m_spec->planes; plane++) out.push_back(stream_info(s, HAILO_H2D_STREAM));
    }
    return out;
}

Expected<std::vector<hailo_stream_info_t>> Hef::get_output_stream_infos(const std::string &) const {
    std::vector<hailo_stream_info_t> out;
    for (auto &s : m_spec->outputs) out.push_back(stream_info(s, HAILO_D2H_STREAM));
    return out;
}

// ---------------------------------------------------------------- infer model

const std::string InferModel::InferStream::name() const { return m_state->name; }

hailo_3d_image_shape_t InferModel::InferStream::shape() const {
    if (m_state->throws) throw std::runtime_error("fake HailoRT: thrown on purpose (throw=layout)");
    return m_state->shape;
}

hailo_format_t InferModel::InferStream::format() const { return m_state->format; }
size_t InferModel::InferStream::get_frame_size() const { return m_state->frame_size(); }
void InferModel::InferStream::set_format_type(hailo_format_type_t type) { m_state->format.type = type; }
std::vector<hailo_quant_info_t> InferModel::InferStream::get_quant_infos() const { return {m_state->quant}; }
bool InferModel::InferStream::is_nms() const { return m_state->nms; }

namespace {

class FakeInferModel : public InferModel {
public:
    explicit FakeInferModel(std::shared_ptr<FakeHefSpec> spec) : m_spec(std::move(spec)) {
        for (auto &s : m_spec->inputs) m_inputs.emplace_back(std::shared_ptr<FakeStreamState>(m_spec, &s));
        for (auto &s : m_spec->outputs) m_outputs.emplace_back(std::shared_ptr<FakeStreamState>(m_spec, &s));
        if (m_spec->throw_at == "layout") m_spec->outputs.front().throws = true;
    }
    void set_batch_size(uint16_t batch_size) override { locked([&] { g_counters.last_batch = batch_size; }); }
    void set_power_mode(hailo_power_mode_t mode) override { locked([&] { g_counters.last_power_mode = mode; }); }
    void set_hw_latency_measurement_flags(hailo_latency_measurement_flags_t flags) override {
        m_latency = flags;
        locked([&] { g_counters.last_latency_flags = flags; });
    }
    Expected<ConfiguredInferModel> configure() override;
    Expected<InferStream> input(const std::string &name) override { return find(m_inputs, name); }
    Expected<InferStream> output(const std::string &name) override { return find(m_outputs, name); }
    const std::vector<InferStream> &inputs() const override { return m_inputs; }
    const std::vector<InferStream> &outputs() const override { return m_outputs; }

private:
    template <typename F> static void locked(F &&f) {
        std::lock_guard<std::mutex> lock(g_mutex);
        f();
    }
    static Expected<InferStream> find(const std::vector<InferStream> &streams, const std::string &name) {
        for (auto &s : streams) {
            if (s.name() == name) return InferStream(s);
        }
        return make_unexpected(HAILO_INVALID_ARGUMENT);
    }
    std::shared_ptr<FakeHefSpec> m_spec;
    std::vector<InferStream> m_inputs, m_outputs;
    hailo_latency_measurement_flags_t m_latency = HAILO_LATENCY_NONE;
};

// resource_manager.cpp (create_hw_latency_meter): refused for several physical inputs or on-chip NMS.
bool latency_refused(const FakeHefSpec &spec) {
    bool nms = false;
    for (auto &o : spec.outputs) nms = nms || o.on_chip;
    return nms || spec.inputs.size() * size_t(spec.planes) > 1;
}

Expected<ConfiguredInferModel> FakeInferModel::configure() {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_counters.configures++;
    }
    bool measure = (m_latency & HAILO_LATENCY_MEASURE) != 0;
    if (measure && latency_refused(*m_spec)) {
        std::fprintf(stderr, "[HailoRT] [warning] HW Latency measurement is supported on networks with a single input. "
                             "the model has %zu physical inputs.\n", m_spec->inputs.size() * size_t(m_spec->planes));
        return make_unexpected(HAILO_INVALID_OPERATION);
    }
    auto state = std::make_shared<FakeConfiguredState>();
    state->spec = m_spec;
    state->hw_latency = measure;
    state->clear_after_get = (m_latency & HAILO_LATENCY_CLEAR_AFTER_GET) != 0;
    return ConfiguredInferModel(state);
}

}  // namespace

// ---------------------------------------------------------------- configured model, bindings

hailo_status ConfiguredInferModel::Bindings::InferStream::set_buffer(MemoryView view) {
    if (m_is_output) {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_counters.output_binds++;
        if (reinterpret_cast<uintptr_t>(view.data()) % page()) g_counters.misaligned_outputs++;
    }
    (m_is_output ? m_state->outputs : m_state->inputs)[m_name] = view;
    return HAILO_SUCCESS;
}

Expected<ConfiguredInferModel::Bindings::InferStream> ConfiguredInferModel::Bindings::input(const std::string &name) {
    return InferStream(m_state, name, false);
}

Expected<ConfiguredInferModel::Bindings::InferStream> ConfiguredInferModel::Bindings::output(const std::string &name) {
    return InferStream(m_state, name, true);
}

Expected<ConfiguredInferModel::Bindings> ConfiguredInferModel::create_bindings() {
    return Bindings(std::make_shared<FakeBindingsState>());
}

hailo_status ConfiguredInferModel::wait_for_async_ready(std::chrono::milliseconds, uint32_t frames_count) {
    return frames_count <= QUEUE_SIZE ? HAILO_SUCCESS : HAILO_INVALID_OPERATION;
}

namespace {

// fake_hailort_fail_runs: the status a run answers instead of running, while any are left.
hailo_status injected_failure() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_counters.fail_runs <= 0) return HAILO_SUCCESS;
    g_counters.fail_runs--;
    return static_cast<hailo_status>(g_counters.fail_status);
}

}  // namespace

namespace {

// fake_hailort_stall_jobs: a job started now stays in flight with its buffers; false when not stalling.
bool stalled(const ConfiguredInferModel::Bindings &bindings, std::function<void(const AsyncInferCompletionInfo &)> callback) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_counters.stall) return false;
    StalledJob job{{}, std::move(callback)};
    for (auto &in : bindings.state()->inputs) job.buffers.push_back(in.second);
    for (auto &out : bindings.state()->outputs) job.buffers.push_back(out.second);
    g_stalled.push_back(std::move(job));
    return true;
}

}  // namespace

// infer_model.cpp (ConfiguredInferModelBase::run): run_async and a wait, so a run that times out
// leaves its job in flight.
hailo_status ConfiguredInferModel::run(const Bindings &bindings, std::chrono::milliseconds) {
    if (stalled(bindings, ASYNC_INFER_EMPTY_CALLBACK)) return HAILO_TIMEOUT;
    return compute_run(bindings);
}

hailo_status ConfiguredInferModel::compute_run(const Bindings &bindings) {
    auto &spec = *m_state->spec;
    if (auto failure = injected_failure()) return failure;
    if (spec.throw_at == "run") throw std::runtime_error("fake HailoRT: thrown on purpose (throw=run)");
    std::vector<MemoryView> ins, outs;
    for (auto &s : spec.inputs) ins.push_back(bindings.state()->inputs.at(s.name));
    for (auto &s : spec.outputs) outs.push_back(bindings.state()->outputs.at(s.name));
    for (size_t i = 0; i < ins.size(); i++) {
        if (ins[i].size() != spec.inputs[i].frame_size()) return HAILO_INVALID_OPERATION;  // hrpc client's check
    }
    for (size_t i = 0; i < outs.size(); i++) {
        if (outs[i].size() != spec.outputs[i].frame_size()) return HAILO_INVALID_OPERATION;
    }
    auto start = std::chrono::steady_clock::now();
    compute(spec, ins, outs);
    if (m_state->hw_latency) {
        m_state->latency_sum_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        m_state->latency_frames++;
    }
    return HAILO_SUCCESS;
}


Expected<AsyncInferJob> ConfiguredInferModel::run_async(const Bindings &bindings,
                                                        std::function<void(const AsyncInferCompletionInfo &)> callback) {
    if (stalled(bindings, callback)) return AsyncInferJob(HAILO_TIMEOUT);  // its wait times out
    auto status = compute_run(bindings);  // synchronous: the fake has no queue
    callback(AsyncInferCompletionInfo{status});
    // A Hailo-8 job's wait answers success once its callback ran, whatever the job's status: only the
    // callback carries it (AsyncInferJobImpl::wait, infer_model.cpp, hailort v4.23.0); Hailo-10H's wait
    // answers the job's status (AsyncInferJobHrpcClient::wait, configured_infer_model_hrpc_client.cpp, v5.2.0).
    return AsyncInferJob(device_arch().rfind("hailo8", 0) == 0 ? HAILO_SUCCESS : status);
}

Expected<LatencyMeasurementResult> ConfiguredInferModel::get_hw_latency_measurement() {
    if (!m_state->hw_latency || !m_state->latency_frames) return make_unexpected(HAILO_NOT_AVAILABLE);
    auto avg = std::chrono::duration<double, std::milli>(m_state->latency_sum_ms / m_state->latency_frames);
    if (m_state->clear_after_get) {
        m_state->latency_sum_ms = 0;
        m_state->latency_frames = 0;
    }
    return LatencyMeasurementResult{std::chrono::duration_cast<std::chrono::nanoseconds>(avg)};
}

Expected<size_t> ConfiguredInferModel::get_async_queue_size() const { return QUEUE_SIZE; }

hailo_status ConfiguredInferModel::shutdown() {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_counters.shutdowns++;
    return g_counters.stall ? static_cast<hailo_status>(g_counters.stall_shutdown_status) : HAILO_SUCCESS;
}

hailo_status AsyncInferJob::wait(std::chrono::milliseconds) { return m_result; }

AsyncInferJob::~AsyncInferJob() {
    if (!m_should_wait_in_dtor || m_result != HAILO_TIMEOUT) return;  // done: HailoRT's wait returns at once
    std::lock_guard<std::mutex> lock(g_mutex);
    g_counters.dtor_waits++;
}

// ---------------------------------------------------------------- devices

namespace {

class FakeDevice : public Device {
public:
    explicit FakeDevice(std::string id) : m_id(std::move(id)) {}
    const char *get_dev_id() const override { return m_id.c_str(); }
    Expected<hailo_chip_temperature_info_t> get_chip_temperature() override {
        return hailo_chip_temperature_info_t{41.5f, 41.0f, 1};
    }
    // hrpc_protocol/serializer.cpp (IdentifyDeviceSerializer): Hailo-10H leaves serial_number_length 0.
    Expected<hailo_device_identity_t> identify() override {
        hailo_device_identity_t id{};
        id.fw_version = {5, 2, 0};
        std::memcpy(id.serial_number, "FAKESERIAL01", 12);
        if (env_on("FAKE_HAILORT_BOARD_NUL")) {
            std::memcpy(id.board_name, "Hailo\0-10H", 10);
            id.board_name_length = 10;
        } else {
            std::memcpy(id.board_name, "Hailo-10H", 9);
            id.board_name_length = 9;
        }
        return id;
    }

private:
    std::string m_id;
};

class FakeVDevice : public VDevice {
public:
    FakeVDevice(std::string group, std::string device) : m_group(std::move(group)), m_device(std::move(device)) {}
    ~FakeVDevice() override {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_counters.live_vdevices--;
        record_event("destroy");
    }
    Expected<std::shared_ptr<InferModel>> create_infer_model(const std::string &hef_path, const std::string &) override {
        auto spec = std::make_shared<FakeHefSpec>();
        auto status = read_spec(hef_path, *spec);
        if (status != HAILO_SUCCESS) return make_unexpected(status);
        if (spec->throw_at == "open") throw std::runtime_error("fake HailoRT: thrown on purpose (throw=open)");
        if (spec->arch != device_arch()) return make_unexpected(HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE);
        return std::shared_ptr<InferModel>(std::make_shared<FakeInferModel>(spec));
    }
    Expected<std::vector<std::reference_wrapper<Device>>> get_physical_devices() const override {
        return std::vector<std::reference_wrapper<Device>>{std::ref(const_cast<FakeDevice &>(m_device))};
    }
    hailo_status dma_map(void *, size_t, hailo_dma_buffer_direction_t) override {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_counters.dma_maps++;
        return HAILO_SUCCESS;
    }
    hailo_status dma_unmap(void *, size_t, hailo_dma_buffer_direction_t) override {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_counters.dma_unmaps++;
        return HAILO_SUCCESS;
    }

private:
    std::string m_group;
    FakeDevice m_device;
};

}  // namespace

// hailort_server.cpp (VDeviceManager::create_vdevice): with "UNIQUE" or another group while a
// VDevice is open, the server waits 5 s and answers HAILO_DEVICE_IN_USE; the client
// (vdevice_hrpc_client.cpp, create_available_vdevice) passes that on when device ids were given and
// otherwise reports HAILO_OUT_OF_PHYSICAL_DEVICES. The fake answers at once, within one process
// (a process's VDevices stand for the server's clients). vdevice.cpp: an unknown device_id is
// HAILO_INVALID_ARGUMENT.
Expected<std::unique_ptr<VDevice>> VDevice::create(const hailo_vdevice_params_t &params) {
    std::string group = params.group_id ? params.group_id : HAILO_DEFAULT_VDEVICE_GROUP_ID;
    std::string device = params.device_ids ? params.device_ids[0].id : "fake/0";  // the first free one
    if (device != "fake/0" && device != "fake/1") {
        std::fprintf(stderr, "[HailoRT] [error] VDevice creation failed. device_id %s not found\n", params.device_ids[0].id);
        return make_unexpected(HAILO_INVALID_ARGUMENT);
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    bool shared = group != HAILO_UNIQUE_VDEVICE_GROUP_ID && group == g_counters.active_group;
    if (g_counters.live_vdevices > 0 && !shared) {
        std::fprintf(stderr, "[HailoRT] [error] Failed to create vdevice. there are not enough free devices. "
                             "requested: 1, found: 0\n");
        return make_unexpected(params.device_ids ? HAILO_DEVICE_IN_USE : HAILO_OUT_OF_PHYSICAL_DEVICES);
    }
    g_counters.live_vdevices++;
    g_counters.vdevice_creates++;
    if (g_counters.live_vdevices > g_counters.peak_live_vdevices) g_counters.peak_live_vdevices = g_counters.live_vdevices;
    g_counters.active_group = group;
    record_event("create " + group);
    return std::unique_ptr<VDevice>(new FakeVDevice(group, device));
}

Expected<std::unique_ptr<VDevice>> VDevice::create() {
    hailo_vdevice_params_t params{};
    hailo_init_vdevice_params(&params);
    return create(params);
}

Expected<std::unique_ptr<VDevice>> VDevice::create(const std::vector<std::string> &device_ids) {
    hailo_vdevice_params_t params{};
    hailo_init_vdevice_params(&params);
    auto id = HailoRTCommon::to_device_id(device_ids.at(0));
    if (!id) return make_unexpected(id.status());
    params.device_ids = &id.value();
    return create(params);
}

}  // namespace hailort

extern "C" HAILORTAPI hailo_status hailo_init_vdevice_params(hailo_vdevice_params_t *params) {
    if (!params) return HAILO_INVALID_ARGUMENT;
    *params = hailo_vdevice_params_t{1, nullptr, HAILO_SCHEDULING_ALGORITHM_ROUND_ROBIN, HAILO_DEFAULT_VDEVICE_GROUP_ID, false};
    return HAILO_SUCCESS;
}

// Test hooks, not HailoRT API: what the shim asked of the fake since the last reset.
extern "C" HAILORTAPI size_t fake_hailort_counters(char *json, size_t capacity) {
    using hailort::g_counters;
    std::lock_guard<std::mutex> lock(hailort::g_mutex);
    std::ostringstream out;
    out << "{\"dma_maps\": " << g_counters.dma_maps << ", \"dma_unmaps\": " << g_counters.dma_unmaps
        << ", \"live_vdevices\": " << g_counters.live_vdevices << ", \"configures\": " << g_counters.configures
        << ", \"output_binds\": " << g_counters.output_binds << ", \"misaligned_outputs\": " << g_counters.misaligned_outputs
        << ", \"last_batch\": " << g_counters.last_batch << ", \"last_power_mode\": " << g_counters.last_power_mode
        << ", \"last_latency_flags\": " << g_counters.last_latency_flags << ", \"shutdowns\": " << g_counters.shutdowns
        << ", \"vdevice_creates\": " << g_counters.vdevice_creates
        << ", \"peak_live_vdevices\": " << g_counters.peak_live_vdevices
        << ", \"stalled_jobs\": " << hailort::g_stalled.size() << ", \"freed_in_flight\": " << g_counters.freed_in_flight
        << ", \"dtor_waits\": " << g_counters.dtor_waits
        << ", \"active_group\": \"" << g_counters.active_group << "\"}";
    std::string text = out.str();
    if (json && capacity > text.size()) std::memcpy(json, text.c_str(), text.size() + 1);
    return text.size() + 1;
}

extern "C" HAILORTAPI void fake_hailort_reset(void) {
    std::lock_guard<std::mutex> lock(hailort::g_mutex);
    int live = hailort::g_counters.live_vdevices;
    std::string group = hailort::g_counters.active_group;
    hailort::g_counters = hailort::Counters{};
    hailort::g_counters.live_vdevices = live;  // open VDevices are state, not counts
    hailort::g_counters.peak_live_vdevices = live;
    hailort::g_counters.active_group = group;
}

extern "C" HAILORTAPI void fake_hailort_fail_runs(int status, int count) {
    std::lock_guard<std::mutex> lock(hailort::g_mutex);
    hailort::g_counters.fail_status = status;
    hailort::g_counters.fail_runs = count;
}

extern "C" HAILORTAPI void fake_hailort_stall_jobs(int stall, int shutdown_status) {
    std::vector<hailort::StalledJob> done;
    {
        std::lock_guard<std::mutex> lock(hailort::g_mutex);
        hailort::g_counters.stall = stall;
        hailort::g_counters.stall_shutdown_status = shutdown_status;
        if (!stall) done.swap(hailort::g_stalled);
    }
    for (auto &job : done) job.callback(hailort::AsyncInferCompletionInfo{HAILO_STREAM_ABORT});
}

// The shim's aligned delete (its PageBuffers), redirected here by -Wl,--wrap=_ZdlPvSt11align_val_t.
extern "C" void __real__ZdlPvSt11align_val_t(void *ptr, std::align_val_t align);

extern "C" void __wrap__ZdlPvSt11align_val_t(void *ptr, std::align_val_t align) {
    if (ptr) {
        auto *begin = static_cast<uint8_t *>(ptr);
        const uint8_t *end = begin + malloc_usable_size(ptr);
        std::lock_guard<std::mutex> lock(hailort::g_mutex);
        for (auto &job : hailort::g_stalled) {
            for (auto &view : job.buffers) {
                if (view.data() < end && view.data() + view.size() > begin) {
                    hailort::g_counters.freed_in_flight++;
                    std::fprintf(stderr, "[FAKE HailoRT] a buffer an in-flight job holds was freed: left allocated\n");
                    return;
                }
            }
        }
    }
    __real__ZdlPvSt11align_val_t(ptr, align);
}
