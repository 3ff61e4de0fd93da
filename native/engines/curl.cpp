// curl: ranged reads of an object, and whole-object writes where its protocol
// writes (S3), through libcurl's multi interface: the transport. Each worker thread drives one curl_multi with up to
// `depth` reads in flight, each on an easy handle that keeps its connection alive between requests where its protocol
// allows (fio's engines/http.c does one request at a time per job). What a name means, how a request is signed and
// ranged and what its answer means is its protocol's (curl/protocol.hpp: HTTP(S), S3 and FTP today); https trusts
// AWS_CA_BUNDLE's certificates where it is set (a private CA), as the AWS tools do.
//
// Every body's length is checked: a longer or shorter one than asked is an
// error, as is a request that takes longer than --timeout. A failure of the
// connection, or an answer its protocol says may be retried (HTTP 429, 5xx), is
// tried again up to --retries times, after a backoff (100 ms, doubling, at most
// 2 s), counted apart; nothing else is retried. Opening the engine asks for the
// object once (HTTP's HEAD, FTP's SIZE): a missing object, refused credentials or a server that
// does not answer fail there, before the run, in one line.
//
// A write engine writes the object whole (curl/protocol.hpp's Uploads): a write
// of all of it is one PUT; else the first write begins an upload in parts (its
// wait is that write's), each write is part offset/length + 1, and sync(), at the
// end of the worker's writes, completes it (timed as fio's end_fsync) only if
// every part of the object is in: a region written in part would shorten it, so
// that upload is aborted and the run fails saying so. An upload not completed
// (a failure, a stop) is aborted when the engine closes; the object stays as it was.
#include "../engine.hpp"
#include "../error.hpp"
#include "../object_ops.hpp"
#include "curl/protocol.hpp"

namespace gds {
constexpr Capabilities kCurlCan = {
    Opens::kUrl,          /*supports_direct=*/false, /*buffered_flags=*/false, /*max_depth=*/1024, kReadWrite,
    /*gpu_buffers=*/false};
constexpr uint64_t kSecond = 1000000000ull;
constexpr long kDefaultRecvBuffer = 128 * 1024;  // why 128 KiB: set_common
const std::vector<EngineOption> kCurlOptions = {
    {"http2", "bool", "ask for HTTP/2 (ALPN over https, Upgrade over http) instead of HTTP/1.1 (curl)", 0, 0, 1,
     /*at_most_depth=*/false},
    {"timeout_ns", "duration",
     "longest a request may take, connecting included, before the run fails naming it (curl; 0: no limit)",
     30 * kSecond, 0, 86400 * kSecond, /*at_most_depth=*/false},
    {"retries", "int",
     "try a request again this many times after a transport failure, a timeout or HTTP 429/5xx (curl; counted "
     "apart, as retries; 0: a failure ends the run)",
     0, 0, 100, /*at_most_depth=*/false},
    {"recv_buffer", "size",
     "libcurl's receive buffer, the most one read from the socket takes before it is copied into the request's "
     "(curl; CURLOPT_BUFFERSIZE, 1 KiB to 512 KiB)",
     kDefaultRecvBuffer, 1024, 512 * 1024, /*at_most_depth=*/false}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBCURL
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "../clock.hpp"
#include "../copy.hpp"
#include "../pattern.hpp"

namespace gds {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// How the engine asks: its options.
struct Asking {
  bool http2 = false;
  uint64_t timeout_ns = 0;  // 0: no limit
  unsigned retries = 0;
  long recv_buffer = kDefaultRecvBuffer;
};

// The engine's options as it asks (kCurlOptions).
Asking asking_from(const OptionValues& options) {
  return {kCurlEngine.option(options, "http2") != 0, kCurlEngine.option(options, "timeout_ns"),
          unsigned(kCurlEngine.option(options, "retries")), long(kCurlEngine.option(options, "recv_buffer"))};
}

// One request's state: its buffer, what came back, and the answer's status.
struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  IoRequest* request = nullptr;
  unsigned attempts = 0;   // of this request, the first included
  uint64_t issued_ns = 0;  // the first try's issue (the loop's stamp, now_ns()): kept across retries
  uint64_t body_ns = 0;    // now_ns() when this try's first body byte came (0: none yet)
  uint64_t got = 0;
  uint64_t sent = 0;                           // of a write's body
  curl_slist* ask_headers = nullptr;           // a write's own (remote::Ask), in place of the signing's
  bool too_long = false;                       // more body than the range asked
  Landing landing;                             // a read's bytes, counted while in flight (copy.hpp)
  remote::Answer answer;                       // what this try was answered, as its protocol reads it
  const remote::Endpoint* endpoint = nullptr;  // who reads its answers
  char error[CURL_ERROR_SIZE] = {};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->endpoint->on_header(t->answer, std::string(data, size * n));
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (t->request && t->request->direction == Direction::kWrite) {  // the answer to a write: words, never data
    if (status >= 300) t->answer.error_body.append(data, std::min<size_t>(bytes, 2048));
    return bytes;
  }
  switch (t->endpoint->on_body(t->answer, status, data, bytes)) {
    case remote::Body::kNotData:
      return bytes;
    case remote::Body::kRefused:
      return 0;  // aborts the transfer
    case remote::Body::kData:
      break;
  }
  if (!t->request || t->got + bytes > t->request->length) {
    t->too_long = true;
    return 0;  // aborts the transfer: the server sent more than was asked
  }
  if (!t->body_ns) t->body_ns = now_ns();  // the answer's first body byte: its time to first byte ends here
  copy_received(t->request->buf + t->got, data, bytes, t->landing.past_cache());
  t->got += bytes;
  return bytes;
}

// A write's body, from its request's buffer.
size_t on_read(char* out, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = std::min<uint64_t>(size * n, t->request->length - t->sent);
  copy_received(out, t->request->buf + t->sent, bytes);
  t->sent += bytes;
  return bytes;
}

// Headers as a list libcurl keeps (a handle's signing's, or a write's Ask's).
curl_slist* header_list(const std::vector<std::string>& headers) {
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  return list;
}

// A transfer's handle and header lists freed (the handle out of any multi handle first).
void release(Transfer& t) {
  curl_easy_cleanup(t.easy);
  curl_slist_free_all(t.headers);
  curl_slist_free_all(t.ask_headers);
}

std::string seconds_text(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", double(ns) / 1e9);
  return text;
}

// libcurl's failure in words, with the fix where gdsbench knows it.
std::string transport_failure(CURLcode rc, const char* detail, const Asking& asking) {
  const std::string what = detail[0] ? detail : curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return "no complete answer within --timeout " + seconds_text(asking.timeout_ns) + " (" + what +
           "); raise --timeout, or find what slows the server";
  if (rc == CURLE_LOGIN_DENIED)
    return "the server refused the login (" + what +
           "); name the user in the URL (ftp://USER@HOST/PATH) and put its password in ~/.netrc";
  if (rc == CURLE_REMOTE_FILE_NOT_FOUND) return "no such file on the server (" + what + ")";
  if (rc == CURLE_REMOTE_ACCESS_DENIED) return "the server refused access (" + what + ")";
  if (rc == CURLE_UPLOAD_FAILED)  // FTP's STOR refused: 553 where its user may not write the file
    return "the server refused to store it (" + what + "); its login may not write there";
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CACERT_BADFILE ||
      rc == CURLE_SSL_CERTPROBLEM)
    return "TLS failed: " + what + "; for a server with its own CA, set AWS_CA_BUNDLE to its certificate file";
  return what;
}

// How long to wait before try `attempts` + 1: 100 ms, doubling, at most 2 s (a busy S3 asks
// for backoff; kvikio waits 0.5 s doubling to 4 s).
uint64_t backoff_ns(unsigned attempts) {
  return std::min<uint64_t>(2000000000ull, 100000000ull << std::min(attempts - 1, 5u));
}

// Failures worth another try (--retries): the connection's, or an answer its protocol says may be
// retried (the server's trouble); not the request's.
bool may_retry(CURLcode rc, long status, const remote::Endpoint& endpoint) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return rc == CURLE_OK && endpoint.may_retry(status);
  }
}

