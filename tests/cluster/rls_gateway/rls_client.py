#!/usr/bin/python3
"""A gRPC client of Envoy's RLS v3 in Python (Debian's python3-grpcio and python3-protobuf), for
rls_gateway_test.cpp: it calls envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit through
grpcio's generic unary_unary with the messages protoc --python_out compiled from the gateway's
.proto files.

  rls_client.py STUBS_DIR PORT REQUESTS_FILE

REQUESTS_FILE: one call per line, "DOMAIN HITS DESCRIPTOR..." where a DESCRIPTOR is
"key=value,key=value" with an optional "@HITS" (its own hits_addend); HITS 0 leaves hits_addend
unset. Prints one line per call: "OVERALL STATUS..." with each STATUS
"code/requests_per_unit/unit/name/limit_remaining/reset_ns" (name "-" when empty, no limit: 0/0/-),
or "ERROR CODE_NAME details".
"""
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from envoy.service.ratelimit.v3 import rls_pb2  # noqa: E402

METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def request_of(line):
    words = line.split()
    req = rls_pb2.RateLimitRequest(domain="" if words[0] == "-" else words[0])
    if int(words[1]):
        req.hits_addend = int(words[1])
    for text in words[2:]:
        d = req.descriptors.add()
        if "@" in text:
            text, hits = text.split("@")
            d.hits_addend.value = int(hits)
        for pair in text.split(","):
            key, value = pair.split("=", 1)
            e = d.entries.add()
            e.key, e.value = key, value
    return req


def main():
    port, path = sys.argv[2], sys.argv[3]
    with grpc.insecure_channel("127.0.0.1:" + port) as channel:
        call = channel.unary_unary(
            METHOD,
            request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString)
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    resp = call(request_of(line), timeout=20)
                except grpc.RpcError as e:
                    print("ERROR", e.code().name, e.details())
                    continue
                out = [str(resp.overall_code)]
                for s in resp.statuses:
                    lim = s.current_limit
                    reset = s.duration_until_reset.seconds * 10**9 + s.duration_until_reset.nanos
                    out.append("%d/%d/%d/%s/%d/%d" % (s.code, lim.requests_per_unit, lim.unit,
                                                      lim.name or "-", s.limit_remaining, reset))
                print(" ".join(out))
    sys.stdout.flush()


main()
