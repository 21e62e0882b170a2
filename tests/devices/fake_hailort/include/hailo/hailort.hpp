// FAKE HailoRT C++ header (a test double for loop's tests, not HailoRT).
//
// Declares the subset of HailoRT's C++ API that shim/hailort_shim.cpp calls, with the same names
// and signatures as hailo-ai/hailort v5.2.0 (hailo/expected.hpp, buffer.hpp, device.hpp,
// vdevice.hpp, hef.hpp, infer_model.hpp, hailort_common.hpp, network_group.hpp). Expected keeps
// HailoRT's deleted assignments so the shim cannot rely on what the real one forbids. The
// behaviour behind it is fake_hailort.cpp's; nothing here runs on a Hailo device. Written with
// no min/max calls, so a min/max macro cannot break it.
#ifndef FAKE_HAILO_HAILORT_HPP_
#define FAKE_HAILO_HAILORT_HPP_

#include "hailo/hailort.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hailort {

struct Unexpected {
    hailo_status status;
};

inline Unexpected make_unexpected(hailo_status status) { return Unexpected{status}; }

template <typename T>
class Expected {
public:
    Expected(const T &value) : m_status(HAILO_SUCCESS), m_value(value) {}
    Expected(T &&value) : m_status(HAILO_SUCCESS), m_value(std::move(value)) {}
    Expected(Unexpected unexpected) : m_status(unexpected.status) {}
    Expected(Expected<T> &&other) : m_status(other.m_status), m_value(std::move(other.m_value)) {}
    explicit Expected(const Expected<T> &other) = default;
    Expected<T> &operator=(const Expected<T> &other) = delete;
    Expected<T> &operator=(Expected<T> &&other) noexcept = delete;

    explicit operator bool() const { return m_status == HAILO_SUCCESS; }
    hailo_status status() const { return m_status; }
    T &value() & { return *m_value; }
    const T &value() const & { return *m_value; }
    T release() { return std::move(*m_value); }
    T *operator->() { return &*m_value; }
    const T *operator->() const { return &*m_value; }
    T &operator*() & { return *m_value; }

private:
    hailo_status m_status;
    std::optional<T> m_value;
};

class MemoryView {
public:
    MemoryView() noexcept : m_data(nullptr), m_size(0) {}
    MemoryView(void *data, size_t size) noexcept : m_data(static_cast<uint8_t *>(data)), m_size(size) {}
    uint8_t *data() noexcept { return m_data; }
    const uint8_t *data() const noexcept { return m_data; }
    size_t size() const noexcept { return m_size; }

private:
    uint8_t *m_data;
    size_t m_size;
};

struct LatencyMeasurementResult {
    std::chrono::nanoseconds avg_hw_latency;
};

class HAILORTAPI HailoRTCommon {
public:
    static Expected<hailo_device_id_t> to_device_id(const std::string &device_id);
    static uint32_t get_frame_size(const hailo_vstream_info_t &vstream_info, hailo_format_t format);
    static bool is_nms(const hailo_vstream_info_t &vstream_info);
};

class HAILORTAPI Device {
public:
    virtual ~Device() = default;
    virtual const char *get_dev_id() const = 0;
    virtual Expected<hailo_device_identity_t> identify() = 0;
    virtual Expected<hailo_chip_temperature_info_t> get_chip_temperature() = 0;
};

struct FakeHefSpec;

class HAILORTAPI Hef {
public:
    static Expected<Hef> create(const std::string &hef_path);
    Expected<std::vector<hailo_vstream_info_t>> get_input_vstream_infos(const std::string &name = "") const;
    Expected<std::vector<hailo_vstream_info_t>> get_output_vstream_infos(const std::string &name = "") const;
    Expected<std::vector<hailo_stream_info_t>> get_input_stream_infos(const std::string &name = "") const;
    Expected<std::vector<hailo_stream_info_t>> get_output_stream_infos(const std::string &name = "") const;
    explicit Hef(std::shared_ptr<FakeHefSpec> spec) : m_spec(std::move(spec)) {}

private:
    std::shared_ptr<FakeHefSpec> m_spec;
};

struct AsyncInferCompletionInfo {
    hailo_status status;
};

static const auto ASYNC_INFER_EMPTY_CALLBACK = [](const AsyncInferCompletionInfo &) {};

