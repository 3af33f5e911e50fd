# SPDX-License-Identifier: MIT
"""OTLP protobuf bodies (ExportTraceServiceRequest, ExportLogsServiceRequest,
ExportMetricsServiceRequest) decoded in Python into the shape of OTLP JSON (camelCase names,
trace and span ids as lowercase hex, 64-bit integers as strings, enums as numbers), so that
otelrx's flat_spans, flat_logs and metric_points read them like the dashboard's answers.

A decoder of the protobuf wire format written for the tests from the field numbers of
opentelemetry-proto (trace.proto, logs.proto, metrics.proto, common.proto, resource.proto),
independent of dotmon's C encoder: FaultProxy uses it on what an exporter really sent, where the
dashboard's API would lose the value types (it answers every attribute as a string) or has no
answer at all (metrics). Unknown fields are skipped, as protobuf readers do.

    data = decode("/v1/metrics", body)   # {"resourceMetrics": [...]}
"""

import struct

# message: {field number: (JSON name, type, repeated)}; a type is a scalar kind below or the name
# of another message.
S = "string"
HEX = "hex"  # bytes: trace and span ids
B = "bytes"  # other bytes (kept as hex too)
U = "uint"  # varint: uint32, int32, enum, bool as 0/1 (read as an int)
U64 = "uint64"  # varint as a JSON string
I64 = "int64"  # varint two's complement as a JSON string
SI = "sint32"  # zigzag varint
BOOL = "bool"
F64 = "fixed64"  # as a JSON string
SF64 = "sfixed64"  # as a JSON string
F32 = "fixed32"
D = "double"

