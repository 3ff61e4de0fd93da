// S3: s3://BUCKET/KEY, asked of the endpoint and signed (SigV4, by libcurl) with the credentials
// the AWS tools and kvikio read from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_DEFAULT_REGION (or AWS_REGION) and AWS_ENDPOINT_URL_S3 (or
// AWS_ENDPOINT_URL; path-style). Its answers are HTTP's; a 403 or a redirect is about its
// credentials or region.
#include <cstdlib>

#include "../../error.hpp"
#include "protocol.hpp"

namespace gds::remote {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A key as a URL path: every segment percent-escaped (all but A-Z a-z 0-9 - . _ ~), the slashes kept.
std::string escape_key(const std::string& key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : key) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~' || c == '/') {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class S3Endpoint final : public Endpoint {
 public:
  S3Endpoint(const std::string& name, const std::string& url, Signing signing)
      : Endpoint(name, url), signing_(std::move(signing)) {}
  const char* protocol() const override { return "s3"; }
  Signing signing() const override { return signing_; }

 protected:
  std::string why(long status, const std::string& location) const override {
    if (status >= 300 && status < 400)
      return "the server redirects to " + (location.empty() ? std::string("an address it does not give") : location) +
             "; gdsbench does not follow redirects: the bucket is in another region or endpoint, set AWS_REGION or "
             "--s3-endpoint";
    if (status == 403)
      return "the server refused the request: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the object's "
             "permissions)";
    return Endpoint::why(status, location);
  }

 private:
  const Signing signing_;
};

std::unique_ptr<Endpoint> s3_endpoint(const std::string& name) {
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
  const std::string url = endpoint.empty() ? "https://" + bucket + ".s3." + region + ".amazonaws.com/" + key
                                           : endpoint + "/" + bucket + "/" + key;  // a custom endpoint: path-style
  const std::string id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (id.empty() || secret.empty())  // (gdsbench.system.object_store hands down what boto3 finds elsewhere)
    throw InputError("PATH " + name +
                     ": no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
                     "~/.aws/credentials (read through boto3: pip install 'gdsbench[s3]')");
  // S3 wants the payload's hash signed; a GET has none (the SHA-256 of nothing)
  Signing signing{"aws:amz:" + region + ":s3",
                  id + ":" + secret,
                  {"x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}};
  const std::string token = env("AWS_SESSION_TOKEN");
  if (!token.empty()) signing.headers.push_back("x-amz-security-token: " + token);
  return std::make_unique<S3Endpoint>(name, url, std::move(signing));
}

}  // namespace

extern const Protocol kS3 = {"s3", {"s3://"}, s3_endpoint};

}  // namespace gds::remote