// A handle set up to ask for `endpoint`'s object as the engine asks, its answers read into `t`.
void set_common(CURL* easy, const remote::Endpoint& endpoint, const std::string& ca_bundle, const Asking& asking,
                Transfer* t) {
  t->endpoint = &endpoint;
  curl_easy_setopt(easy, CURLOPT_URL, endpoint.url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  const long timeout_ms = long((asking.timeout_ns + 999999) / 1000000);  // rounded up: 0 means no limit to libcurl
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms ? std::min(timeout_ms, 10000L) : 10000L);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);  // 0: none
  if (!ca_bundle.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, ca_bundle.c_str());
  // libcurl's receive buffer (16 KiB unless asked; curl's CLI asks for 100 KiB). Larger takes a body in fewer
  // reads and callbacks, but libcurl 7.x mallocs it at each transfer's start and frees it at its end: at
  // 512 KiB glibc gave its pages back each time and every page a body filled was faulted in again, where
  // 128 KiB, the default, stays in the heap (benchmarks/curl_profile.py's --recv-buffer rows)
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, asking.recv_buffer);
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, long(asking.http2 ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
  const remote::Signing signing = endpoint.signing();
  if (!signing.aws_sigv4.empty()) curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing.aws_sigv4.c_str());
  if (!signing.userpwd.empty()) curl_easy_setopt(easy, CURLOPT_USERPWD, signing.userpwd.c_str());
  if (signing.netrc) curl_easy_setopt(easy, CURLOPT_NETRC, long(CURL_NETRC_OPTIONAL));
  t->headers = header_list(signing.headers);
  if (t->headers) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers);
}

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Requests waiting out their --retries backoff (100 ms doubling), each started again once due.
template <typename Request>
class Backoffs {
 public:
  void add(unsigned attempts, Request* r) { waiting_.emplace_back(now_ns() + backoff_ns(attempts), r); }
  bool empty() const { return waiting_.empty(); }
  // Those whose backoff is over, handed to start() and forgotten.
  template <typename Start>
  void start_due(Start start) {
    const uint64_t now = now_ns();
    for (size_t i = 0; i < waiting_.size();) {
      if (waiting_[i].first <= now) {
        Request* r = waiting_[i].second;
        waiting_.erase(waiting_.begin() + long(i));
        start(*r);
      } else {
        ++i;
      }
    }
  }
  // How long a wait for libcurl may be: 100 ms, or until the next backoff ends.
  int poll_ms() const {
    uint64_t wait = 100;
    const uint64_t now = now_ns();
    for (const auto& [due, r] : waiting_) wait = std::min<uint64_t>(wait, due > now ? (due - now) / 1000000 + 1 : 0);
    return int(wait);
  }