SCHEMA = {
    "ExportTraceServiceRequest": {1: ("resourceSpans", "ResourceSpans", True)},
    "ExportLogsServiceRequest": {1: ("resourceLogs", "ResourceLogs", True)},
    "ExportMetricsServiceRequest": {1: ("resourceMetrics", "ResourceMetrics", True)},
    "Resource": {1: ("attributes", "KeyValue", True), 2: ("droppedAttributesCount", U, False)},
    "InstrumentationScope": {1: ("name", S, False), 2: ("version", S, False), 3: ("attributes", "KeyValue", True),
                             4: ("droppedAttributesCount", U, False)},
    "KeyValue": {1: ("key", S, False), 2: ("value", "AnyValue", False)},
    "AnyValue": {1: ("stringValue", S, False), 2: ("boolValue", BOOL, False), 3: ("intValue", I64, False),
                 4: ("doubleValue", D, False), 5: ("arrayValue", "ArrayValue", False),
                 6: ("kvlistValue", "KeyValueList", False), 7: ("bytesValue", B, False)},
    "ArrayValue": {1: ("values", "AnyValue", True)},
    "KeyValueList": {1: ("values", "KeyValue", True)},
    # traces
    "ResourceSpans": {1: ("resource", "Resource", False), 2: ("scopeSpans", "ScopeSpans", True),
                      3: ("schemaUrl", S, False)},
    "ScopeSpans": {1: ("scope", "InstrumentationScope", False), 2: ("spans", "Span", True), 3: ("schemaUrl", S, False)},
    "Span": {1: ("traceId", HEX, False), 2: ("spanId", HEX, False), 3: ("traceState", S, False),
             4: ("parentSpanId", HEX, False), 16: ("flags", F32, False), 5: ("name", S, False), 6: ("kind", U, False),
             7: ("startTimeUnixNano", F64, False), 8: ("endTimeUnixNano", F64, False),
             9: ("attributes", "KeyValue", True), 10: ("droppedAttributesCount", U, False),
             11: ("events", "Event", True), 12: ("droppedEventsCount", U, False), 13: ("links", "Link", True),
             14: ("droppedLinksCount", U, False), 15: ("status", "Status", False)},
    "Event": {1: ("timeUnixNano", F64, False), 2: ("name", S, False), 3: ("attributes", "KeyValue", True),
              4: ("droppedAttributesCount", U, False)},
    "Link": {1: ("traceId", HEX, False), 2: ("spanId", HEX, False), 3: ("traceState", S, False),
             4: ("attributes", "KeyValue", True), 5: ("droppedAttributesCount", U, False), 6: ("flags", F32, False)},
    "Status": {2: ("message", S, False), 3: ("code", U, False)},
    # logs
    "ResourceLogs": {1: ("resource", "Resource", False), 2: ("scopeLogs", "ScopeLogs", True), 3: ("schemaUrl", S, False)},
    "ScopeLogs": {1: ("scope", "InstrumentationScope", False), 2: ("logRecords", "LogRecord", True),
                  3: ("schemaUrl", S, False)},
    "LogRecord": {1: ("timeUnixNano", F64, False), 11: ("observedTimeUnixNano", F64, False),
                  2: ("severityNumber", U, False), 3: ("severityText", S, False), 5: ("body", "AnyValue", False),
                  6: ("attributes", "KeyValue", True), 7: ("droppedAttributesCount", U, False), 8: ("flags", F32, False),
                  9: ("traceId", HEX, False), 10: ("spanId", HEX, False), 12: ("eventName", S, False)},
    # metrics
    "ResourceMetrics": {1: ("resource", "Resource", False), 2: ("scopeMetrics", "ScopeMetrics", True),
                        3: ("schemaUrl", S, False)},
    "ScopeMetrics": {1: ("scope", "InstrumentationScope", False), 2: ("metrics", "Metric", True),
                     3: ("schemaUrl", S, False)},
    "Metric": {1: ("name", S, False), 2: ("description", S, False), 3: ("unit", S, False), 5: ("gauge", "Gauge", False),
               7: ("sum", "Sum", False), 9: ("histogram", "Histogram", False),
               10: ("exponentialHistogram", "ExponentialHistogram", False), 11: ("summary", "Summary", False),
               12: ("metadata", "KeyValue", True)},
    "Gauge": {1: ("dataPoints", "NumberDataPoint", True)},
    "Sum": {1: ("dataPoints", "NumberDataPoint", True), 2: ("aggregationTemporality", U, False),
            3: ("isMonotonic", BOOL, False)},
    "Histogram": {1: ("dataPoints", "HistogramDataPoint", True), 2: ("aggregationTemporality", U, False)},
    "ExponentialHistogram": {1: ("dataPoints", "ExponentialHistogramDataPoint", True),
                             2: ("aggregationTemporality", U, False)},
    "Summary": {1: ("dataPoints", "SummaryDataPoint", True)},
    "NumberDataPoint": {7: ("attributes", "KeyValue", True), 2: ("startTimeUnixNano", F64, False),
                        3: ("timeUnixNano", F64, False), 4: ("asDouble", D, False), 6: ("asInt", SF64, False),
                        5: ("exemplars", "Exemplar", True), 8: ("flags", U, False)},
    "HistogramDataPoint": {9: ("attributes", "KeyValue", True), 2: ("startTimeUnixNano", F64, False),
                           3: ("timeUnixNano", F64, False), 4: ("count", F64, False), 5: ("sum", D, False),
                           6: ("bucketCounts", F64, True), 7: ("explicitBounds", D, True),
                           8: ("exemplars", "Exemplar", True), 10: ("flags", U, False), 11: ("min", D, False),
                           12: ("max", D, False)},
    "ExponentialHistogramDataPoint": {1: ("attributes", "KeyValue", True), 2: ("startTimeUnixNano", F64, False),
                                      3: ("timeUnixNano", F64, False), 4: ("count", F64, False), 5: ("sum", D, False),
                                      6: ("scale", SI, False), 7: ("zeroCount", F64, False),
                                      8: ("positive", "Buckets", False), 9: ("negative", "Buckets", False),
                                      10: ("flags", U, False), 11: ("exemplars", "Exemplar", True),
                                      12: ("min", D, False), 13: ("max", D, False), 14: ("zeroThreshold", D, False)},
    "Buckets": {1: ("offset", SI, False), 2: ("bucketCounts", U64, True)},
    "SummaryDataPoint": {7: ("attributes", "KeyValue", True), 2: ("startTimeUnixNano", F64, False),
                         3: ("timeUnixNano", F64, False), 4: ("count", F64, False), 5: ("sum", D, False),
                         6: ("quantileValues", "ValueAtQuantile", True), 8: ("flags", U, False)},
    "ValueAtQuantile": {1: ("quantile", D, False), 2: ("value", D, False)},
    "Exemplar": {7: ("filteredAttributes", "KeyValue", True), 2: ("timeUnixNano", F64, False),
                 3: ("asDouble", D, False), 6: ("asInt", SF64, False), 4: ("spanId", HEX, False),
                 5: ("traceId", HEX, False)},
}

