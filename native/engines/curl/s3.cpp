// S3: s3://BUCKET/KEY, asked of the endpoint and signed (SigV4, by libcurl) with the credentials
// the AWS tools and kvikio read from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_DEFAULT_REGION (or AWS_REGION) and AWS_ENDPOINT_URL_S3 (or
// AWS_ENDPOINT_URL; path-style). Its answers are HTTP's; a 403 or a redirect is about its
// credentials or region.
//
// Writes (--rw write into an object gdsbench made) go whole, as S3 writes: one PUT where a write
// is the whole object, else a multipart upload with a part per write, completed once every part
// is in; the object's mark is carried over. Their bodies are sent unsigned (UNSIGNED-PAYLOAD, as
// the AWS SDKs do over TLS): hashing every part first would time SHA-256, not the storage.
#include <cstdlib>
#ifdef GDSBENCH_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

#include "../../error.hpp"
#include "protocol.hpp"

namespace gds::remote {
namespace {

std::string bucket_of(const std::string& name) {  // s3://BUCKET/KEY -> BUCKET
  const std::string rest = name.substr(5);
  return rest.substr(0, rest.find('/'));
}

// A key as XML text: its markup characters escaped.
std::string xml_text(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

// The Content-MD5 header's value: the body's MD5, in base64 (OpenSSL's libcrypto, as libcurl's own TLS).
std::string content_md5(const std::string& body) {
#ifdef GDSBENCH_HAVE_OPENSSL
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(body.data(), body.size(), digest, &length, EVP_md5(), nullptr);
  unsigned char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(encoded, digest, int(length));
  return std::string(reinterpret_cast<char*>(encoded), size_t(n));
#else
  (void)body;
  throw InputError(
      "--batch: S3's DeleteObjects needs the body's MD5, and this gdsbench was built without OpenSSL's "
      "libcrypto (apt-get install libssl-dev, then rebuild); leave --batch out");
#endif
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A key as a URL path: every segment percent-escaped (all but A-Z a-z 0-9 - . _ ~), the slashes
// kept; or, as a query's value (slashes = false), the slashes escaped too, as SigV4 signs a query.
std::string escape_key(const std::string& key, bool slashes = true) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : key) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~' || (c == '/' && slashes)) {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

constexpr char kEmptyHash[] = "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class S3Endpoint final : public Endpoint, public Uploads, public Objects {
 public:
  // bucket_url: the bucket's own URL (listings are asked of it); key: the object's, unescaped
  S3Endpoint(const std::string& name, const std::string& url, std::string bucket_url, std::string key, Signing signing)
      : Endpoint(name, url), bucket_url_(std::move(bucket_url)), key_(std::move(key)), signing_(std::move(signing)) {}
  const char* protocol() const override { return "s3"; }
  Signing signing() const override { return signing_; }
  const Uploads* uploads() const override { return this; }
  const Objects* objects() const override { return this; }

  Ask create(const std::string& mark) const override { return {"PUT", url, headers(mark, kAbsent), ""}; }
  Ask remove() const override { return {"DELETE", url, headers(""), ""}; }
  Ask remove_batch(const std::vector<std::string>& names) const override {
    const std::string bucket = "s3://" + bucket_of(name) + "/";
    std::string body = "<Delete><Quiet>true</Quiet>";
    for (const std::string& n : names) {
      if (n.rfind(bucket, 0) != 0 || n.size() == bucket.size())
        throw InputError("PATH " + n + ": a batch of deletes names objects of one bucket (" + bucket + ")");
      body += "<Object><Key>" + xml_text(n.substr(bucket.size())) + "</Key></Object>";
    }
    body += "</Delete>";
    std::vector<std::string> h = headers("");
    h.push_back("Content-MD5: " + content_md5(body));  // S3 asks it of every DeleteObjects
    h.push_back("Content-Type: application/xml");
    return {"POST", bucket_url_ + "?delete=", h, body};  // ("delete=": as "uploads=" above)
  }
  std::string batch_error(const std::string& answer) const override {
    const size_t at = answer.find("<Error>");
    if (at == std::string::npos) return error_in(answer);
    const std::string error = answer.substr(at);
    return "could not remove " + xml_element(error, "Key") + " (" + xml_element(error, "Code") + ": " +
           xml_element(error, "Message") + ")";
  }
  // ListObjectsV2, its query in the order SigV4 signs it (sorted), every value escaped
  Ask list(const std::string& token) const override {
    const std::string next = token.empty() ? "" : "continuation-token=" + escape_key(token, false) + "&";
    return {"GET", bucket_url_ + "?" + next + "list-type=2&max-keys=1000&prefix=" + escape_key(key_, false),
            headers(""), ""};
  }
  std::pair<uint64_t, std::string> listed(const std::string& answer) const override {
    uint64_t names = 0;
    for (size_t at = 0; (at = answer.find("<Key>", at)) != std::string::npos; at += 5) ++names;
    if (xml_element(answer, "IsTruncated") != "true") return {names, ""};
    const std::string next = xml_element(answer, "NextContinuationToken");
    if (next.empty())  // a listing cut short with no way on: never counted as whole
      throw IoError("listing " + name + ": the server says there is more, and names no token to go on with");
    return {names, next};
  }

  Ask whole(const std::string& mark, const std::string& version) const override {
    return {"PUT", url, headers(mark, version), ""};
  }
  // "uploads=", not S3's documented "uploads": libcurl 7.88 signs a query word without "=" wrongly
  Ask begin(const std::string& mark) const override { return {"POST", url + "?uploads=", headers(mark), ""}; }
  std::string upload_id(const std::string& answer) const override { return xml_element(answer, "UploadId"); }
  Ask part(const std::string& upload, unsigned number) const override {
    return {"PUT", url + "?partNumber=" + std::to_string(number) + "&uploadId=" + escape_key(upload), headers(""), ""};
  }
  Ask complete(const std::string& upload, const std::vector<std::string>& etags,
               const std::string& version) const override {
    std::string list = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags.size(); ++i)
      list += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] + "</ETag></Part>";
    return {"POST", url + "?uploadId=" + escape_key(upload), headers("", version), list + "</CompleteMultipartUpload>"};
  }
  Ask abort(const std::string& upload) const override {
    return {"DELETE", url + "?uploadId=" + escape_key(upload), headers(""), ""};
  }
  std::string completed_version(const std::string& answer) const override {
    std::string etag = xml_element(answer, "ETag");  // its quotes as XML escapes them: &quot; or &#34; (Go's)
    for (const std::string escaped : {"&quot;", "&#34;"})
      for (size_t at; (at = etag.find(escaped)) != std::string::npos;) etag.replace(at, escaped.size(), "\"");
    return etag;
  }
  std::string error_in(const std::string& answer) const override {
    if (answer.find("<Error>") == std::string::npos) return "";
    const std::string code = xml_element(answer, "Code"), message = xml_element(answer, "Message");
    return (code.empty() ? std::string("an error") : code) + (message.empty() ? "" : ": " + message);
  }