 private:
  std::vector<std::pair<uint64_t, Request*>> waiting_;  // (when to start again, request)
};

class CurlEngine final : public Engine {
 public:
  CurlEngine(const Target& target, unsigned depth, const Asking& asking)
      : endpoint_(remote::resolve(target.path)), ca_bundle_(env("AWS_CA_BUNDLE")), asking_(asking) {
    init_once();
    if (target.create_size)
      create(target);
    else
      probe();
    if (target.direction == Direction::kWrite) {  // (gdsbench's Python checks the same, first)
      uploads_ = endpoint_->uploads();
      if (!uploads_)
        throw InputError("PATH " + endpoint_->name + ": writes over " + endpoint_->protocol() +
                         " are not measured yet");
      if (uploads_->keeps_mark() && !facts_.count("gdsbench_mark"))
        throw InputError("PATH " + endpoint_->name +
                         ": gdsbench did not create this object, and writes only into "
                         "objects it made");
    }
    multi_ = curl_multi_init();
    transfers_.resize(depth);
    for (auto& t : transfers_) {
      t.easy = curl_easy_init();
      set_common(t.easy, *endpoint_, ca_bundle_, asking_, &t);
      idle_.push_back(&t);
    }
  }
  ~CurlEngine() override {
    for (auto& t : transfers_) {
      if (t.request) curl_multi_remove_handle(multi_, t.easy);
      release(t);
    }
    if (multi_) curl_multi_cleanup(multi_);
    if (!upload_.empty()) {  // not completed (a failure, a stop): its parts dropped, the object as it was
      try {
        ask_alone(uploads_->abort(upload_), "aborting the upload");
      } catch (...) {  // the server's own rules expire what is left (S3's lifecycle), as for any client that died
      }
    }
  }
  bool writes_need_sync() const override { return uploads_ != nullptr; }
  // The upload in parts completed, where every part of the object is in (see the top).
  int sync() override {
    if (upload_.empty()) return 0;
    const std::string upload = upload_;
    upload_.clear();  // from here, completed or aborted: never again
    const size_t in = size_t(std::count_if(etags_.begin(), etags_.end(), [](const auto& e) { return !e.empty(); }));
    if (in < etags_.size()) {
      ask_alone(uploads_->abort(upload), "aborting the upload");
      throw IoError("only " + std::to_string(in) + " of the " + std::to_string(etags_.size()) + " parts of " +
                    endpoint_->name +
                    " were written when the writes ended; an object is written whole, so the upload was aborted "
                    "and the object left as it was: write all of it (--io-size its size, or a longer --runtime)");
    }
    std::vector<std::string> etags;
    etags.swap(etags_);  // the next upload (another round of writes) starts with no part in
    try {
      const std::string answer = ask_alone(uploads_->complete(upload, etags, version_), "completing the upload");
      const std::string error = uploads_->error_in(answer);  // S3 may answer 200 with an <Error>
      if (!error.empty())
        throw IoError("completing the upload of " + endpoint_->name + ": the server answered " + error);
      version_ = uploads_->completed_version(answer);  // what the next upload may replace ("": unknown)
    } catch (...) {  // refused (the object changed: 412): its parts dropped, nothing left behind
      try {
        ask_alone(uploads_->abort(upload), "aborting the upload");
      } catch (...) {
      }
      throw;
    }
    return 0;
  }
  uint64_t size() const override { return size_; }
  uint64_t connections() const override { return connections_; }
  uint64_t retries() const override { return retries_; }
  uint64_t streamed_bytes() const override { return streamed_bytes_; }
  // The next object on the kept connections, unlooked at (its size unknown), where the handles
  // ask for it alike: an S3 object after an S3 object, an HTTP one after an HTTP one.
  bool retarget(const Target& target) override {
    if (uploads_ || target.direction == Direction::kWrite) return false;  // a writer looks at each object first
    std::unique_ptr<remote::Endpoint> next = remote::resolve(target.path);
    if (!(next->signing() == endpoint_->signing()) || env("AWS_CA_BUNDLE") != ca_bundle_) return false;
    endpoint_ = std::move(next);
    for (auto& t : transfers_) t.endpoint = endpoint_.get();
    size_ = UINT64_MAX;
    facts_["url"] = endpoint_->url;
    return true;
  }
  std::map<std::string, std::string> describe() const override { return facts_; }

