// The curl engine's seam, after kvikio's RemoteEndpoint classes: the transport
// (engines/curl.cpp) drives the requests (libcurl's multi loop, connections,
// timeouts, retries, the timing of each) and is the only code that calls
// libcurl; a protocol (a file here: http.cpp, s3.cpp) says what a name means
// and how its requests are asked and answered. Every protocol here speaks HTTP,
// so an Endpoint's defaults are plain HTTP's rules (http.cpp); a protocol
// overrides what differs (ftp.cpp overrides the answers' checks: FTP's
// refusals come back as libcurl's errors).
//
// A new protocol is one file here defining its Protocol, plus one line in
// protocols.cpp (CMakeLists.txt builds every .cpp of this folder).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../engine.hpp"
#include "../../error.hpp"

namespace gds::remote {

// What one try of a request was answered, as it came: the endpoint reads its headers and body into
// it; the transport keeps one per request and starts it anew at each try.
struct Answer {
  const IoRequest* asked = nullptr;  // the range asked; nullptr: the size probe
  bool range_matches = false;        // a Content-Range naming the range asked
  bool wrong_range = false;          // 206 without the Content-Range asked: another range's data
  bool ignores_range = false;        // 200 without the Content-Range asked: the whole object is coming
  std::string content_range;         // the answer's Content-Range, as sent (for the message)
  std::string error_body;            // the start of an error answer (S3's <Code>)
  std::string etag;                  // ETag: what a written part is named by when its upload is completed
  std::string mark;    // x-amz-meta-gdsbench-prepared: an object gdsbench made (gdsbench.system.object_store)
  std::string server;  // who answered, as it says itself (HTTP's Server header, FTP's greeting); "": unsaid
};

// What the transport does with a piece of an answer's body.
enum class Body {
  kData,     // the range's bytes: into the request's buffer
  kNotData,  // kept by the endpoint (an error's words), not data
  kRefused,  // not the bytes asked: the transfer is aborted
};

// Per-handle options: what every request to an endpoint carries beyond its URL, applied by the
// transport to each of its handles (S3: its signature).
struct Signing {
  std::string aws_sigv4;             // libcurl's CURLOPT_AWS_SIGV4 ("": unsigned)
  std::string userpwd;               // the key pair it signs with
  std::vector<std::string> headers;  // sent with every request
  bool netrc = false;                // the login's password from the user's ~/.netrc, as curl --netrc-optional
  bool operator==(const Signing& o) const {
    return aws_sigv4 == o.aws_sigv4 && userpwd == o.userpwd && headers == o.headers && netrc == o.netrc;
  }
};

// One request of a write, as its protocol asks it: the transport sends `method` to `url` with
// `headers` (in place of the signing's) and a body: the write's bytes for a part or a whole
// object, else `body` (S3's list of parts).
struct Ask {
  std::string method;  // "PUT", "POST", "DELETE"; a write's bytes go as libcurl's upload: HTTP PUT, FTP STOR
  std::string url;
  std::vector<std::string> headers;
  std::string body;
};

// How a protocol writes an object (S3's PUT and multipart upload): always whole, as a new
// version that replaces the old one only once complete. `mark`: the object's gdsbench mark,
// carried over to the new version (x-amz-meta-gdsbench-prepared). `version`: the ETag of the
// version the run looked at ("": none known); the object is replaced only if it is still that one
// (S3's If-Match), so another writer's object put meanwhile is left as they made it; kAbsent:
// only if there is none yet (S3's If-None-Match), for an object the run creates.
inline const std::string kAbsent = "*";
class Uploads {
 public:
  virtual ~Uploads() = default;
  virtual Ask whole(const std::string& mark, const std::string& version) const = 0;  // the object in one request
  virtual Ask begin(const std::string& mark) const = 0;                              // an upload in parts ...
  virtual std::string upload_id(const std::string& answer) const = 0;      // ... named in its answer ("": none)
  virtual Ask part(const std::string& upload, unsigned number) const = 0;  // part `number` (from 1)
  // The upload made the object, of its parts in order (their ETags); an answer of 200 may still
  // carry an <Error> (S3 says so), which error_in finds.
  virtual Ask complete(const std::string& upload, const std::vector<std::string>& etags,
                       const std::string& version) const = 0;
  virtual Ask abort(const std::string& upload) const = 0;  // the parts dropped, the object left as it was
  // The version a completed upload made, from its answer ("": not named).
  virtual std::string completed_version(const std::string& answer) const = 0;
  virtual std::string error_in(const std::string& answer) const = 0;  // "" where the answer holds none
  // Whether the server keeps an object's mark (S3's metadata): where it does not (a WebDAV server),
  // gdsbench's Python knows its objects by their pattern instead, and the engine does not ask.
  virtual bool keeps_mark() const { return true; }
};

// The uploads of a protocol that writes an object only whole, in one request (WebDAV's PUT, FTP's
// STOR), and keeps no mark (gdsbench's Python knows its objects by their pattern): every step of
// an upload in parts is refused, in the words whole_only() gives.
class WholeUploads : public Uploads {
 public:
  Ask begin(const std::string&) const override { throw whole_only(); }
  std::string upload_id(const std::string&) const override { return ""; }
  Ask part(const std::string&, unsigned) const override { throw whole_only(); }
  Ask complete(const std::string&, const std::vector<std::string>&, const std::string&) const override {
    throw whole_only();
  }
  Ask abort(const std::string&) const override { throw whole_only(); }
  std::string completed_version(const std::string&) const override { return ""; }
  std::string error_in(const std::string&) const override { return ""; }
  bool keeps_mark() const override { return false; }

