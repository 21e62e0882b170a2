/* FAKE HailoRT header (a test double for loop's tests, not HailoRT).
 *
 * Declares only the C types shim/hailort_shim.cpp uses, with HailoRT's names, field order and
 * numeric values (checked against hailo-ai/hailort v5.2.0 hailo/hailort.h), so that the real shim
 * compiles and runs against tests/devices/fake_hailort/fake_hailort.cpp. Written for loop; no
 * HailoRT code is copied here. */
#ifndef FAKE_HAILO_HAILORT_H_
#define FAKE_HAILO_HAILORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hailo/platform.h"

typedef float float32_t;

#define HAILO_MAX_DEVICE_ID_LENGTH (32)
#define HAILO_MAX_BOARD_NAME_LENGTH (32)
#define HAILO_MAX_SERIAL_NUMBER_LENGTH (16)
#define HAILO_MAX_STREAM_NAME_SIZE (128)
#define HAILO_MAX_NETWORK_GROUP_NAME_SIZE (128)
#define HAILO_MAX_NETWORK_GROUPS (8)
#define HAILO_MAX_STREAMS_COUNT (40)
#define HAILO_UNIQUE_VDEVICE_GROUP_ID ("UNIQUE")
#define HAILO_DEFAULT_VDEVICE_GROUP_ID HAILO_UNIQUE_VDEVICE_GROUP_ID
#define HAILO_DEFAULT_BATCH_SIZE (0)

typedef enum {
    HAILO_SUCCESS = 0,
    HAILO_INVALID_ARGUMENT = 2,
    HAILO_TIMEOUT = 4,
    HAILO_INSUFFICIENT_BUFFER = 5,
    HAILO_INVALID_OPERATION = 6,
    HAILO_INTERNAL_FAILURE = 8,
    HAILO_OPEN_FILE_FAILURE = 13,
    HAILO_FILE_OPERATION_FAILURE = 14,
    HAILO_INVALID_HEF = 26,
    HAILO_NOT_FOUND = 61,
    HAILO_STREAM_ABORT = 63,
    HAILO_NOT_AVAILABLE = 65,
    HAILO_DEVICE_IN_USE = 73,
    HAILO_OUT_OF_PHYSICAL_DEVICES = 74,
    HAILO_HEF_FILE_CORRUPTED = 91,
    HAILO_HEF_NOT_SUPPORTED = 92,
    HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE = 93
} hailo_status;

typedef enum {
    HAILO_FORMAT_TYPE_AUTO = 0,
    HAILO_FORMAT_TYPE_UINT8 = 1,
    HAILO_FORMAT_TYPE_UINT16 = 2,
    HAILO_FORMAT_TYPE_FLOAT32 = 3
} hailo_format_type_t;

typedef enum {
    HAILO_FORMAT_ORDER_AUTO = 0,
    HAILO_FORMAT_ORDER_NHWC = 1,
    HAILO_FORMAT_ORDER_NHCW = 2,
    HAILO_FORMAT_ORDER_FCR = 3,
    HAILO_FORMAT_ORDER_F8CR = 4,
    HAILO_FORMAT_ORDER_NHW = 5,
    HAILO_FORMAT_ORDER_NC = 6,
    HAILO_FORMAT_ORDER_BAYER_RGB = 7,
    HAILO_FORMAT_ORDER_HAILO_NMS = 9,
    HAILO_FORMAT_ORDER_RGB888 = 10,
    HAILO_FORMAT_ORDER_YUY2 = 12,
    HAILO_FORMAT_ORDER_HAILO_YYUV = 15,
    HAILO_FORMAT_ORDER_HAILO_YYVU = 16,
    HAILO_FORMAT_ORDER_HAILO_YYYYUV = 19,
    HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP = 21
} hailo_format_order_t;

typedef enum { HAILO_FORMAT_FLAGS_NONE = 0 } hailo_format_flags_t;

typedef struct {
    hailo_format_type_t type;
    hailo_format_order_t order;
    hailo_format_flags_t flags;
} hailo_format_t;

typedef struct {
    uint32_t height;
    uint32_t width;
    uint32_t features;
} hailo_3d_image_shape_t;

typedef struct {
    uint32_t number_of_classes;
    uint32_t max_bboxes_per_class;
} hailo_nms_shape_t;

typedef struct {
    float32_t qp_zp;
    float32_t qp_scale;
    float32_t limvals_min;
    float32_t limvals_max;
} hailo_quant_info_t;

typedef enum {
    HAILO_POWER_MODE_PERFORMANCE = 0,
    HAILO_POWER_MODE_ULTRA_PERFORMANCE = 1
} hailo_power_mode_t;

typedef enum {
    HAILO_LATENCY_NONE = 0,
    HAILO_LATENCY_MEASURE = 1 << 0,
    HAILO_LATENCY_CLEAR_AFTER_GET = 1 << 1
} hailo_latency_measurement_flags_t;