# The answers (a partial success says how many items the receiver rejected, and why).
SCHEMA.update({
    "ExportTraceServiceResponse": {1: ("partialSuccess", "ExportTracePartialSuccess", False)},
    "ExportTracePartialSuccess": {1: ("rejectedSpans", I64, False), 2: ("errorMessage", S, False)},
    "ExportLogsServiceResponse": {1: ("partialSuccess", "ExportLogsPartialSuccess", False)},
    "ExportLogsPartialSuccess": {1: ("rejectedLogRecords", I64, False), 2: ("errorMessage", S, False)},
    "ExportMetricsServiceResponse": {1: ("partialSuccess", "ExportMetricsPartialSuccess", False)},
    "ExportMetricsPartialSuccess": {1: ("rejectedDataPoints", I64, False), 2: ("errorMessage", S, False)},
})

RESPONSE = {"/v1/traces": "ExportTraceServiceResponse", "/v1/logs": "ExportLogsServiceResponse",
            "/v1/metrics": "ExportMetricsServiceResponse"}

REQUEST = {"/v1/traces": "ExportTraceServiceRequest", "/v1/logs": "ExportLogsServiceRequest",
           "/v1/metrics": "ExportMetricsServiceRequest"}


class DecodeError(ValueError):
    pass


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise DecodeError("truncated or overlong varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _scalar(kind, wire, raw):
    """One scalar from its wire value (an int for varint/fixed, bytes for length-delimited)."""
    if kind in (U, BOOL):
        return bool(raw) if kind == BOOL else raw
    if kind == U64:
        return str(raw)
    if kind == I64:
        return str(raw - (1 << 64) if raw >= 1 << 63 else raw)
    if kind == SI:
        return (raw >> 1) ^ -(raw & 1)
    if kind == F64:
        return str(raw)
    if kind == SF64:
        return str(raw - (1 << 64) if raw >= 1 << 63 else raw)
    if kind == F32:
        return raw
    if kind == D:
        return struct.unpack("<d", struct.pack("<Q", raw))[0]
    if kind == S:
        return raw.decode("utf-8")
    if kind in (HEX, B):
        return raw.hex()
    raise DecodeError(f"unknown kind {kind}")


_PACKABLE = {F64: (8, "<Q"), SF64: (8, "<Q"), D: (8, "<Q"), F32: (4, "<I")}


def decode_message(name, buf):
    """The message `name` in buf as a dict (OTLP JSON shape); raises DecodeError on bad input."""
    fields = SCHEMA[name]
    out = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        no, wire = key >> 3, key & 7
        if wire == 0:
            raw, i = _varint(buf, i)
        elif wire == 1:
            if i + 8 > len(buf):
                raise DecodeError("truncated fixed64")
            raw = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wire == 5:
            if i + 4 > len(buf):
                raise DecodeError("truncated fixed32")
            raw = struct.unpack_from("<I", buf, i)[0]
            i += 4
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise DecodeError("truncated length-delimited field")
            raw = bytes(buf[i:i + n])
            i += n
        else:
            raise DecodeError(f"wire type {wire} in {name}")
        if no not in fields:
            continue
        jname, kind, repeated = fields[no]
        if kind in SCHEMA:
            if wire != 2:
                raise DecodeError(f"{name}.{jname}: a message with wire type {wire}")
            values = [decode_message(kind, raw)]
        elif repeated and wire == 2 and kind not in (S, HEX, B):
            # packed repeated scalars
            values = []
            if kind in _PACKABLE:
                size, fmt = _PACKABLE[kind]
                if len(raw) % size:
                    raise DecodeError(f"{name}.{jname}: packed length {len(raw)}")
                values = [_scalar(kind, 1, struct.unpack_from(fmt, raw, j)[0]) for j in range(0, len(raw), size)]
            else:
                j = 0
                while j < len(raw):
                    v, j = _varint(raw, j)
                    values.append(_scalar(kind, 0, v))
        else:
            values = [_scalar(kind, wire, raw)]
        if repeated:
            out.setdefault(jname, []).extend(values)
        else:
            out[jname] = values[-1]
    return out


def decode(path, body):
    """An OTLP/HTTP protobuf request body sent to path (…/v1/traces, …/v1/logs, …/v1/metrics) as
    OTLP JSON data; raises DecodeError (or KeyError for another path)."""
    for suffix, name in REQUEST.items():
        if path.endswith(suffix):
            return decode_message(name, body)
    raise KeyError(path)


def decode_response(path, body):
    """The receiver's protobuf answer to a request sent to path: {} or {"partialSuccess": {...}}."""
    for suffix, name in RESPONSE.items():
        if path.endswith(suffix):
            return decode_message(name, body)
    raise KeyError(path)
