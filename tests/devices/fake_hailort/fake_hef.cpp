// FAKE HailoRT: the C API's HEF functions, a test double for loop's tests. It is not HailoRT.
//
// hailo_create_hef_file, hailo_release_hef, hailo_get_network_groups_infos and
// hailo_hef_get_all_stream_infos (hailo/hailort.h of hailo-ai/hailort v5.2.0) answered for a real HEF
// file, read the public way and written for loop: the header as libhailort/src/hef/hef_internal.hpp lays
// it out (big-endian; the CRC-32 of version 1 checked as common/utils.hpp computes it), then the protobuf
// wire format of the few libhailort/hef.proto fields it needs, decoded by hand. Streams are derived as
// hef.cpp does (fill_core_ops, HefUtils::fill_layer_info, fill_layer_info_with_base_info;
// HailoRTDefaults::get_device_format_order) from the boundary edge layers of every context, inputs
// first (core_op_metadata.cpp). A mux is one stream, planes one each; NMS streams carry no shape here.
// hw_shape is the HEF's padded shape: HailoRT's choice between it and the shape
// (is_core_hw_padding_supported) is not modelled. A file that is not a HEF answers
// HAILO_HEF_NOT_SUPPORTED (or HAILO_FILE_OPERATION_FAILURE when shorter than a header), a damaged one
// HAILO_HEF_FILE_CORRUPTED, as hef.cpp does.
#include "hailo/hailort.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

namespace {

// One length-delimited protobuf message, read field by field.
struct Wire {
    const uint8_t *p, *end;
    bool ok = true;

