// curl: ranged GETs of an object over HTTP(S) or S3, through libcurl's multi
// interface. Each worker thread drives one curl_multi with up to `depth` GETs
// in flight, each on an easy handle that keeps its connection alive between
// requests (fio's engines/http.c does one request at a time per job). S3
// requests are signed by libcurl (CURLOPT_AWS_SIGV4) with the credentials and
// endpoint the AWS tools and kvikio read from the environment:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_DEFAULT_REGION (or AWS_REGION), AWS_ENDPOINT_URL (path-style) and
// AWS_CA_BUNDLE (a private CA's certificates, for https).
//
// A ranged answer counts as 206 or 200 with a Content-Range naming the range
// asked (rclone answers 200 so); a 200 without one means the server ignored
// Range, and a 206 naming another range (or none) is the server's fault: both
// errors, their data never taken. A redirect is not followed: its error says
// where it points. Every body's length is checked: a short one is an error too,
// as is a request that takes longer than --timeout. A failure of the connection
// or of the server (HTTP 429, 5xx) is tried again up to --retries times, after a
// backoff (100 ms, doubling, at most 2 s), counted apart; nothing else is retried. Opening the engine asks for
// the object once (HEAD): a missing object, refused credentials or a server
// that does not answer fail there, before the run, in one line.
#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kCurlCan = {Opens::kUrl, /*supports_direct=*/false, /*max_depth=*/1024, kReadOnly,
                                   /*gpu_buffers=*/false};
constexpr uint64_t kSecond = 1000000000ull;
const std::vector<EngineOption> kCurlOptions = {
    {"http2", "bool", "ask for HTTP/2 (ALPN over https, Upgrade over http) instead of HTTP/1.1 (curl)", 0, 0, 1,
     /*at_most_depth=*/false},
    {"timeout_ns", "duration",
     "longest a request may take, connecting included, before the run fails naming it (curl; 0: no limit)",
     30 * kSecond, 0, 86400 * kSecond, /*at_most_depth=*/false},
    {"retries", "int",
     "try a request again this many times after a transport failure, a timeout or HTTP 429/5xx (curl; counted "
     "apart, as retries; 0: a failure ends the run)",
     0, 0, 100, /*at_most_depth=*/false}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBCURL
#include <curl/curl.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "../clock.hpp"

namespace gds {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Where an object is and how to ask for it.
struct Remote {
  std::string name;                   // as the user gave it (named in errors)
  std::string url;                    // what is requested
  std::string sigv4, userpwd, token;  // S3 only
  std::string ca_bundle;              // AWS_CA_BUNDLE, as the AWS tools read it: a private CA's certificates
};

// How the engine asks: its options.
struct Asking {
  bool http2 = false;
  uint64_t timeout_ns = 0;  // 0: no limit
  unsigned retries = 0;
};

std::string escape_key(const std::string& key) {
  std::string out;
  size_t at = 0;
  while (at <= key.size()) {  // every path segment escaped, the slashes kept
    size_t slash = key.find('/', at);
    if (slash == std::string::npos) slash = key.size();
    char* e = curl_easy_escape(nullptr, key.data() + at, int(slash - at));
    out += e;
    curl_free(e);
    if (slash < key.size()) out += '/';
    at = slash + 1;
  }
  return out;
}

Remote resolve(const std::string& name) {
  Remote r{name, name, "", "", "", env("AWS_CA_BUNDLE")};
  if (name.rfind("s3://", 0) != 0) return r;
  const std::string rest = name.substr(5);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size())
    throw InputError("PATH " + name + ": an S3 target is s3://BUCKET/KEY");
  const std::string bucket = rest.substr(0, slash), key = escape_key(rest.substr(slash + 1));
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  r.url = endpoint.empty() ? "https://" + bucket + ".s3." + region + ".amazonaws.com/" + key
                           : endpoint + "/" + bucket + "/" + key;  // a custom endpoint: path-style
  const std::string id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (id.empty() || secret.empty())  // (gdsbench.system.object_store hands down what boto3 finds elsewhere)
    throw InputError("PATH " + name +
                     ": no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
                     "~/.aws/credentials (read through boto3: pip install 'gdsbench[s3]')");
  r.sigv4 = "aws:amz:" + region + ":s3";
  r.userpwd = id + ":" + secret;
  r.token = env("AWS_SESSION_TOKEN");
  return r;
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
  bool range_matches = false;  // a Content-Range naming the range asked
  bool wrong_range = false;    // 206 without the Content-Range asked: another range's data
  std::string content_range;   // the answer's Content-Range, as sent (for the message)
  bool too_long = false;
  bool ignores_range = false;  // 200 without the Content-Range asked: the whole object is coming
  std::string error_body;      // the start of an error answer (S3's <Code>)
  std::string mark;            // x-amz-meta-gdsbench-prepared: an object gdsbench made (gdsbench.system.object_store)
  char error[CURL_ERROR_SIZE] = {};
};

constexpr char kMarkHeader[] = "x-amz-meta-gdsbench-prepared:";

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect or 100-continue): start over
    t->range_matches = false;
    t->content_range.clear();
  } else if (strncasecmp(line.c_str(), kMarkHeader, sizeof kMarkHeader - 1) == 0) {
    t->mark = line.substr(sizeof kMarkHeader - 1);
    while (!t->mark.empty() && (t->mark.back() == '\r' || t->mark.back() == '\n')) t->mark.pop_back();
    t->mark.erase(0, t->mark.find_first_not_of(' '));
  } else if (t->request && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
    t->content_range = line.substr(14, 100);
    while (!t->content_range.empty() && std::isspace(static_cast<unsigned char>(t->content_range.back())))
      t->content_range.pop_back();
    t->content_range.erase(0, t->content_range.find_first_not_of(' '));
    unsigned long long first = 0, last = 0;
    const IoRequest& r = *t->request;
    if (std::sscanf(line.c_str() + 14, " bytes %llu-%llu", &first, &last) == 2)
      t->range_matches = first == r.offset && last >= first && last < r.offset + r.length;
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300) {  // an error's body: keep its start for the message
    t->error_body.append(data, std::min(bytes, size_t(2048) - std::min(size_t(2048), t->error_body.size())));
    return bytes;
  }
  if (status == 200 && !t->range_matches) {
    t->ignores_range = true;
    return 0;  // aborts the transfer: do not read the whole object
  }
  if (status == 206 && !t->range_matches) {
    t->wrong_range = true;
    return 0;  // aborts the transfer: another range's bytes are not the ones asked
  }
  if (!t->request || t->got + bytes > t->request->length) {
    t->too_long = true;
    return 0;  // aborts the transfer: the server sent more than was asked
  }
  if (!t->body_ns) t->body_ns = now_ns();  // the answer's first body byte: its time to first byte ends here
  std::memcpy(t->request->buf + t->got, data, bytes);
  t->got += bytes;
  return bytes;
}

