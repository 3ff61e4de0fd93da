// FTP: ftp://[USER@]HOST[:PORT]/PATH, a file on an FTP server (vsftpd, ProFTPD, a NAS's), read as
// curl reads it: a range is REST (its offset) and RETR, the data connection closed once the range's
// bytes came; passive mode (EPSV, then PASV). ftps:// is FTP over TLS from the first byte (implicit
// FTPS, port 990 unless named), as libcurl reads that scheme, control and data connections alike; a
// private CA's certificate is taken from AWS_CA_BUNDLE, as for https. The login: the user the URL names (anonymous
// where none) with its password from ~/.netrc, as `curl --netrc-optional` takes it; a password in the URL is refused,
// as it would be written into the results with the path.
//
// Writes: a file is stored whole (STOR, as `curl -T` sends it), by one writer, into a file gdsbench
// made (its Python checks the pattern first). The server writes it in place as the bytes come: a
// reader meanwhile sees part of it, and a transfer cut short leaves it cut short (no version is
// kept, unlike S3's upload).
//
// What FTP cannot do: one transfer per control connection at a time, so --qd ranges in flight are
// --qd connections (each logged in); and a range that stops before the file's end is a transfer cut
// short, which servers answer 426 and libcurl then closes that connection: such a read pays a new
// connection and login (the record's `connections` counts them). Its refusals (no such file, a
// login refused) come back as libcurl's errors, not as answers to read, so the checks of HTTP's
// answers are left out; the body's length is still checked by the transport.
#include "../../error.hpp"
#include "protocol.hpp"

namespace gds::remote {
namespace {

class FtpEndpoint final : public Endpoint, public WholeUploads {
 public:
  using Endpoint::Endpoint;
  const char* protocol() const override { return "ftp"; }
  const Uploads* uploads() const override { return this; }
  Ask whole(const std::string&, const std::string&) const override { return {"STOR", url, {}, ""}; }
  bool speaks_http() const override { return false; }
  const char* probe_name() const override { return "SIZE"; }
  Signing signing() const override {
    Signing s;
    s.netrc = true;
    return s;
  }
  uint64_t size_of(int64_t content_length) const override {
    if (content_length < 0) throw InputError("PATH " + name + ": the server does not give its size (FTP SIZE)");
    return uint64_t(content_length);
  }
  // its reply lines: the probe keeps the server's greeting ("220 (vsFTPd 3.0.3)"), nothing else
  void on_header(Answer& a, const std::string& line) const override {
    if (!a.asked && a.server.empty() && line.rfind("220", 0) == 0) {
      a.server = line.substr(3, 200);
      while (!a.server.empty() && (a.server.back() == '\r' || a.server.back() == '\n')) a.server.pop_back();
      a.server.erase(0, a.server.find_first_not_of(" -"));
    }
  }
  // the size probe's "body" is libcurl's report of what it learnt (Content-Length: ..., as `curl -I`
  // prints), not data
  Body on_body(Answer& a, long, const char*, size_t) const override { return a.asked ? Body::kData : Body::kNotData; }
  std::string wrong_range(const Answer&, long) const override { return ""; }
  std::string refusal(const Answer&, long, const std::string&) const override { return ""; }
  bool may_retry(long) const override { return false; }  // a connection's failure is retried by the transport

 private:
  InputError whole_only() const override {
    return InputError("PATH " + name + ": an FTP file is written whole, in one STOR: give --bs its size");
  }
};

std::unique_ptr<Endpoint> ftp_endpoint(const std::string& name) {
  const size_t host = name.find("://") + 3, path = name.find('/', host);
  if (path == std::string::npos || path + 1 == name.size())
    throw InputError("PATH " + name + ": an FTP target is ftp://[USER@]HOST[:PORT]/PATH (or ftps://), a file");
  const std::string authority = name.substr(host, path - host);
  const size_t at = authority.rfind('@');
  if (at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos)
    throw InputError("PATH " + name.substr(0, host) + authority.substr(0, authority.find(':')) + ":...@" +
                     authority.substr(at + 1) + name.substr(path) +
                     ": a password in the URL would be written into the results; name the user only and put its "
                     "password in ~/.netrc (machine HOST login USER password PASSWORD)");
  return std::make_unique<FtpEndpoint>(name, name);
}

}  // namespace

extern const Protocol kFtp = {"ftp", {"ftp://", "ftps://"}, ftp_endpoint};

}  // namespace gds::remote