// As HailoRT v5.2.0's (infer_model.cpp): a started job's destructor waits for it unless detached,
// up to WAIT_FOR_ASYNC_IN_DTOR_TIMEOUT; a moved-from job waits for nothing. The fake counts a
// destructor that would wait on a job still in flight (a stalled one) instead of waiting.
class HAILORTAPI AsyncInferJob {
public:
    AsyncInferJob() = default;
    explicit AsyncInferJob(hailo_status result) : m_result(result), m_should_wait_in_dtor(true) {}
    AsyncInferJob(const AsyncInferJob &other) = delete;
    AsyncInferJob &operator=(const AsyncInferJob &other) = delete;
    AsyncInferJob(AsyncInferJob &&other)
        : m_result(other.m_result), m_should_wait_in_dtor(std::exchange(other.m_should_wait_in_dtor, false)) {}
    AsyncInferJob &operator=(AsyncInferJob &&other) {
        m_result = other.m_result;
        m_should_wait_in_dtor = std::exchange(other.m_should_wait_in_dtor, false);
        return *this;
    }
    ~AsyncInferJob();
    hailo_status wait(std::chrono::milliseconds timeout);
    void detach() { m_should_wait_in_dtor = false; }

private:
    hailo_status m_result = HAILO_SUCCESS;
    bool m_should_wait_in_dtor = false;
};

struct FakeBindingsState;
struct FakeConfiguredState;

class HAILORTAPI ConfiguredInferModel {
public:
    ConfiguredInferModel() = default;
    explicit ConfiguredInferModel(std::shared_ptr<FakeConfiguredState> state) : m_state(std::move(state)) {}

    class HAILORTAPI Bindings {
    public:
        class HAILORTAPI InferStream {
        public:
            InferStream(std::shared_ptr<FakeBindingsState> state, std::string name, bool is_output)
                : m_state(std::move(state)), m_name(std::move(name)), m_is_output(is_output) {}
            hailo_status set_buffer(MemoryView view);

        private:
            std::shared_ptr<FakeBindingsState> m_state;
            std::string m_name;
            bool m_is_output;
        };

        Bindings() = default;
        explicit Bindings(std::shared_ptr<FakeBindingsState> state) : m_state(std::move(state)) {}
        Expected<InferStream> input(const std::string &name);
        Expected<InferStream> output(const std::string &name);
        const std::shared_ptr<FakeBindingsState> &state() const { return m_state; }

    private:
        std::shared_ptr<FakeBindingsState> m_state;
    };

    Expected<Bindings> create_bindings();
    hailo_status wait_for_async_ready(std::chrono::milliseconds timeout, uint32_t frames_count = 1);
    hailo_status run(const Bindings &bindings, std::chrono::milliseconds timeout);
    Expected<AsyncInferJob> run_async(const Bindings &bindings,
        std::function<void(const AsyncInferCompletionInfo &)> callback = ASYNC_INFER_EMPTY_CALLBACK);
    Expected<LatencyMeasurementResult> get_hw_latency_measurement();
    Expected<size_t> get_async_queue_size() const;
    hailo_status shutdown();

private:
    hailo_status compute_run(const Bindings &bindings);  // the fake's own: one job, computed at once
    std::shared_ptr<FakeConfiguredState> m_state;
};

struct FakeStreamState;

class HAILORTAPI InferModel {
public:
    class HAILORTAPI InferStream {
    public:
        explicit InferStream(std::shared_ptr<FakeStreamState> state) : m_state(std::move(state)) {}
        const std::string name() const;
        hailo_3d_image_shape_t shape() const;
        hailo_format_t format() const;
        size_t get_frame_size() const;
        void set_format_type(hailo_format_type_t type);
        std::vector<hailo_quant_info_t> get_quant_infos() const;
        bool is_nms() const;

    private:
        std::shared_ptr<FakeStreamState> m_state;
    };

    virtual ~InferModel() = default;
    virtual void set_batch_size(uint16_t batch_size) = 0;
    virtual void set_power_mode(hailo_power_mode_t power_mode) = 0;
    virtual void set_hw_latency_measurement_flags(hailo_latency_measurement_flags_t latency) = 0;
    virtual Expected<ConfiguredInferModel> configure() = 0;
    virtual Expected<InferStream> input(const std::string &name) = 0;
    virtual Expected<InferStream> output(const std::string &name) = 0;
    virtual const std::vector<InferStream> &inputs() const = 0;
    virtual const std::vector<InferStream> &outputs() const = 0;
};

class HAILORTAPI VDevice {
public:
    static Expected<std::unique_ptr<VDevice>> create(const hailo_vdevice_params_t &params);
    static Expected<std::unique_ptr<VDevice>> create();
    static Expected<std::unique_ptr<VDevice>> create(const std::vector<std::string> &device_ids);
    virtual ~VDevice() = default;
    virtual Expected<std::shared_ptr<InferModel>> create_infer_model(const std::string &hef_path,
                                                                     const std::string &name = "") = 0;
    virtual Expected<std::vector<std::reference_wrapper<Device>>> get_physical_devices() const = 0;
    virtual hailo_status dma_map(void *address, size_t size, hailo_dma_buffer_direction_t direction) = 0;
    virtual hailo_status dma_unmap(void *address, size_t size, hailo_dma_buffer_direction_t direction) = 0;
};

}  // namespace hailort

#endif