std::string s3_code(const std::string& body) {
  const size_t a = body.find("<Code>"), b = body.find("</Code>");
  return a != std::string::npos && b != std::string::npos && b > a ? body.substr(a + 6, b - a - 6) : "";
}

// An error answer in words: its status, S3's code (once), and what to do. `signed`: an S3 request,
// whose 403 is about its credentials; `location`: where a redirect points (not followed).
std::string http_failure(long status, const std::string& body, bool is_signed, const char* location) {
  const std::string code = s3_code(body);
  std::string why;
  if (status >= 300 && status < 400)
    why = "the server redirects to " + std::string(location && *location ? location : "an address it does not give") +
          (is_signed ? "; gdsbench does not follow redirects: the bucket is in another region or endpoint, set "
                       "AWS_REGION or --s3-endpoint"
                     : "; gdsbench does not follow redirects: read that URL instead");
  else if (status == 403)
    why = is_signed ? "the server refused the request: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the "
                      "object's permissions)"
                    : "the server refused the request (the object's permissions, or the server's access rules)";
  else
    why = status == 404   ? "no such object (or bucket)"
          : status == 416 ? "the range is past the object's end"
          : status < 500  ? "the server refused the request"
                          : "the server failed the request";
  const bool named = !code.empty() && code != std::to_string(status);
  return "HTTP " + std::to_string(status) + (named ? " " + code : "") + ": " + why;
}

// Where a URL's server is, for messages: scheme://host[:port].
std::string server_of(const std::string& url) {
  const size_t host = url.find("://");
  return url.substr(0, url.find('/', host == std::string::npos ? 0 : host + 3));
}

constexpr long kReceiveBuffer = 512 * 1024;

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

// Failures worth another try (--retries): the connection's or the server's, not the request's.
bool may_retry(CURLcode rc, long status) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return rc == CURLE_OK && (status == 429 || status == 500 || status == 502 || status == 503 || status == 504);
  }
}

void set_common(CURL* easy, const Remote& remote, const Asking& asking, Transfer* t) {
  curl_easy_setopt(easy, CURLOPT_URL, remote.url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  const long timeout_ms = long((asking.timeout_ns + 999999) / 1000000);  // rounded up: 0 means no limit to libcurl
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms ? std::min(timeout_ms, 10000L) : 10000L);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);  // 0: none
  if (!remote.ca_bundle.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, remote.ca_bundle.c_str());
  // libcurl's receive buffer (16 KiB unless asked): a larger one takes a large body in fewer reads and
  // callbacks (curl's own CLI asks for 100 KiB)
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, kReceiveBuffer);
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, long(asking.http2 ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
  if (!remote.sigv4.empty()) {
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, remote.sigv4.c_str());
    curl_easy_setopt(easy, CURLOPT_USERPWD, remote.userpwd.c_str());
    // S3 wants the payload's hash signed; a GET has none (the SHA-256 of nothing)
    t->headers = curl_slist_append(
        t->headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    if (!remote.token.empty())
      t->headers = curl_slist_append(t->headers, ("x-amz-security-token: " + remote.token).c_str());
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers);
  }
}

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