  void queue(IoRequest* r) override {
    Transfer* t = idle_.back();
    idle_.pop_back();
    t->request = r;
    t->attempts = 0;
    if (r->direction == Direction::kRead) t->landing.start(r->length);
    t->issued_ns = r->submit_ns ? r->submit_ns : now_ns();  // the loop stamps its requests; a lone read may not
    start(*t);
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    unsigned n = 0;
    for (;;) {
      backing_off_.start_due([this](Transfer& t) { start(t); });
      int running = 0;
      CURLMcode mc = curl_multi_perform(multi_, &running);
      if (mc != CURLM_OK)
        throw IoError(std::string("libcurl: ") + curl_multi_strerror(mc) + " reading " + endpoint_->name);
      int left = 0;
      while (n < max) {
        CURLMsg* msg = curl_multi_info_read(multi_, &left);
        if (!msg) break;
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        if (IoRequest* r = finish(*t, msg->data.result)) done[n++] = r;
      }
      if (n >= min || (running == 0 && n > 0)) return n;
      if (running == 0 && idle_.size() == transfers_.size()) return n;  // nothing was queued
      curl_multi_poll(multi_, nullptr, 0, backing_off_.poll_ms(), nullptr);
    }
  }

 private:
  // Whether the object answers, and its size, before anything is measured.
  void probe() {
    Transfer t;
    t.easy = curl_easy_init();
    set_common(t.easy, *endpoint_, ca_bundle_, asking_, &t);
    curl_easy_setopt(t.easy, CURLOPT_NOBODY, 1L);
    CURLcode rc;
    long status = 0, version = 0;
    const unsigned tries = perform_tried(t, rc, status, [] {});
    curl_off_t length = -1;
    char *ip = nullptr, *location = nullptr;
    curl_easy_getinfo(t.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    curl_easy_getinfo(t.easy, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(t.easy, CURLINFO_PRIMARY_IP, &ip);
    curl_easy_getinfo(t.easy, CURLINFO_REDIRECT_URL, &location);
    const std::string server_ip = ip ? ip : "";
    const std::string asked =
        std::string(" (") + endpoint_->probe_name() + ", " + std::to_string(tries) + (tries == 1 ? " try)" : " tries)");
    const std::string error = rc != CURLE_OK ? transport_failure(rc, t.error, asking_)
                                             : endpoint_->refusal(t.answer, status, location ? location : "");
    release(t);  // (location, ip: the handle's own, read above)
    if (!error.empty() && (rc == CURLE_REMOTE_FILE_NOT_FOUND || (rc == CURLE_OK && status == 404)))
      throw Missing("PATH " + endpoint_->name + ": " + error + asked);
    if (!error.empty()) throw InputError("PATH " + endpoint_->name + ": " + error + asked);
    size_ = endpoint_->size_of(length);
    const bool granted = version == CURL_HTTP_VERSION_2_0;
    facts_ = {{"url", endpoint_->url},
              {"protocol", endpoint_->protocol()},
              {"probe", endpoint_->probe_name()},
              {"server_ip", server_ip},
              {"libcurl", curl_version_info(CURLVERSION_NOW)->version}};
    if (endpoint_->speaks_http())
      facts_["http_version"] = granted         ? "HTTP/2"
                               : asking_.http2 ? "HTTP/1.1 (--http2 asked, not granted by the server)"
                                               : "HTTP/1.1";
    if (!t.answer.mark.empty()) facts_["gdsbench_mark"] = t.answer.mark;
    version_ = t.answer.etag;
    if (!t.answer.server.empty()) facts_["server"] = t.answer.server;
  }

  // A new object of target.create_size bytes, not looked at (nothing is there to look at): its
  // writes create it only where none is there yet (Uploads' kAbsent), and then replace only the
  // version they made.
  void create(const Target& target) {
    if (target.direction != Direction::kWrite)
      throw InputError("PATH " + endpoint_->name + ": only a write creates an object");
    size_ = target.create_size;
    version_ = remote::kAbsent;
    facts_ = {{"url", endpoint_->url},
              {"protocol", endpoint_->protocol()},
              {"libcurl", curl_version_info(CURLVERSION_NOW)->version},
              {"gdsbench_mark", target.create_mark}};
  }

  // (Re)start t's request: a ranged GET of its bytes, or the write of them (write_ask).
  void start(Transfer& t) {
    const IoRequest& r = *t.request;
    ++t.attempts;
    t.got = 0;
    t.sent = 0;
    t.body_ns = 0;  // each try's own: only the try that counts gives the first byte (a 503's body is no data)
    t.too_long = false;
    t.answer = remote::Answer();
    t.answer.asked = &r;
    t.error[0] = 0;
    if (r.direction == Direction::kWrite) {
      const remote::Ask ask = write_ask(r);
      curl_slist_free_all(t.ask_headers);
      t.ask_headers = header_list(ask.headers);
      curl_easy_setopt(t.easy, CURLOPT_URL, ask.url.c_str());  // copied by libcurl
      curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, t.ask_headers);
      curl_easy_setopt(t.easy, CURLOPT_UPLOAD, 1L);  // a PUT of the request's bytes
      curl_easy_setopt(t.easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(r.length));
      curl_easy_setopt(t.easy, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(t.easy, CURLOPT_READDATA, &t);
      // the body at once: libcurl asks "Expect: 100-continue" before one over 1 MiB and would wait up
      // to a second for a server that does not answer it (an empty Expect header would drop it, but
      // libcurl 7.88 signs that header for S3 and then leaves it out: the signature fails)
      curl_easy_setopt(t.easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
    } else {
      const std::string range = endpoint_->range(r.offset, r.length);
      curl_easy_setopt(t.easy, CURLOPT_URL, endpoint_->url.c_str());  // copied by libcurl, as is the range
      curl_easy_setopt(t.easy, CURLOPT_RANGE, range.c_str());
    }
    curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
    curl_multi_add_handle(multi_, t.easy);
  }

  // Whether a write is all of the object: one PUT, outside any upload in parts.
  bool writes_whole(const IoRequest& r) const { return r.offset == 0 && r.length >= size_; }

  // What writes r: the whole object in one PUT, or its part in the upload, begun by the first
  // write that is not all of it.
  remote::Ask write_ask(const IoRequest& r) {
    if (writes_whole(r)) return uploads_->whole(facts_["gdsbench_mark"], version_);
    if (etags_.empty()) {
      part_length_ = r.length;
      etags_.assign(size_t((size_ + part_length_ - 1) / part_length_), "");
    }
    if (r.offset % part_length_ || (r.length != part_length_ && r.offset + r.length != size_))
      throw IoError("writing " + std::to_string(r.length) + " bytes at offset " + std::to_string(r.offset) + " of " +
                    endpoint_->name + ": an object's parts are all of one size (" + std::to_string(part_length_) +
                    " bytes), at multiples of it");
    if (upload_.empty()) {
      const std::string answer = ask_alone(uploads_->begin(facts_["gdsbench_mark"]), "beginning an upload");
      upload_ = uploads_->upload_id(answer);
      if (upload_.empty())
        throw IoError("beginning an upload of " + endpoint_->name + ": the server named no upload (" +
                      answer.substr(0, 200) + ")");
    }
    return uploads_->part(upload_, unsigned(r.offset / part_length_ + 1));
  }

  // A request outside the run's loop (the size probe, an upload's beginning, completion or abort),
  // tried as the run's are (--retries, with their backoff): `fresh` readies each try; the tries taken.
  template <typename Fresh>
  unsigned perform_tried(Transfer& t, CURLcode& rc, long& status, Fresh fresh) const {
    for (unsigned tries = 1;; ++tries) {
      t.error[0] = 0;
      t.answer = remote::Answer();
      fresh();
      rc = curl_easy_perform(t.easy);
      curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
      if (tries > asking_.retries || !may_retry(rc, status, *endpoint_)) return tries;
      std::this_thread::sleep_for(std::chrono::nanoseconds(backoff_ns(tries)));
    }
  }

  // One request of its own, outside the run's (an upload's beginning, completion or abort), tried
  // as the run's are (--timeout, --retries): the answer's body, or IoError naming `what`.
  std::string ask_alone(const remote::Ask& ask, const std::string& what) {
    Transfer t;
    t.easy = curl_easy_init();
    set_common(t.easy, *endpoint_, ca_bundle_, asking_, &t);
    t.ask_headers = header_list(ask.headers);
    curl_easy_setopt(t.easy, CURLOPT_URL, ask.url.c_str());
    curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, t.ask_headers);
    curl_easy_setopt(t.easy, CURLOPT_CUSTOMREQUEST, ask.method.c_str());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDS, ask.body.c_str());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDSIZE, long(ask.body.size()));
    std::string body;
    curl_easy_setopt(
        t.easy, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) {
          static_cast<std::string*>(user)->append(data, size * n);
          return size * n;
        });
    curl_easy_setopt(t.easy, CURLOPT_WRITEDATA, &body);
    CURLcode rc;
    long status = 0;
    perform_tried(t, rc, status, [&body] { body.clear(); });
    const std::string failure = rc != CURLE_OK ? transport_failure(rc, t.error, asking_) : "";
    release(t);
    if (!failure.empty()) throw IoError(what + " of " + endpoint_->name + ": " + failure);
    if (status >= 300) {
      t.answer.error_body = body;
      throw IoError(what + " of " + endpoint_->name + ": " + endpoint_->refusal(t.answer, status, ""));
    }
    return body;
  }

  // t's request, checked, once its answer is complete; nullptr where it was started again (--retries).
  // A retried request's latency runs from its first try: what its reader waited. So does its time
  // to first byte: from the first try's issue (the loop's submit_ns, on the clock the loop's
  // latency uses) to the first body byte of the try that counted, stamped in on_body. libcurl's
  // STARTTRANSFER would count from the last try's start only, and to its headers.
  IoRequest* finish(Transfer& t, CURLcode rc) {
    IoRequest* r = t.request;
    curl_multi_remove_handle(multi_, t.easy);
    long status = 0, connects = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(t.easy, CURLINFO_NUM_CONNECTS, &connects);
    connections_ += uint64_t(connects);
    const bool writing = r->direction == Direction::kWrite;
    const std::string wrong_range = writing ? "" : endpoint_->wrong_range(t.answer, status);
    const bool ranged_ok = wrong_range.empty() && !t.too_long;
    if (ranged_ok && may_retry(rc, status, *endpoint_) && t.attempts <= asking_.retries) {
      ++retries_;
      backing_off_.add(t.attempts, &t);  // started again by reap once due
      return nullptr;
    }
    t.request = nullptr;
    streamed_bytes_ += t.landing.end(t.got);  // what landed streamed, whatever the answer turns out to be
    idle_.push_back(&t);
    const std::string where = std::string(writing ? " writing " : " reading ") + std::to_string(r->length) +
                              " bytes at offset " + std::to_string(r->offset) + " of " + endpoint_->name +
                              (t.attempts > 1 ? " (try " + std::to_string(t.attempts) + ")" : "");
    if (!wrong_range.empty()) throw IoError(wrong_range + where);
    if (t.too_long) throw IoError("the server sent more than the range asked" + where);
    if (rc != CURLE_OK) throw IoError(transport_failure(rc, t.error, asking_) + where);
    char* location = nullptr;
    curl_easy_getinfo(t.easy, CURLINFO_REDIRECT_URL, &location);
    const std::string refusal = endpoint_->refusal(t.answer, status, location ? location : "");
    if (!refusal.empty()) throw IoError(refusal + where);
    if (writing) {
      if (!writes_whole(*r))
        etags_[r->offset / part_length_] = t.answer.etag;
      else
        version_ = t.answer.etag;  // the next whole PUT replaces this one ("": none named, so unconditioned)
      r->result = int64_t(r->length);
      return r;
    }
    const bool at_end = size_ != UINT64_MAX && r->offset + t.got == size_;  // a range asked past the end, cut there
    if (t.got < r->length && !at_end)
      throw IoError("the server sent a shorter body than asked: " + std::to_string(t.got) + " of " +
                    std::to_string(r->length) + " bytes" + where);
    r->result = int64_t(t.got);
    const uint64_t first_byte = t.body_ns ? t.body_ns : now_ns();                // an empty body: its answer's end
    r->first_byte_ns = first_byte > t.issued_ns ? first_byte - t.issued_ns : 1;  // 0 would mean "not seen"
    return r;
  }

  std::unique_ptr<remote::Endpoint> endpoint_;
  const std::string ca_bundle_;  // AWS_CA_BUNDLE, as the AWS tools read it: a private CA's certificates
  const Asking asking_;
  CURLM* multi_ = nullptr;
  std::vector<Transfer> transfers_;
  std::vector<Transfer*> idle_;
  uint64_t size_ = 0, connections_ = 0, retries_ = 0, streamed_bytes_ = 0;
  Backoffs<Transfer> backing_off_;  // --retries
  std::map<std::string, std::string> facts_;
  const remote::Uploads* uploads_ = nullptr;  // how it writes; nullptr: a reader
  std::string upload_;                        // the upload in parts under way ("": none)
  uint64_t part_length_ = 0;
  std::vector<std::string> etags_;  // of each part of the object, as written last ("": not yet)
  // The object's ETag as this run last saw it (the probe's, then each whole PUT's): its writes
  // replace only that version (Uploads), never one another writer put meanwhile.
  std::string version_;
};