 protected:
  std::string why(long status, const std::string& location) const override {
    if (status >= 300 && status < 400)
      return "the server redirects to " + (location.empty() ? std::string("an address it does not give") : location) +
             "; gdsbench does not follow redirects: the bucket is in another region or endpoint, set AWS_REGION or "
             "--s3-endpoint";
    if (status == 403)
      return "the server refused the request: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the object's "
             "permissions)";
    if (status == 412)
      return "the object changed after this run looked at it (another writer replaced it, or put one where this run "
             "creates one): gdsbench leaves it as they made it";
    return Endpoint::why(status, location);
  }

 private:
  // A write's headers: the signing's, its body unsigned, the mark where one is carried, and the
  // version it may replace where one is known (kAbsent: none may be there).
  std::vector<std::string> headers(const std::string& mark, const std::string& version = "") const {
    std::vector<std::string> out;
    for (const auto& h : signing_.headers)
      if (h != kEmptyHash) out.push_back(h);
    out.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!mark.empty()) out.push_back("x-amz-meta-gdsbench-prepared: " + mark);
    add_condition(out, version);
    return out;
  }

  const std::string bucket_url_, key_;
  const Signing signing_;
};

std::unique_ptr<Endpoint> s3_endpoint(const std::string& name) {
  const std::string rest = name.substr(5);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size())
    throw InputError("PATH " + name + ": an S3 target is s3://BUCKET/KEY");
  const std::string bucket = rest.substr(0, slash), raw_key = rest.substr(slash + 1), key = escape_key(raw_key);
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const std::string bucket_url = endpoint.empty() ? "https://" + bucket + ".s3." + region + ".amazonaws.com/"
                                                  : endpoint + "/" + bucket;  // a custom endpoint: path-style
  const std::string url = endpoint.empty() ? bucket_url + key : bucket_url + "/" + key;
  const std::string id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (id.empty() || secret.empty())  // (gdsbench.system.object_store hands down what boto3 finds elsewhere)
    throw InputError("PATH " + name +
                     ": no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
                     "~/.aws/credentials (read through boto3: pip install 'gdsbench[s3]')");
  // S3 wants the payload's hash signed; a GET has none (the SHA-256 of nothing)
  Signing signing{"aws:amz:" + region + ":s3", id + ":" + secret, {kEmptyHash}};
  const std::string token = env("AWS_SESSION_TOKEN");
  if (!token.empty()) signing.headers.push_back("x-amz-security-token: " + token);
  return std::make_unique<S3Endpoint>(name, url, bucket_url, raw_key, std::move(signing));
}

}  // namespace

extern const Protocol kS3 = {"s3", {"s3://"}, s3_endpoint};

}  // namespace gds::remote
