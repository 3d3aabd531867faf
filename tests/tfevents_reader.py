#!/usr/bin/python3
"""tfevents_reader.py — an independent reader of TensorBoard event files for lutra's tests.

usage: tfevents_reader.py FILE

Reads the TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the data),
checks both CRCs (CRC-32C computed here in pure Python), and parses each record as a tensorflow.Event with
Debian's python3-protobuf (google.protobuf), the message types built here from TensorBoard's own field
numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto), not from lutra's .proto.
Prints one JSON object per event: {"wall_time": w, "step": s, "file_version": v} or
{"wall_time": w, "step": s, "scalars": {tag: simple_value, ...}} (values with a simple_value) and, for values
with plugin metadata, "plugins": {tag: {"plugin_name": p, ...}}. The HParams plugin's content is parsed as a
tensorboard.hparams.HParamsPluginData (the field numbers of tensorboard/plugins/hparams/plugin_data.proto and
api.proto, the real google.protobuf.Value of python3-protobuf's struct_pb2) into "version" and one of
  "experiment": {"hparams": [[name, DataType name], ...], "metrics": [tag, ...]}
  "session_start_info": {"hparams": {name: {"number_value"|"string_value"|"bool_value": v}}}
  "session_end_info": {"status": Status name}
Exits 1 with "error: ..." on stderr for a malformed file (bad CRC, truncated record, unparsable event or plugin
content, or fields these messages do not have).
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message_factory
from google.protobuf import struct_pb2

F = descriptor_pb2.FieldDescriptorProto


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


def field(msg, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof


def message_class(pool, name):
    desc = pool.FindMessageTypeByName(name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def event_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_reader_event.proto", package="tensorflow", syntax="proto3")
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
    return message_class(pool, "tensorflow.Event")


def enum(fdp, name, values):
    e = fdp.enum_type.add(name=name)
    for i, v in enumerate(values):
        e.value.add(name=v, number=i)


def hparams_class():
    """tensorboard.hparams.HParamsPluginData with every field of plugin_data.proto and of the api.proto messages
    it holds (Experiment, HParamInfo, Interval, MetricInfo, MetricName, SessionStartInfo, SessionEndInfo)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_reader_hparams.proto", package="tensorboard.hparams",
                                             syntax="proto3", dependency=["google/protobuf/struct.proto"])
    enum(fdp, "DataType", ["DATA_TYPE_UNSET", "DATA_TYPE_STRING", "DATA_TYPE_BOOL", "DATA_TYPE_FLOAT64"])
    enum(fdp, "DatasetType", ["DATASET_UNKNOWN", "DATASET_TRAINING", "DATASET_VALIDATION"])
    enum(fdp, "Status", ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"])
    P = ".tensorboard.hparams."
    exp = fdp.message_type.add(name="Experiment")
    field(exp, "name", 6, F.TYPE_STRING)
    field(exp, "description", 1, F.TYPE_STRING)
    field(exp, "user", 2, F.TYPE_STRING)
    field(exp, "time_created_secs", 3, F.TYPE_DOUBLE)
    field(exp, "hparam_infos", 4, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=P + "HParamInfo")
    field(exp, "metric_infos", 5, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=P + "MetricInfo")
    hpi = fdp.message_type.add(name="HParamInfo")
    hpi.oneof_decl.add(name="domain")
    field(hpi, "name", 1, F.TYPE_STRING)
    field(hpi, "display_name", 2, F.TYPE_STRING)
    field(hpi, "description", 3, F.TYPE_STRING)
    field(hpi, "type", 4, F.TYPE_ENUM, type_name=P + "DataType")
    field(hpi, "domain_discrete", 5, F.TYPE_MESSAGE, type_name=".google.protobuf.ListValue", oneof=0)
    field(hpi, "domain_interval", 6, F.TYPE_MESSAGE, type_name=P + "Interval", oneof=0)
    field(hpi, "differs", 7, F.TYPE_BOOL)
    interval = fdp.message_type.add(name="Interval")
    field(interval, "min_value", 1, F.TYPE_DOUBLE)
    field(interval, "max_value", 2, F.TYPE_DOUBLE)
    mname = fdp.message_type.add(name="MetricName")
    field(mname, "group", 1, F.TYPE_STRING)
    field(mname, "tag", 2, F.TYPE_STRING)
    minfo = fdp.message_type.add(name="MetricInfo")
    field(minfo, "name", 1, F.TYPE_MESSAGE, type_name=P + "MetricName")
    field(minfo, "display_name", 3, F.TYPE_STRING)
    field(minfo, "description", 4, F.TYPE_STRING)
    field(minfo, "dataset_type", 5, F.TYPE_ENUM, type_name=P + "DatasetType")
    ssi = fdp.message_type.add(name="SessionStartInfo")
    entry = ssi.nested_type.add(name="HparamsEntry")  # map<string, google.protobuf.Value> hparams = 1
    entry.options.map_entry = True
    field(entry, "key", 1, F.TYPE_STRING)
    field(entry, "value", 2, F.TYPE_MESSAGE, type_name=".google.protobuf.Value")
    field(ssi, "hparams", 1, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=P + "SessionStartInfo.HparamsEntry")
    field(ssi, "model_uri", 2, F.TYPE_STRING)
    field(ssi, "monitor_url", 3, F.TYPE_STRING)
    field(ssi, "group_name", 4, F.TYPE_STRING)
    field(ssi, "start_time_secs", 5, F.TYPE_DOUBLE)
    sei = fdp.message_type.add(name="SessionEndInfo")
    field(sei, "status", 1, F.TYPE_ENUM, type_name=P + "Status")
    field(sei, "end_time_secs", 2, F.TYPE_DOUBLE)
    pd = fdp.message_type.add(name="HParamsPluginData")
    pd.oneof_decl.add(name="data")
    field(pd, "version", 1, F.TYPE_INT32)
    field(pd, "experiment", 2, F.TYPE_MESSAGE, type_name=P + "Experiment", oneof=0)
    field(pd, "session_start_info", 3, F.TYPE_MESSAGE, type_name=P + "SessionStartInfo", oneof=0)
    field(pd, "session_end_info", 4, F.TYPE_MESSAGE, type_name=P + "SessionEndInfo", oneof=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(struct_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fdp)
    return message_class(pool, "tensorboard.hparams.HParamsPluginData")


def has_unknown_fields(msg):
    """True when msg or a message inside it holds field numbers its type does not have."""
    if len(msg.UnknownFields()) > 0:
        return True
    for fd, value in msg.ListFields():
        if fd.type != F.TYPE_MESSAGE:
            continue
        items = value.values() if fd.message_type.GetOptions().map_entry else \
            (value if fd.label == F.LABEL_REPEATED else [value])
        if any(has_unknown_fields(m) for m in items):
            return True
    return False


def hparams_json(pd):
    enum_name = lambda field_name, msg, v: msg.DESCRIPTOR.fields_by_name[field_name].enum_type.values_by_number[v].name
    out = {"version": pd.version}
    data = pd.WhichOneof("data")
    if data == "experiment":
        out["experiment"] = {
            "hparams": [[h.name, enum_name("type", h, h.type)] for h in pd.experiment.hparam_infos],
            "metrics": [m.name.tag for m in pd.experiment.metric_infos],
        }
    elif data == "session_start_info":
        hps = {}
        for k, v in pd.session_start_info.hparams.items():
            kind = v.WhichOneof("kind")
            hps[k] = {kind: getattr(v, kind)} if kind else {}
        out["session_start_info"] = {"hparams": hps}
    elif data == "session_end_info":
        sei = pd.session_end_info
        out["session_end_info"] = {"status": enum_name("status", sei, sei.status)}
    return out


def fail(msg):
    sys.stderr.write("error: " + msg + "\n")
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    Event = event_class()
    HParamsPluginData = hparams_class()
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
            out["scalars"] = {v.tag: v.simple_value for v in ev.summary.value if v.WhichOneof("value") == "simple_value"}
            plugins = {}
            for v in ev.summary.value:
                if not v.HasField("metadata"):
                    continue
                p = {"plugin_name": v.metadata.plugin_data.plugin_name}
                if p["plugin_name"] == "hparams":
                    pd = HParamsPluginData()
                    try:
                        pd.ParseFromString(v.metadata.plugin_data.content)
                    except Exception as e:  # a DecodeError
                        fail("record %d: %s: not a HParamsPluginData: %s" % (n, v.tag, e))
                    if has_unknown_fields(pd):
                        fail("record %d: %s: fields HParamsPluginData does not have" % (n, v.tag))
                    p.update(hparams_json(pd))
                plugins[v.tag] = p
            if plugins:
                out["plugins"] = plugins
        if has_unknown_fields(ev):
            fail("record %d: fields an Event does not have" % n)
        print(json.dumps(out, sort_keys=True))
        pos += 16 + length
        n += 1


main()
