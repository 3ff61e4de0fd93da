// Object operations as warp (MinIO's S3 benchmark) times them: many small requests, one per
// object (or per page of a listing), each a whole PUT of a new object, a HEAD, a whole GET, a
// DELETE or a LIST page, with `depth` in flight on kept connections. The curl engine's transport
// runs them (engines/curl.cpp, the only libcurl caller); what each request is, is its protocol's
// (engines/curl/protocol.hpp's Objects). gdsbench/commands/objects.py drives them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine.hpp"
#include "histogram.hpp"

namespace gds {

struct ObjectOps {
  std::string op;                  // "put", "head", "get", "delete" or "list"
  std::vector<std::string> names;  // an object each (s3://BUCKET/KEY); "list": a prefix each, listed whole
  unsigned depth = 1;              // requests in flight
  uint64_t size = 0;               // put: each object's bytes (the pattern); get: the most a body may hold
  std::string mark;                // put: the objects' gdsbench mark
  uint64_t seed = 1;               // put: the pattern's seed
  OptionValues options;            // the curl engine's (timeout_ns, retries, http2)
  // head, get, list: the names asked over and over, from the first, until this long since the
  // first request (warp's --duration; no new request after it); 0: each name once
  uint64_t duration_ns = 0;
  unsigned batch = 1;  // delete: objects a request removes (S3's DeleteObjects above 1; warp's --batch)
};

struct ObjectOpsResult {
  LatencyHistogram latency;     // each request: its first try's issue to its answer's end
  LatencyHistogram first_byte;  // each request: its first try's issue to its answer's first header
  uint64_t ops = 0;             // requests answered (a listing: its pages)
  uint64_t objects = 0;         // objects they were about (put, head, get, delete: each one's; a batch: its all)
  uint64_t bytes = 0;           // of bodies sent (put) or received (get)
  uint64_t listed = 0;          // names a listing's pages held
  uint64_t connections = 0, retries = 0;
  uint64_t ns = 0;  // the first request's issue to the last answer's end
};

// Runs every request of ops in the calling thread. Throws InputError (a protocol without object
// operations, no credentials) or IoError (a request refused or failed, naming its object).
ObjectOpsResult run_object_ops(const ObjectOps& ops);

}  // namespace gds