    uint64_t varint() {
        uint64_t value = 0;
        for (int shift = 0; ok && shift < 64; shift += 7) {
            if (p >= end) break;
            uint8_t byte = *p++;
            value |= uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return value;
        }
        ok = false;
        return 0;
    }
    bool next(uint32_t &field, uint32_t &wire) {
        if (!ok || p >= end) return false;
        uint64_t key = varint();
        field = uint32_t(key >> 3);
        wire = uint32_t(key & 7);
        return ok;
    }
    Wire bytes() {
        uint64_t size = varint();
        if (!ok || size > uint64_t(end - p)) {
            ok = false;
            return Wire{end, end, false};
        }
        Wire sub{p, p + size};
        p += size;
        return sub;
    }
    float f32() {
        float value = 0;
        if (end - p < 4) ok = false;
        else std::memcpy(&value, p, 4);  // little-endian on the wire, as on the hosts the tests run on
        p += ok ? 4 : 0;
        return value;
    }
    void skip(uint32_t wire) {
        if (wire == 0) varint();
        else if (wire == 1) p = end - p < 8 ? (ok = false, end) : p + 8;
        else if (wire == 2) bytes();
        else if (wire == 5) p = end - p < 4 ? (ok = false, end) : p + 4;
        else ok = false;
    }
    std::string text() {
        Wire sub = bytes();
        return std::string(reinterpret_cast<const char *>(sub.p), size_t(sub.end - sub.p));
    }
};

struct Base {
    uint32_t h = 0, ph = 0, w = 0, pw = 0, f = 0, pf = 0, format = 0, index = 0, data_bytes = 0;
};

struct Stream {
    std::string name;
    int direction = 0;
    bool mux = false, transposed = false;
    Base base;
    float zp = 0, scale = 0, lmin = 0, lmax = 0;
};

struct Group {
    std::string name;
    bool transposed = false;
    int contexts = 0;
    std::vector<Stream> streams;
};

struct FakeHef {
    std::vector<Group> groups;
};

Base read_base(Wire w) {
    Base b;
    uint32_t field, wire;
    uint32_t *slots[] = {nullptr, &b.h, &b.ph, &b.w, &b.pw, &b.f, &b.pf, &b.format, &b.index};
    while (w.next(field, wire)) {
        if (wire == 0 && field >= 1 && field <= 8) *slots[field] = uint32_t(w.varint());
        else if (wire == 0 && field == 12) b.data_bytes = uint32_t(w.varint());
        else w.skip(wire);
    }
    return b;
}

void read_numeric(Wire w, Stream &s) {
    uint32_t field, wire;
    float *slots[] = {nullptr, &s.zp, &s.scale, &s.lmin, &s.lmax};
    while (w.next(field, wire)) {
        if (wire == 5 && field >= 1 && field <= 4) *slots[field] = w.f32();
        else w.skip(wire);
    }
}

Stream read_layer(Wire w, int direction, bool mux) {
    Stream s;
    s.direction = direction;
    s.mux = mux;
    uint32_t field, wire;
    while (w.next(field, wire)) {
        if (field == 1 && wire == 2) s.name = w.text();
        else if (field == 2 && wire == 2) s.base = read_base(w.bytes());
        else if (field == 3 && wire == 2 && !mux) read_numeric(w.bytes(), s);
        else if (field == 6 && wire == 0 && !mux) s.transposed = w.varint() != 0;
        else w.skip(wire);
    }
    return s;
}

// ProtoHEFEdgeLayerPlanes: each plane (ProtoHefEdge.layer_info) is a physical stream of its own.
void read_planes(Wire w, int direction, std::vector<Stream> &out) {
    uint32_t field, wire;
    while (w.next(field, wire)) {
        if (field != 3 || wire != 2) {
            w.skip(wire);
            continue;
        }
        Wire edge = w.bytes();
        uint32_t f2, w2;
        while (edge.next(f2, w2)) {
            if (f2 == 1 && w2 == 2) out.push_back(read_layer(edge.bytes(), direction, false));
            else edge.skip(w2);
        }
    }
}

void read_edge(Wire w, std::vector<Stream> &inputs, std::vector<Stream> &outputs) {
    int direction = 0;
    bool boundary = true;
    Wire layer{nullptr, nullptr}, mux{nullptr, nullptr}, planes{nullptr, nullptr};
    uint32_t field, wire;
    while (w.next(field, wire)) {
        if (field == 1 && wire == 0) direction = int(w.varint());
        else if (field == 3 && wire == 2) layer = w.bytes();
        else if (field == 4 && wire == 2) mux = w.bytes();
        else if (field == 8 && wire == 2) planes = w.bytes();
        else if (field == 5 && wire == 2) {
            Wire info = w.bytes();
            uint32_t f2, w2;
            while (info.next(f2, w2)) {
                if (f2 == 3 && w2 == 0) boundary = info.varint() == 0;  // PROTO__EDGE_CONNECTION_TYPE__BOUNDARY
                else info.skip(w2);
            }
        } else w.skip(wire);
    }
    if (!boundary) return;
    auto &out = direction == 1 ? outputs : inputs;
    if (planes.p) read_planes(planes, direction, out);
    else if (mux.p) out.push_back(read_layer(mux, direction, true));
    else if (layer.p) out.push_back(read_layer(layer, direction, false));
}

// A group's (or core op's) own fields: metadata 1, contexts 3, partials 7 (each holding one at field 1).
void read_core(Wire w, Group &g, bool top) {
    std::vector<Stream> inputs, outputs;
    std::vector<Wire> partials;
    uint32_t field, wire;
    while (w.next(field, wire)) {
        if (field == 1 && wire == 2) {
            Wire meta = w.bytes();
            uint32_t f2, w2;
            while (meta.next(f2, w2)) {
                if (f2 == 1 && w2 == 2) g.name = meta.text();
                else if (f2 == 3 && w2 == 0) g.transposed = meta.varint() != 0;
                else meta.skip(w2);
            }
        } else if (field == 3 && wire == 2) {
            g.contexts++;
            Wire context = w.bytes();
            uint32_t f2, w2;
            while (context.next(f2, w2)) {
                if (f2 != 3 || w2 != 2) {
                    context.skip(w2);
                    continue;
                }
                Wire meta = context.bytes();
                uint32_t f3, w3;
                while (meta.next(f3, w3)) {
                    if (f3 == 2 && w3 == 2) read_edge(meta.bytes(), inputs, outputs);
                    else meta.skip(w3);
                }
            }
        } else if (field == 7 && wire == 2 && top) {
            Wire partial = w.bytes();
            uint32_t f2, w2;
            while (partial.next(f2, w2)) {
                if (f2 == 1 && w2 == 2) partials.push_back(partial.bytes());
                else partial.skip(w2);
            }
        } else if (field == 10 && wire == 2 && g.name.empty()) {
            g.name = w.text();
        } else w.skip(wire);
    }
    if (g.contexts == 0 && !partials.empty()) return read_core(partials.front(), g, false);
    g.streams = inputs;
    g.streams.insert(g.streams.end(), outputs.begin(), outputs.end());
}

// hef.cpp fill_core_ops: with HAILO_NET_FLOW the core op is the group's op holding one (ProtoHEFOp.core_op, 4).
Group read_group(Wire w, bool net_flow) {
    Group g;
    if (net_flow) {
        Wire scan = w;
        uint32_t field, wire;
        while (scan.next(field, wire)) {
            if (field != 8 || wire != 2) {
                scan.skip(wire);
                continue;
            }
            Wire op = scan.bytes();
            uint32_t f2, w2;
            while (op.next(f2, w2)) {
                if (f2 == 4 && w2 == 2) {
                    read_core(op.bytes(), g, true);
                    return g;
                }
                op.skip(w2);
            }
        }
    }
    read_core(w, g, true);
    return g;
}

bool has_net_flow(Wire w) {
    uint32_t field, wire;
    while (w.next(field, wire)) {
        if (field != 5 || wire != 2) {
            w.skip(wire);
            continue;
        }
        Wire ext = w.bytes();
        uint32_t f2, w2;
        while (ext.next(f2, w2)) {
            if (f2 != 1 || w2 != 0) ext.skip(w2);
            else if (ext.varint() == 13) return true;  // HAILO_NET_FLOW
        }
    }
    return false;
}

uint32_t crc32(const uint8_t *data, size_t size) {
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int j = 0; j < 8; j++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : (c >> 1);
        table[i] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; i++) crc = (crc >> 8) ^ table[(crc ^ data[i]) & 0xFF];
    return crc ^ 0xFFFFFFFFu;
}

