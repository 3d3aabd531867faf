#!/usr/bin/python3
"""tfevents_reader.py — an independent reader of TensorBoard event files for lutra's tests.

usage: tfevents_reader.py FILE

Reads the TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the data),
checks both CRCs (CRC-32C computed here in pure Python), and parses each record as a tensorflow.Event with
Debian's python3-protobuf (google.protobuf), the message types built here from TensorBoard's own field
numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto), not from lutra's .proto.
Prints one JSON object per event: {"wall_time": w, "step": s, "file_version": v} or
{"wall_time": w, "step": s, "scalars": {tag: simple_value, ...}}.
Exits 1 with "error: ..." on stderr for a malformed file (bad CRC, truncated record, unparsable event).
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message_factory


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_reader_event.proto", package="tensorflow", syntax="proto3")

    def field(msg, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None, oneof=None):
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof

    meta = fdp.message_type.add(name="SummaryMetadata")
    pd = meta.nested_type.add(name="PluginData")
    field(pd, "plugin_name", 1, F.TYPE_STRING)
    field(pd, "content", 2, F.TYPE_BYTES)
    field(meta, "plugin_data", 1, F.TYPE_MESSAGE, type_name=".tensorflow.SummaryMetadata.PluginData")
    field(meta, "display_name", 2, F.TYPE_STRING)
    field(meta, "summary_description", 3, F.TYPE_STRING)
    summ = fdp.message_type.add(name="Summary")
    val = summ.nested_type.add(name="Value")
    val.oneof_decl.add(name="value")
    field(val, "node_name", 7, F.TYPE_STRING)
    field(val, "tag", 1, F.TYPE_STRING)
    field(val, "metadata", 9, F.TYPE_MESSAGE, type_name=".tensorflow.SummaryMetadata")
    field(val, "simple_value", 2, F.TYPE_FLOAT, oneof=0)
    field(val, "obsolete_old_style_histogram", 3, F.TYPE_BYTES, oneof=0)
    field(summ, "value", 1, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".tensorflow.Summary.Value")
    ev = fdp.message_type.add(name="Event")
    ev.oneof_decl.add(name="what")
    field(ev, "wall_time", 1, F.TYPE_DOUBLE)
    field(ev, "step", 2, F.TYPE_INT64)
    field(ev, "file_version", 3, F.TYPE_STRING, oneof=0)
    field(ev, "graph_def", 4, F.TYPE_BYTES, oneof=0)
    field(ev, "summary", 5, F.TYPE_MESSAGE, type_name=".tensorflow.Summary", oneof=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def fail(msg):
    sys.stderr.write("error: " + msg + "\n")
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    Event = event_class()
    data = open(sys.argv[1], "rb").read()
    pos, n = 0, 0
    while pos < len(data):
        if pos + 12 > len(data):
            fail("record %d: truncated header at byte %d" % (n, pos))
        head = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(head)) != hcrc:
            fail("record %d: bad length CRC" % n)
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or pos + 16 + length > len(data):
            fail("record %d: truncated data" % n)
        (dcrc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked(crc32c(body)) != dcrc:
            fail("record %d: bad data CRC" % n)
        ev = Event()
        try:
            ev.ParseFromString(body)
        except Exception as e:  # a DecodeError
            fail("record %d: not an Event: %s" % (n, e))
        out = {"wall_time": ev.wall_time, "step": ev.step}
        what = ev.WhichOneof("what")
        if what == "file_version":
            out["file_version"] = ev.file_version
        elif what == "summary":
            out["scalars"] = {v.tag: v.simple_value for v in ev.summary.value}
        print(json.dumps(out, sort_keys=True))
        pos += 16 + length
        n += 1


main()