class CurlEngine final : public Engine {
 public:
  CurlEngine(const Target& target, unsigned depth, const Asking& asking)
      : remote_(resolve(target.path)), asking_(asking) {
    init_once();
    probe();
    multi_ = curl_multi_init();
    transfers_.resize(depth);
    for (auto& t : transfers_) {
      t.easy = curl_easy_init();
      set_common(t.easy, remote_, asking_, &t);
      idle_.push_back(&t);
    }
  }
  ~CurlEngine() override {
    for (auto& t : transfers_) {
      if (t.request) curl_multi_remove_handle(multi_, t.easy);
      curl_easy_cleanup(t.easy);
      curl_slist_free_all(t.headers);
    }
    if (multi_) curl_multi_cleanup(multi_);
  }
  uint64_t size() const override { return size_; }
  uint64_t connections() const override { return connections_; }
  uint64_t retries() const override { return retries_; }
  // The next object on the kept connections, unlooked at (its size unknown): an S3 object after
  // an S3 object, an HTTP one after an HTTP one (the signing differs).
  bool retarget(const Target& target) override {
    Remote next = resolve(target.path);
    if (next.sigv4 != remote_.sigv4 || next.ca_bundle != remote_.ca_bundle) return false;
    remote_ = std::move(next);
    size_ = UINT64_MAX;
    facts_["url"] = remote_.url;
    return true;
  }
  std::map<std::string, std::string> describe() const override { return facts_; }

  void queue(IoRequest* r) override {
    Transfer* t = idle_.back();
    idle_.pop_back();
    t->request = r;
    t->attempts = 0;
    t->issued_ns = r->submit_ns ? r->submit_ns : now_ns();  // the loop stamps its requests; a lone read may not
    start(*t);
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    unsigned n = 0;
    for (;;) {
      start_due();
      int running = 0;
      CURLMcode mc = curl_multi_perform(multi_, &running);
      if (mc != CURLM_OK)
        throw IoError(std::string("libcurl: ") + curl_multi_strerror(mc) + " reading " + remote_.name);
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
      curl_multi_poll(multi_, nullptr, 0, poll_ms(), nullptr);
    }
  }