uint64_t big(const uint8_t *p, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) value = (value << 8) | p[i];
    return value;
}

// hef_internal.hpp hef__header_t, checked in hef.cpp parse_hef_file's order: a short read first, then the
// version (switch), then magic, length and checksum (validate_hef_header). The fake reads versions 1
// (CRC-32 checked) and 0 (MD5 not checked) only.
hailo_status read_body(const std::vector<uint8_t> &file, Wire &body) {
    if (file.size() < 12) return HAILO_FILE_OPERATION_FAILURE;
    uint64_t version = big(file.data() + 4, 4), proto = big(file.data() + 8, 4);
    size_t header = version == 1 ? 28 : version == 0 ? 32 : 0;
    if (!header) return HAILO_HEF_NOT_SUPPORTED;
    if (file.size() < header) return HAILO_FILE_OPERATION_FAILURE;
    if (big(file.data(), 4) != 0x01484546u) return HAILO_HEF_NOT_SUPPORTED;
    uint64_t ccws = version == 1 ? big(file.data() + 16, 8) : 0;
    if (file.size() - header != proto + ccws) return HAILO_HEF_FILE_CORRUPTED;
    if (version == 1 && crc32(file.data() + header, file.size() - header) != uint32_t(big(file.data() + 12, 4))) {
        return HAILO_HEF_FILE_CORRUPTED;
    }
    body = Wire{file.data() + header, file.data() + header + proto};
    return HAILO_SUCCESS;
}

hailo_status parse(const std::vector<uint8_t> &file, FakeHef &hef) {
    Wire body{nullptr, nullptr};
    hailo_status status = read_body(file, body);
    if (status != HAILO_SUCCESS) return status;
    bool net_flow = has_net_flow(body);
    uint32_t field, wire;
    while (body.next(field, wire)) {
        if (field == 2 && wire == 2) hef.groups.push_back(read_group(body.bytes(), net_flow));
        else body.skip(wire);
    }
    return body.ok && !hef.groups.empty() ? HAILO_SUCCESS : HAILO_HEF_FILE_CORRUPTED;
}

// HailoRTDefaults::get_device_format_order.
hailo_format_order_t device_order(uint32_t format) {
    switch (format) {
    case 0: case 13: return HAILO_FORMAT_ORDER_NHWC;
    case 1: return HAILO_FORMAT_ORDER_NHCW;
    case 2: return HAILO_FORMAT_ORDER_NC;
    case 3: return HAILO_FORMAT_ORDER_FCR;
    case 4: return HAILO_FORMAT_ORDER_BAYER_RGB;
    case 5: return HAILO_FORMAT_ORDER_NHW;
    case 6: return HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP;
    case 7: return HAILO_FORMAT_ORDER_F8CR;
    case 8: return HAILO_FORMAT_ORDER_RGB888;
    case 11: return HAILO_FORMAT_ORDER_YUY2;
    case 14: return HAILO_FORMAT_ORDER_HAILO_YYUV;
    case 15: return HAILO_FORMAT_ORDER_HAILO_YYVU;
    case 16: return HAILO_FORMAT_ORDER_HAILO_YYYYUV;
    default: return HAILO_FORMAT_ORDER_AUTO;
    }
}