// ---- object operations (object_ops.hpp): many objects, one request each, on the transport above ----

// One request slot of the object operations: a handle kept (its connection with it) from request to request.
struct OpSlot {
  Transfer t;
  std::unique_ptr<remote::Endpoint> endpoint;  // of the object asked now
  std::string name, body;                      // the object (or prefix); what came back (a listing, an error)
  std::vector<char> landing;                   // get: where the body lands
  const std::vector<char>* sent = nullptr;     // put: the body sent (the pattern, one for every slot)
  uint64_t issued_ns = 0;
  size_t at = 0;       // names[at]
  size_t count = 1;    // names[at .. at + count): a batch of deletes
  std::string token;   // list: the page asked after ("": the first)
  std::string posted;  // a batch's body (libcurl reads it as the request goes)
};

size_t op_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<OpSlot*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(s->t.easy, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300 || s->landing.empty()) {  // an error's words, a listing's page, another answer's words
    s->body.append(data, std::min<size_t>(bytes, size_t(1) << 20));
    return bytes;
  }
  if (s->t.got + bytes > s->landing.size()) {
    s->t.too_long = true;
    return 0;  // a body past the size asked: aborted
  }
  std::memcpy(s->landing.data() + s->t.got, data, bytes);  // where a reader's bytes land, as a GET's into a buffer
  s->t.got += bytes;
  return bytes;
}

