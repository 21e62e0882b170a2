"""The fields of a HEF's protobuf body that ``loop inspect`` reads, declared at run time.

Names and field numbers follow HailoRT v5.2.0's ``libhailort/hef.proto`` (message ``ProtoHEFHef`` and
what it holds), for only the fields used here: protobuf skips the rest of the wire data unread.
Enums are declared as ``int32`` (the same varint on the wire), and a ``oneof`` as its plain fields.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# message -> (field, number, type, repeated); a type that is not a scalar names another message here.
SCHEMA: dict[str, tuple[tuple[str, int, str, bool], ...]] = {
    "Hef": (
        ("header", 1, "Header", False),
        ("network_groups", 2, "NetworkGroup", True),
        ("extensions", 5, "Extension", True),
    ),
    "Header": (
        ("hw_arch", 1, "int32", False),
        ("timestamp", 2, "uint64", False),
        ("sdk_version_str", 3, "string", False),
        ("version", 4, "uint64", False),
    ),
    "Extension": (("type_index", 1, "uint32", False), ("name", 2, "string", False)),
    "NetworkGroup": (
        ("network_group_metadata", 1, "Metadata", False),
        ("contexts", 3, "Context", True),
        ("sorted_outputs_order", 4, "string", True),
        ("networks_names", 6, "string", True),
        ("partial_network_groups", 7, "PartialNetworkGroup", True),
        ("ops", 8, "Op", True),
        ("network_group_name", 10, "string", False),
    ),
    "PartialNetworkGroup": (("network_group", 1, "NetworkGroup", False),),
    "Op": (("name", 1, "string", False), ("core_op", 4, "CoreOp", False)),
    "CoreOp": (
        ("network_group_metadata", 1, "Metadata", False),
        ("contexts", 3, "Context", True),
        ("sorted_outputs_order", 4, "string", True),
        ("networks_names", 6, "string", True),
        ("partial_core_ops", 7, "PartialCoreOp", True),
    ),
    "PartialCoreOp": (("core_op", 1, "CoreOp", False),),
    "Metadata": (
        ("network_group_name", 1, "string", False),
        ("transposed_net", 3, "bool", False),
        ("bottleneck_fps", 4, "double", False),
        ("latency", 6, "double", False),
    ),
    "Context": (("metadata", 3, "ContextMetadata", False),),
    "ContextMetadata": (("name", 1, "string", False), ("edge_layers", 2, "EdgeLayer", True)),
    "EdgeLayer": (
        ("direction", 1, "int32", False),  # 0 host to device, 1 device to host
        ("edge_layer_type", 2, "int32", False),  # 0 info, 1 mux, 2 planes
        ("layer_info", 3, "LayerInfo", False),
        ("layer_mux", 4, "LayerMux", False),
        ("context_switch_info", 5, "ContextSwitchInfo", False),
        ("network_index", 6, "uint32", False),
        ("layer_planes", 8, "LayerPlanes", False),
    ),
    "ContextSwitchInfo": (("edge_connection_type", 3, "int32", False),),  # 0 boundary
    "LayerInfo": (
        ("name", 1, "string", False),
        ("edge_layer_base", 2, "EdgeLayerBase", False),
        ("numeric_info", 3, "NumericInfo", False),
        ("original_names", 5, "string", True),
        ("transposed", 6, "bool", False),
    ),
    "LayerMux": (("name", 1, "string", False), ("edge_layer_base", 2, "EdgeLayerBase", False)),
    "LayerPlanes": (("name", 1, "string", False), ("planes", 3, "Edge", True)),
    "Edge": (("layer_info", 1, "LayerInfo", False),),
    "EdgeLayerBase": (
        ("height", 1, "uint32", False),
        ("padded_height", 2, "uint32", False),
        ("width", 3, "uint32", False),
        ("padded_width", 4, "uint32", False),
        ("features", 5, "uint32", False),
        ("padded_features", 6, "uint32", False),
        ("format", 7, "uint32", False),
        ("sys_index", 8, "uint32", False),
        ("additional_info", 11, "AdditionalInfo", False),
        ("data_bytes", 12, "uint32", False),
    ),
    "AdditionalInfo": (("nms_info", 1, "NmsInfo", False),),
    "NmsInfo": (
        ("number_of_classes", 2, "uint64", False),
        ("max_output_size", 3, "uint64", False),
        ("input_division_factor", 7, "uint64", False),
    ),
    "NumericInfo": (
        ("qp_zp", 1, "float", False),
        ("qp_scale", 2, "float", False),
        ("limvals_min", 3, "float", False),
        ("limvals_max", 4, "float", False),
        ("qp_zps", 5, "double", True),
        ("qp_scales", 6, "double", True),
    ),
}
PACKAGE = "loop_hef_subset"
_SCALARS = {
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name=f"{PACKAGE}.proto", package=PACKAGE, syntax="proto3")
    for message, fields in SCHEMA.items():
        described = proto.message_type.add(name=message)
        for name, number, kind, repeated in fields:
            field = described.field.add(name=name, number=number)
            field.label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            if kind in _SCALARS:
                field.type = _SCALARS[kind]
            else:
                field.type, field.type_name = field.TYPE_MESSAGE, f".{PACKAGE}.{kind}"
    return proto


@cache
def hef_message_class() -> Any:
    """The class of the body's top message (HailoRT's ``ProtoHEFHef``), built once, in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.Hef"))
