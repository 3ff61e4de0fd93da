// HTTP(S): an object named by its URL, asked for as it is, unsigned. Also plain HTTP's rules,
// which every protocol here keeps where it does not say otherwise (protocol.hpp's Endpoint):
//
// A ranged answer counts as 206 or 200 with a Content-Range naming the range asked (rclone
// answers 200 so); a 200 without one means the server ignored Range, and a 206 naming another
// range (or none) is the server's fault: both errors, their data never taken. A redirect is not
// followed: its error says where it points. HTTP 429 and 5xx may be tried again (--retries).
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "../../error.hpp"
#include "protocol.hpp"

namespace gds::remote {
namespace {

constexpr char kMarkHeader[] = "x-amz-meta-gdsbench-prepared:";

// A header's value: after its name and the spaces that follow, without the line's end.
std::string header_value(const std::string& line, size_t name_length) {
  std::string value = line.substr(name_length, 200);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  value.erase(0, value.find_first_not_of(' '));
  return value;
}

// Where a URL's server is, for messages: scheme://host[:port].
std::string server_of(const std::string& url) {
  const size_t host = url.find("://");
  return url.substr(0, url.find('/', host == std::string::npos ? 0 : host + 3));
}

// WebDAV's writes (nginx's dav_methods PUT, SeaweedFS's filer): an object is PUT whole, replacing
// only the version looked at where the server checks conditions; there is no upload in parts, and
// no mark kept.
class HttpEndpoint final : public Endpoint, public WholeUploads {
 public:
  using Endpoint::Endpoint;
  const char* protocol() const override { return "http"; }
  const Uploads* uploads() const override { return this; }

  Ask whole(const std::string&, const std::string& version) const override {
    std::vector<std::string> headers;
    add_condition(headers, version);
    return {"PUT", url, headers, ""};
  }

 private:
  InputError whole_only() const override {
    return InputError("PATH " + name + ": an HTTP object is written whole, in one PUT: give --bs its size");
  }
};

}  // namespace

std::string xml_element(const std::string& xml, const std::string& name) {
  const size_t a = xml.find("<" + name + ">"), b = xml.find("</" + name + ">");
  return a != std::string::npos && b != std::string::npos && b > a
             ? xml.substr(a + name.size() + 2, b - a - name.size() - 2)
             : "";
}

void add_condition(std::vector<std::string>& headers, const std::string& version) {
  if (version == kAbsent)
    headers.push_back("If-None-Match: *");
  else if (!version.empty())
    headers.push_back("If-Match: " + version);
}

std::string Endpoint::range(uint64_t offset, uint32_t length) const {
  return std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

uint64_t Endpoint::size_of(int64_t content_length) const {
  if (content_length < 0) throw InputError("PATH " + name + ": the server gives no Content-Length for it");
  return uint64_t(content_length);
}

void Endpoint::on_header(Answer& a, const std::string& line) const {
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect or 100-continue): start over
    a.range_matches = false;
    a.content_range.clear();
  } else if (strncasecmp(line.c_str(), kMarkHeader, sizeof kMarkHeader - 1) == 0) {
    a.mark = header_value(line, sizeof kMarkHeader - 1);
  } else if (strncasecmp(line.c_str(), "etag:", 5) == 0) {
    a.etag = header_value(line, 5);
  } else if (!a.asked && strncasecmp(line.c_str(), "server:", 7) == 0) {  // the probe's answer only
    a.server = header_value(line, 7);
  } else if (a.asked && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
    a.content_range = header_value(line, 14);
    unsigned long long first = 0, last = 0;
    const IoRequest& r = *a.asked;
    if (std::sscanf(line.c_str() + 14, " bytes %llu-%llu", &first, &last) == 2)
      a.range_matches = first == r.offset && last >= first && last < r.offset + r.length;
  }
}

Body Endpoint::on_body(Answer& a, long status, const char* data, size_t bytes) const {
  if (status >= 300) {  // an error's body: keep its start for the message
    a.error_body.append(data, std::min(bytes, size_t(2048) - std::min(size_t(2048), a.error_body.size())));
    return Body::kNotData;
  }
  if (status == 200 && !a.range_matches) {
    a.ignores_range = true;
    return Body::kRefused;  // do not read the whole object
  }
  if (status == 206 && !a.range_matches) {
    a.wrong_range = true;
    return Body::kRefused;  // another range's bytes are not the ones asked
  }
  return Body::kData;
}

std::string Endpoint::wrong_range(const Answer& a, long status) const {
  if (a.wrong_range) {
    const IoRequest& r = *a.asked;
    return "the server at " + server_of(url) + " answered another range than asked (Content-Range: " +
           (a.content_range.empty() ? "none" : a.content_range) + ", for bytes " + std::to_string(r.offset) + "-" +
           std::to_string(r.offset + r.length - 1) + "): a fault of the server, its data not taken";
  }
  if (a.ignores_range || (status == 200 && !a.range_matches))
    return "the server ignores Range: it answered 200 without the Content-Range asked";
  return "";
}

std::string Endpoint::refusal(const Answer& a, long status, const std::string& location) const {
  if (a.asked ? status < 300 : status == 200) return "";
  const std::string code = xml_element(a.error_body, "Code");  // S3's, and the servers that speak its dialect
  const bool named = !code.empty() && code != std::to_string(status);
  return "HTTP " + std::to_string(status) + (named ? " " + code : "") + ": " + why(status, location);
}

std::string Endpoint::why(long status, const std::string& location) const {
  if (status >= 300 && status < 400)
    return "the server redirects to " + (location.empty() ? std::string("an address it does not give") : location) +
           "; gdsbench does not follow redirects: read that URL instead";
  if (status == 403) return "the server refused the request (the object's permissions, or the server's access rules)";
  return status == 404   ? "no such object (or bucket)"
         : status == 416 ? "the range is past the object's end"
         : status < 500  ? "the server refused the request"
                         : "the server failed the request";
}

bool Endpoint::may_retry(long status) const {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

extern const Protocol kHttp = {
    "http", {"http://", "https://"}, [](const std::string& name) -> std::unique_ptr<Endpoint> {
      return std::make_unique<HttpEndpoint>(name, name);
    }};

}  // namespace gds::remote