 protected:
  virtual InputError whole_only() const = 0;  // why an upload in parts is refused, naming the object
};

// Operations on objects as whole things (object_ops.hpp: warp's PUT, HEAD, GET, DELETE, LIST), for
// a protocol that has them (S3); HEAD and GET of the object are HTTP's own.
class Objects {
 public:
  virtual ~Objects() = default;
  virtual Ask create(const std::string& mark) const = 0;  // a PUT of the object, new (never over one)
  virtual Ask remove() const = 0;                         // its DELETE
  // One request removing these objects (names as the user gives them, each of this one's bucket:
  // S3's DeleteObjects, quiet, so its answer names only what it could not remove) ...
  virtual Ask remove_batch(const std::vector<std::string>& names) const = 0;
  // ... and what in its answer says an object was not removed, in words ("": every one was).
  virtual std::string batch_error(const std::string& answer) const = 0;
  // One page of the names under this name taken as a prefix, after the page `token` ended ("": the first).
  virtual Ask list(const std::string& token) const = 0;
  // What a page of a listing holds: how many names, and the token of the next page ("": the last).
  virtual std::pair<uint64_t, std::string> listed(const std::string& answer) const = 0;
};

// One object on a server, as its protocol names it, asks for it and reads its answers.
class Endpoint {
 public:
  Endpoint(std::string name, std::string url) : name(std::move(name)), url(std::move(url)) {}
  virtual ~Endpoint() = default;
  const std::string name;  // as the user gave it (named in errors)
  const std::string url;   // what is requested

  virtual const char* protocol() const = 0;  // what the record calls it: "http", "s3"
  // Whether its answers are HTTP's, with a version the record names (--http2 asks for 2).
  virtual bool speaks_http() const { return true; }
  // The size probe, as messages name it: HTTP's HEAD.
  virtual const char* probe_name() const { return "HEAD"; }
  // Per-handle options. A handle set up for one endpoint may ask for another (retarget) where
  // both sign alike.
  virtual Signing signing() const { return {}; }
  // The range request: `length` bytes at `offset`, as libcurl's CURLOPT_RANGE takes them.
  virtual std::string range(uint64_t offset, uint32_t length) const;
  // The size probe (the transport asks without a body: HEAD): the object's size from its
  // granted answer's Content-Length (-1: none given; InputError).
  virtual uint64_t size_of(int64_t content_length) const;
  // The check of an answer, as it comes (each header line, each piece of its body) ...
  virtual void on_header(Answer& answer, const std::string& line) const;
  virtual Body on_body(Answer& answer, long status, const char* data, size_t bytes) const;
  // ... and once complete: whether what came is another range than asked ("" where it is not) ...
  virtual std::string wrong_range(const Answer& answer, long status) const;
  // ... and whether the answer refuses the request, in words ("" where it grants it; the size
  // probe's only grant is 200). `location`: where a redirect points (not followed).
  virtual std::string refusal(const Answer& answer, long status, const std::string& location) const;
  // Whether a refusal may be tried again (--retries): the server's trouble, not the request's.
  virtual bool may_retry(long status) const;
  // How it writes objects; nullptr: it reads only (gdsbench measures no writes over it yet).
  virtual const Uploads* uploads() const { return nullptr; }
  // Its operations on whole objects; nullptr: none measured over it.
  virtual const Objects* objects() const { return nullptr; }

 protected:
  // Why the server refused, after "HTTP <status>: " (and the error body's code).
  virtual std::string why(long status, const std::string& location) const;
};

struct Protocol {
  const char* name;                  // the record's word for it, as its Endpoint's protocol(): "http", "s3"
  std::vector<std::string> schemes;  // the names it reads start so: "http://", "s3://"
  // The endpoint a name means (InputError where it cannot be one: its credentials missing, say).
  std::unique_ptr<Endpoint> (*resolve)(const std::string& name);
};

// Every protocol, in the order gdsbench names their schemes (protocols.cpp).
const std::vector<Protocol>& protocols();
// The schemes of every protocol, each with its protocol's name, in protocols.cpp's order (what
// gdsbench reads as a URL).
std::vector<std::pair<std::string, std::string>> schemes();
// The endpoint a name means, by its scheme (InputError where no protocol reads it).
std::unique_ptr<Endpoint> resolve(const std::string& name);
// The text between <name> and </name> in an answer's XML (S3's dialect), "" where none.
std::string xml_element(const std::string& xml, const std::string& name);
// A write's condition on the version it may replace (Uploads' `version`), added to its headers:
// If-None-Match: * for kAbsent, If-Match: VERSION for a known one, none for "".
void add_condition(std::vector<std::string>& headers, const std::string& version);

}  // namespace gds::remote