hailo_stream_info_t stream_info(const Stream &s, bool group_transposed) {
    hailo_stream_info_t info;
    std::memset(&info, 0, sizeof info);
    const Base &b = s.base;
    info.format = {b.data_bytes == 2 ? HAILO_FORMAT_TYPE_UINT16 : HAILO_FORMAT_TYPE_UINT8, device_order(b.format),
                   HAILO_FORMAT_FLAGS_NONE};
    if (info.format.order != HAILO_FORMAT_ORDER_HAILO_NMS_ON_CHIP) {
        bool swap = (group_transposed || s.transposed) && info.format.order != HAILO_FORMAT_ORDER_NC;
        info.shape = swap ? hailo_3d_image_shape_t{b.w, b.h, b.f} : hailo_3d_image_shape_t{b.h, b.w, b.f};
        info.hw_shape = {b.ph, b.pw, b.pf};
    }
    info.hw_data_bytes = b.data_bytes;
    info.hw_frame_size = b.ph * b.pw * b.pf * b.data_bytes;
    info.direction = s.direction == 1 ? HAILO_D2H_STREAM : HAILO_H2D_STREAM;
    info.index = uint8_t(b.index);
    std::snprintf(info.name, sizeof info.name, "%s", s.name.c_str());
    info.quant_info = {s.zp, s.scale, s.lmin, s.lmax};
    info.is_mux = s.mux;
    return info;
}

}  // namespace

extern "C" HAILORTAPI hailo_status hailo_create_hef_file(hailo_hef *hef, const char *file_name) {
    if (!hef || !file_name) return HAILO_INVALID_ARGUMENT;
    std::ifstream in(file_name, std::ios::binary);
    if (!in) return HAILO_OPEN_FILE_FAILURE;
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto *parsed = new (std::nothrow) FakeHef;
    if (!parsed) return HAILO_INTERNAL_FAILURE;
    hailo_status status = parse(file, *parsed);
    if (status != HAILO_SUCCESS) {
        delete parsed;
        return status;
    }
    *hef = reinterpret_cast<hailo_hef>(parsed);
    return HAILO_SUCCESS;
}

extern "C" HAILORTAPI hailo_status hailo_release_hef(hailo_hef hef) {
    delete reinterpret_cast<FakeHef *>(hef);
    return HAILO_SUCCESS;
}

extern "C" HAILORTAPI hailo_status hailo_get_network_groups_infos(hailo_hef hef, hailo_network_group_info_t *infos,
                                                                  size_t *number_of_infos) {
    if (!hef || !infos || !number_of_infos) return HAILO_INVALID_ARGUMENT;
    auto &groups = reinterpret_cast<FakeHef *>(hef)->groups;
    if (*number_of_infos < groups.size()) {
        *number_of_infos = groups.size();
        return HAILO_INSUFFICIENT_BUFFER;
    }
    for (size_t i = 0; i < groups.size(); i++) {
        std::memset(&infos[i], 0, sizeof infos[i]);
        std::snprintf(infos[i].name, sizeof infos[i].name, "%s", groups[i].name.c_str());
        infos[i].is_multi_context = groups[i].contexts > 1;
    }
    *number_of_infos = groups.size();
    return HAILO_SUCCESS;
}

// hailort.cpp: name NULL is the first group; too small an array is HAILO_INSUFFICIENT_BUFFER, with the count.
extern "C" HAILORTAPI hailo_status hailo_hef_get_all_stream_infos(hailo_hef hef, const char *name,
                                                                  hailo_stream_info_t *stream_infos,
                                                                  size_t stream_infos_length, size_t *number_of_streams) {
    if (!hef || !stream_infos || !number_of_streams) return HAILO_INVALID_ARGUMENT;
    auto &groups = reinterpret_cast<FakeHef *>(hef)->groups;
    const Group *group = name ? nullptr : &groups.front();
    for (auto &g : groups) group = (name && g.name == name) ? &g : group;
    if (!group) return HAILO_NOT_FOUND;
    *number_of_streams = group->streams.size();
    if (stream_infos_length < group->streams.size()) return HAILO_INSUFFICIENT_BUFFER;
    for (size_t i = 0; i < group->streams.size(); i++) stream_infos[i] = stream_info(group->streams[i], group->transposed);
    return HAILO_SUCCESS;
}