// The answer's first header: its time to first byte ends here (from the first try's issue).
size_t op_header(char*, size_t size, size_t n, void* user) {
  auto* s = static_cast<OpSlot*>(user);
  if (!s->t.body_ns) s->t.body_ns = now_ns();
  return size * n;
}

size_t op_read(char* out, size_t size, size_t n, void* user) {
  auto* s = static_cast<OpSlot*>(user);
  const size_t bytes = std::min<uint64_t>(size * n, s->sent->size() - s->t.sent);
  std::memcpy(out, s->sent->data() + s->t.sent, bytes);
  s->t.sent += bytes;
  return bytes;
}

class ObjectOpsRun {
 public:
  explicit ObjectOpsRun(const ObjectOps& ops)
      : ops_(ops), asking_(asking_from(ops.options)), ca_bundle_(env("AWS_CA_BUNDLE")) {
    static const std::vector<std::string> kOps = {"put", "head", "get", "delete", "list"};
    if (std::find(kOps.begin(), kOps.end(), ops.op) == kOps.end())
      throw InputError("--ops " + ops.op + ": not an object operation (put, head, get, delete, list)");
    if (ops.duration_ns && (ops.op == "put" || ops.op == "delete"))  // each makes or removes an object once
      throw InputError("--duration: put and delete go over the set once; only head, get and list repeat it");
    if (ops.batch != 1 && ops.op != "delete")
      throw InputError("--batch " + std::to_string(ops.batch) + ": only delete removes objects in batches");
    step_ = std::max(1u, ops.batch);
    init_once();
    if (ops.op == "put") {
      pattern_.resize(ops.size);
      pattern::fill(pattern_.data(), pattern_.size(), 0, ops.seed);
    }
    multi_ = curl_multi_init();
    slots_.resize(std::max<size_t>(1, std::min<size_t>(ops.depth, (ops.names.size() + step_ - 1) / step_)));
    for (auto& s : slots_) {
      s.t.easy = curl_easy_init();
      if (ops.op == "get") s.landing.resize(ops.size);
      s.sent = &pattern_;
    }
  }
  ~ObjectOpsRun() {
    for (auto& s : slots_) {
      if (s.t.request) curl_multi_remove_handle(multi_, s.t.easy);
      release(s.t);
    }
    curl_multi_cleanup(multi_);
  }