 private:
  // Whether the object answers, and its size, before anything is measured.
  void probe() {
    Transfer t;
    t.easy = curl_easy_init();
    set_common(t.easy, remote_, asking_, &t);
    curl_easy_setopt(t.easy, CURLOPT_NOBODY, 1L);
    CURLcode rc;
    long status = 0, version = 0;
    unsigned tries = 1;
    for (;; ++tries) {  // as a request of the run is tried again (--retries)
      t.error[0] = 0;
      t.error_body.clear();
      rc = curl_easy_perform(t.easy);
      curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
      if (tries > asking_.retries || !may_retry(rc, status)) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(backoff_ns(tries)));
    }
    curl_off_t length = -1;
    char *ip = nullptr, *location = nullptr;
    curl_easy_getinfo(t.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    curl_easy_getinfo(t.easy, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(t.easy, CURLINFO_PRIMARY_IP, &ip);
    curl_easy_getinfo(t.easy, CURLINFO_REDIRECT_URL, &location);
    const std::string server_ip = ip ? ip : "";
    const std::string asked = " (HEAD, " + std::to_string(tries) + (tries == 1 ? " try)" : " tries)");
    const std::string error = rc != CURLE_OK ? transport_failure(rc, t.error, asking_)
                                             : http_failure(status, t.error_body, !remote_.sigv4.empty(), location);
    curl_easy_cleanup(t.easy);  // (location, ip: the handle's own, read above)
    curl_slist_free_all(t.headers);
    if (rc != CURLE_OK || status != 200) throw InputError("PATH " + remote_.name + ": " + error + asked);
    if (length < 0) throw InputError("PATH " + remote_.name + ": the server gives no Content-Length for it");
    size_ = uint64_t(length);
    const bool granted = version == CURL_HTTP_VERSION_2_0;
    facts_ = {{"url", remote_.url},
              {"protocol", remote_.sigv4.empty() ? "http" : "s3"},
              {"http_version", granted         ? "HTTP/2"
                               : asking_.http2 ? "HTTP/1.1 (--http2 asked, not granted by the server)"
                                               : "HTTP/1.1"},
              {"server_ip", server_ip},
              {"libcurl", curl_version_info(CURLVERSION_NOW)->version}};
    if (!t.mark.empty()) facts_["gdsbench_mark"] = t.mark;
  }

  // Transfers whose backoff is over, started again.
  void start_due() {
    const uint64_t now = now_ns();
    for (size_t i = 0; i < backing_off_.size();) {
      if (backing_off_[i].first <= now) {
        Transfer* t = backing_off_[i].second;
        backing_off_.erase(backing_off_.begin() + long(i));
        start(*t);
      } else {
        ++i;
      }
    }
  }
  // How long reap may wait for libcurl: 100 ms, or until the next backoff ends.
  int poll_ms() const {
    uint64_t wait = 100;
    const uint64_t now = now_ns();
    for (const auto& [due, t] : backing_off_)
      wait = std::min<uint64_t>(wait, due > now ? (due - now) / 1000000 + 1 : 0);
    return int(wait);
  }

  // (Re)start t's request: a ranged GET of its bytes.
  void start(Transfer& t) {
    const IoRequest& r = *t.request;
    ++t.attempts;
    t.got = 0;
    t.body_ns = 0;  // each try's own: only the try that counts gives the first byte (a 503's body is no data)
    t.range_matches = t.too_long = t.ignores_range = false;
    t.error_body.clear();
    t.error[0] = 0;
    const std::string range = std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1);
    curl_easy_setopt(t.easy, CURLOPT_URL, remote_.url.c_str());  // copied by libcurl, as is the range
    curl_easy_setopt(t.easy, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
    curl_multi_add_handle(multi_, t.easy);
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
    const bool ranged_ok = !t.ignores_range && !(status == 200 && !t.range_matches) && !t.too_long && !t.wrong_range;
    if (ranged_ok && (rc != CURLE_OK || status >= 300) && may_retry(rc, status) && t.attempts <= asking_.retries) {
      ++retries_;
      backing_off_.emplace_back(now_ns() + backoff_ns(t.attempts), &t);  // started again by reap once due
      return nullptr;
    }
    t.request = nullptr;
    idle_.push_back(&t);
    const std::string where = " reading " + std::to_string(r->length) + " bytes at offset " +
                              std::to_string(r->offset) + " of " + remote_.name +
                              (t.attempts > 1 ? " (try " + std::to_string(t.attempts) + ")" : "");
    if (t.wrong_range)
      throw IoError("the server at " + server_of(remote_.url) + " answered another range than asked (Content-Range: " +
                    (t.content_range.empty() ? "none" : t.content_range) + ", for bytes " + std::to_string(r->offset) +
                    "-" + std::to_string(r->offset + r->length - 1) + "): a fault of the server, its data not taken" +
                    where);
    if (t.ignores_range || (status == 200 && !t.range_matches))
      throw IoError("the server ignores Range: it answered 200 without the Content-Range asked" + where);
    if (t.too_long) throw IoError("the server sent more than the range asked" + where);
    if (rc != CURLE_OK) throw IoError(transport_failure(rc, t.error, asking_) + where);
    if (status >= 300) {
      char* location = nullptr;
      curl_easy_getinfo(t.easy, CURLINFO_REDIRECT_URL, &location);
      throw IoError(http_failure(status, t.error_body, !remote_.sigv4.empty(), location) + where);
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

  Remote remote_;
  const Asking asking_;
  CURLM* multi_ = nullptr;
  std::vector<Transfer> transfers_;
  std::vector<Transfer*> idle_;
  uint64_t size_ = 0, connections_ = 0, retries_ = 0;
  std::vector<std::pair<uint64_t, Transfer*>> backing_off_;  // (when to start again, transfer): --retries
  std::map<std::string, std::string> facts_;
};

}  // namespace

const EngineInfo kCurlEngine = {
    "curl",
    "ranged GETs over HTTP(S) and S3 through libcurl, --qd in flight per thread",
    kCurlCan,
    [](const Target& target, unsigned depth, const OptionValues& options) -> std::unique_ptr<Engine> {
      const Asking asking{kCurlEngine.option(options, "http2") != 0, kCurlEngine.option(options, "timeout_ns"),
                          unsigned(kCurlEngine.option(options, "retries"))};
      return std::make_unique<CurlEngine>(target, depth, asking);
    },
    [] { return std::string(); },
    kCurlOptions};

}  // namespace gds

#else

namespace gds {
const EngineInfo kCurlEngine = {
    "curl",
    "ranged GETs over HTTP(S) and S3 through libcurl, --qd in flight per thread",
    kCurlCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError("--engine curl: this gdsbench was built without libcurl");
    },
    [] { return std::string("built without libcurl (apt-get install libcurl4-openssl-dev, then rebuild)"); },
    kCurlOptions};
}  // namespace gds

#endif