typedef enum {
    HAILO_DMA_BUFFER_DIRECTION_H2D = 0,
    HAILO_DMA_BUFFER_DIRECTION_D2H = 1,
    HAILO_DMA_BUFFER_DIRECTION_BOTH = 2
} hailo_dma_buffer_direction_t;

typedef enum { HAILO_H2D_STREAM = 0, HAILO_D2H_STREAM = 1 } hailo_stream_direction_t;

typedef enum {
    HAILO_SCHEDULING_ALGORITHM_NONE = 0,
    HAILO_SCHEDULING_ALGORITHM_ROUND_ROBIN = 1
} hailo_scheduling_algorithm_t;

typedef struct {
    char id[HAILO_MAX_DEVICE_ID_LENGTH];
} hailo_device_id_t;

typedef struct {
    uint32_t device_count;
    hailo_device_id_t *device_ids;
    hailo_scheduling_algorithm_t scheduling_algorithm;
    const char *group_id;
    bool multi_process_service;
} hailo_vdevice_params_t;

typedef struct {
    uint32_t major;
    uint32_t minor;
    uint32_t revision;
} hailo_firmware_version_t;

typedef struct {
    uint32_t protocol_version;
    hailo_firmware_version_t fw_version;
    uint32_t logger_version;
    uint8_t board_name_length;
    char board_name[HAILO_MAX_BOARD_NAME_LENGTH];
    uint8_t serial_number_length;
    char serial_number[HAILO_MAX_SERIAL_NUMBER_LENGTH];
} hailo_device_identity_t;

typedef struct {
    float32_t ts0_temperature;
    float32_t ts1_temperature;
    uint16_t sample_count;
} hailo_chip_temperature_info_t;

typedef struct {
    char name[HAILO_MAX_STREAM_NAME_SIZE];
    hailo_stream_direction_t direction;
    hailo_format_t format;
    union {
        hailo_3d_image_shape_t shape;
        hailo_nms_shape_t nms_shape;
    };
    hailo_quant_info_t quant_info;
} hailo_vstream_info_t;

typedef struct {
    uint32_t class_group_index;
    char original_name[HAILO_MAX_STREAM_NAME_SIZE];
} hailo_nms_defuse_info_t;

typedef enum {
    HAILO_BURST_TYPE_H8_BBOX = 0,
    HAILO_BURST_TYPE_H15_BBOX,
    HAILO_BURST_TYPE_H8_PER_CLASS,
    HAILO_BURST_TYPE_H15_PER_CLASS,
    HAILO_BURST_TYPE_H15_PER_FRAME,
    HAILO_BURST_TYPE_COUNT
} hailo_nms_burst_type_t;

typedef struct {
    uint32_t number_of_classes;
    uint32_t max_bboxes_per_class;
    uint32_t max_bboxes_total;
    uint32_t bbox_size;
    uint32_t chunks_per_frame;
    bool is_defused;
    hailo_nms_defuse_info_t defuse_info;
    uint32_t burst_size;
    hailo_nms_burst_type_t burst_type;
} hailo_nms_info_t;

/* A physical stream, field for field as HailoRT's. */
typedef struct {
    union {
        struct {
            hailo_3d_image_shape_t shape;
            hailo_3d_image_shape_t hw_shape;
        };
        hailo_nms_info_t nms_info;
    };
    uint32_t hw_data_bytes;
    uint32_t hw_frame_size;
    hailo_format_t format;
    hailo_stream_direction_t direction;
    uint8_t index;
    char name[HAILO_MAX_STREAM_NAME_SIZE];
    hailo_quant_info_t quant_info;
    bool is_mux;
} hailo_stream_info_t;

typedef struct {
    char name[HAILO_MAX_NETWORK_GROUP_NAME_SIZE];
    bool is_multi_context;
} hailo_network_group_info_t;

typedef struct _hailo_hef *hailo_hef;

#ifdef __cplusplus
extern "C" {
#endif
HAILORTAPI hailo_status hailo_init_vdevice_params(hailo_vdevice_params_t *params);
/* The HEF functions (tests/devices/fake_hailort/fake_hef.cpp). */
HAILORTAPI hailo_status hailo_create_hef_file(hailo_hef *hef, const char *file_name);
HAILORTAPI hailo_status hailo_release_hef(hailo_hef hef);
HAILORTAPI hailo_status hailo_get_network_groups_infos(hailo_hef hef, hailo_network_group_info_t *infos,
                                                       size_t *number_of_infos);
HAILORTAPI hailo_status hailo_hef_get_all_stream_infos(hailo_hef hef, const char *name,
                                                       hailo_stream_info_t *stream_infos, size_t stream_infos_length,
                                                       size_t *number_of_streams);
#ifdef __cplusplus
}
#endif

#endif