  ObjectOpsResult run() {
    ObjectOpsResult out;
    const uint64_t started = now_ns();
    size_t next = 0, busy = 0;
    // whether there is a next request to start: each name once, or (a duration) the names again
    // from the first, for as long as it lasts
    auto more = [&] {
      if (!ops_.duration_ns) return next < ops_.names.size();
      if (next == ops_.names.size()) next = 0;
      return now_ns() - started < ops_.duration_ns;
    };
    for (auto& s : slots_)
      if (more()) start(s, next, ""), next += step_, ++busy;
    while (busy) {
      asked_ = false;
      backing_off_.start_due([this](OpSlot& s) { ask(s); });
      int running = 0;
      if (curl_multi_perform(multi_, &running) != CURLM_OK) throw IoError("libcurl: the multi loop failed");
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        OpSlot* s = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&s));
        const std::string token = finish(*s, msg->data.result, out);
        if (s->t.request) continue;  // started again (--retries)
        if (!token.empty())
          start(*s, s->at, token);  // the listing's next page, on the same slot
        else if (more())
          start(*s, next, ""), next += step_;
        else
          --busy;
      }
      // wait for the answers in flight; where there are none, for the next backoff to end (a request
      // started in this round has not run yet: no wait)
      if (busy && (running || (!asked_ && !backing_off_.empty())))
        curl_multi_poll(multi_, nullptr, 0, backing_off_.poll_ms(), nullptr);
    }
    out.ns = now_ns() - started;
    out.connections = connections_;
    out.retries = retries_;
    return out;
  }

 private:
  // Slot s asks for names[at] (a listing's page after `token`): a new request (a retry is ask()'s).
  void start(OpSlot& s, size_t at, const std::string& token) {
    if (!s.endpoint || s.name != ops_.names[at]) {
      std::unique_ptr<remote::Endpoint> endpoint = remote::resolve(ops_.names[at]);
      if (!endpoint->objects())
        throw InputError("PATH " + endpoint->name + ": object operations over " + endpoint->protocol() +
                         " are not measured; give an s3:// prefix");
      if (!s.endpoint || !(endpoint->signing() == s.endpoint->signing())) {  // a handle signs as its first endpoint
        curl_slist_free_all(s.t.headers);
        set_common(s.t.easy, *endpoint, ca_bundle_, asking_, &s.t);
        curl_easy_setopt(s.t.easy, CURLOPT_WRITEFUNCTION, op_body);
        curl_easy_setopt(s.t.easy, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(s.t.easy, CURLOPT_HEADERFUNCTION, op_header);
        curl_easy_setopt(s.t.easy, CURLOPT_HEADERDATA, &s);
        curl_easy_setopt(s.t.easy, CURLOPT_READFUNCTION, op_read);
        curl_easy_setopt(s.t.easy, CURLOPT_READDATA, &s);
        curl_easy_setopt(s.t.easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);  // the body at once (see start() above)
      }
      s.endpoint = std::move(endpoint);
      s.t.endpoint = s.endpoint.get();
      s.name = ops_.names[at];
    }
    s.at = at;
    s.count = std::min<size_t>(step_, ops_.names.size() - at);
    s.token = token;
    s.t.attempts = 0;
    s.issued_ns = now_ns();
    ask(s);
  }

  void ask(OpSlot& s) {
    const remote::Objects& objects = *s.endpoint->objects();
    ++s.t.attempts;
    s.t.got = s.t.sent = 0;
    s.t.body_ns = 0;  // this try's answer's first byte (the try that counts gives it)
    s.t.too_long = false;
    s.t.error[0] = 0;
    s.t.answer = remote::Answer();
    s.body.clear();
    s.t.request = &placeholder_;  // in flight
    asked_ = true;
    remote::Ask a;
    const std::string& op = ops_.op;
    if (op == "put") a = objects.create(ops_.mark);
    if (step_ > 1) {  // a batch (of deletes: the only op taken in batches), POSTed
      a = objects.remove_batch({ops_.names.begin() + long(s.at), ops_.names.begin() + long(s.at + s.count)});
      s.posted = std::move(a.body);
      curl_easy_setopt(s.t.easy, CURLOPT_POSTFIELDS, s.posted.c_str());
      curl_easy_setopt(s.t.easy, CURLOPT_POSTFIELDSIZE, long(s.posted.size()));
    } else if (op == "delete") {
      a = objects.remove();
      curl_easy_setopt(s.t.easy, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (op == "list") a = objects.list(s.token);
    if (op == "head" || op == "get") a = {op == "head" ? "HEAD" : "GET", s.endpoint->url, {}, ""};
    curl_slist_free_all(s.t.ask_headers);
    s.t.ask_headers = a.headers.empty() ? nullptr : header_list(a.headers);
    curl_easy_setopt(s.t.easy, CURLOPT_URL, a.url.c_str());
    curl_easy_setopt(s.t.easy, CURLOPT_HTTPHEADER, s.t.ask_headers ? s.t.ask_headers : s.t.headers);
    curl_easy_setopt(s.t.easy, CURLOPT_NOBODY, long(op == "head"));
    if (op == "put") {
      curl_easy_setopt(s.t.easy, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(s.t.easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(pattern_.size()));
    }
    curl_easy_setopt(s.t.easy, CURLOPT_PRIVATE, &s);
    curl_multi_add_handle(multi_, s.t.easy);
  }

  // s's answer, checked and counted: the token of a listing's next page ("": none, or not a listing).
  std::string finish(OpSlot& s, CURLcode rc, ObjectOpsResult& out) {
    curl_multi_remove_handle(multi_, s.t.easy);
    long status = 0, connects = 0;
    curl_easy_getinfo(s.t.easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(s.t.easy, CURLINFO_NUM_CONNECTS, &connects);
    connections_ += uint64_t(connects);
    if (!s.t.too_long && may_retry(rc, status, *s.endpoint) && s.t.attempts <= asking_.retries) {
      ++retries_;
      backing_off_.add(s.t.attempts, &s);
      return "";  // s.t.request stays set: started again once due
    }
    s.t.request = nullptr;
    const std::string where =
        " (" + ops_.op + " of " + s.name + (s.t.attempts > 1 ? ", try " + std::to_string(s.t.attempts) + ")" : ")");
    if (rc != CURLE_OK) throw IoError(transport_failure(rc, s.t.error, asking_) + where);
    if (s.t.too_long) throw IoError("the object is larger than --size " + std::to_string(ops_.size) + " bytes" + where);
    if (status < 200 || status >= 300) {
      s.t.answer.error_body = s.body.substr(0, 2048);
      throw IoError(s.endpoint->refusal(s.t.answer, status, "") + where);
    }
    if (step_ > 1) {  // a batch answers 200 with what it could not remove
      const std::string failed = s.endpoint->objects()->batch_error(s.body);
      if (!failed.empty()) throw IoError(failed + where);
    }
    const uint64_t now = now_ns();
    out.latency.add(now - s.issued_ns);
    out.first_byte.add(s.t.body_ns > s.issued_ns ? s.t.body_ns - s.issued_ns : 0);
    ++out.ops;
    if (ops_.op != "list") out.objects += s.count;
    if (ops_.op == "put") out.bytes += pattern_.size();
    if (ops_.op == "get") out.bytes += s.t.got;
    if (ops_.op != "list") return "";
    const auto [names, token] = s.endpoint->objects()->listed(s.body);
    out.listed += names;
    return token;
  }

  const ObjectOps& ops_;
  const Asking asking_;
  const std::string ca_bundle_;
  CURLM* multi_ = nullptr;
  std::vector<OpSlot> slots_;
  Backoffs<OpSlot> backing_off_;  // --retries
  std::vector<char> pattern_;     // put: every object's body
  IoRequest placeholder_;         // what marks a slot in flight (its Transfer's request)
  bool asked_ = false;            // a request was started in this round of the loop
  unsigned step_ = 1;             // names a request takes (a batch of deletes: ops.batch)
  uint64_t connections_ = 0, retries_ = 0;
};

}  // namespace

ObjectOpsResult run_object_ops(const ObjectOps& ops) {
  if (ops.names.empty()) return {};
  return ObjectOpsRun(ops).run();
}

const EngineInfo kCurlEngine = {
    "curl",
    "ranged reads over HTTP(S) and S3 (GET) and FTP (REST + RETR), and writes of S3 objects (whole: a PUT, or an "
    "upload in parts), WebDAV ones (a PUT) and FTP files (a STOR), through libcurl, --qd in flight per thread",
    kCurlCan,
    [](const Target& target, unsigned depth, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<CurlEngine>(target, depth, asking_from(options));
    },
    [] { return std::string(); },
    kCurlOptions,
    remote::schemes};

}  // namespace gds

#else

namespace gds {
const EngineInfo kCurlEngine = {
    "curl",
    "ranged reads over HTTP(S) and S3 (GET) and FTP (REST + RETR), and writes of S3 objects (whole: a PUT, or an "
    "upload in parts), WebDAV ones (a PUT) and FTP files (a STOR), through libcurl, --qd in flight per thread",
    kCurlCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError("--engine curl: this gdsbench was built without libcurl");
    },
    [] { return std::string("built without libcurl (apt-get install libcurl4-openssl-dev, then rebuild)"); },
    kCurlOptions,
    remote::schemes};

ObjectOpsResult run_object_ops(const ObjectOps&) {
  throw InputError("object operations: this gdsbench was built without libcurl");
}
}  // namespace gds

#endif
