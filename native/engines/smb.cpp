// smb: a file on an SMB share read and written in user space through libsmbclient
// (Samba's client library, as smbclient reads), no kernel cifs mount between. Each
// engine has its own libsmbclient context (its own session and TCP connection
// to the server); libsmbclient's file calls are synchronous, so it has one
// request in flight (seek, then read or write). libsmbclient has no call for
// SMB's FLUSH, so there is no fsync over it: sync() says so. libsmbclient is not safe to call from
// two threads at once, so a process reads through one engine, and concurrency
// comes from processes (--procs). smb://SERVER[:PORT]/SHARE/PATH.
//
// The login is smbclient's: the user the URL names, else $USER's, and the
// password after a % in $USER (user%password) or in $PASSWD; a password in the
// URL is refused, since the path is written into every result. No user and no
// password: a guest login, where the server allows one.
#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kSmbCan = {
    Opens::kSmbFile,      /*supports_direct=*/false, /*buffered_flags=*/false, /*max_depth=*/1, kReadWrite,
    /*gpu_buffers=*/false};
constexpr const char* kSmbAbout =
    "a file on an SMB share read and written through libsmbclient, in user space (no cifs mount), one request at a "
    "time per process";
inline std::vector<std::pair<std::string, std::string>> smb_schemes() { return {{"smb://", "smb"}}; }
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBSMBCLIENT
#include <fcntl.h>
#include <libsmbclient.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>

namespace gds {
namespace {

constexpr int kTimeoutMs = 30000;  // a server that does not answer within it fails the run

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What smb://[[DOMAIN;]USER@]SERVER[:PORT]/SHARE/PATH names, for the record and the login.
struct SmbUrl {
  std::string user, server, share;
};

SmbUrl parse(const std::string& url) {
  const std::string scheme = "smb://";
  std::string rest = url.substr(scheme.size());
  SmbUrl out;
  const size_t at = rest.find('@'), slash = rest.find('/');
  if (at != std::string::npos && at < slash) {
    out.user = rest.substr(0, at);
    if (out.user.find(':') != std::string::npos)
      throw InputError("PATH " + scheme +
                       "...: a password in the URL is written into every result; give it in "
                       "$PASSWD (or $USER as user%password), as smbclient reads it");
    rest = rest.substr(at + 1);
  }
  const size_t first = rest.find('/');
  const size_t second = first == std::string::npos ? first : rest.find('/', first + 1);
  if (first == std::string::npos || second == std::string::npos || second + 1 >= rest.size())
    throw InputError("PATH " + url + ": not a file on a share; write smb://SERVER[:PORT]/SHARE/PATH");
  out.server = rest.substr(0, first);
  out.share = rest.substr(first + 1, second - first - 1);
  return out;
}

// libsmbclient keeps global state (its configuration, and talloc stack frames that every call pushes and
// pops, not per thread in Debian's build): one context at a time in a process, made and freed under a lock.
std::mutex& contexts() {
  static std::mutex made;
  return made;
}
unsigned open_contexts = 0;  // under contexts()

// Samba's client blanks a password in $USER once it has read it, when it connects (as smbclient does): put
// back as it was when this goes, for the next engine and a child process (--procs) to read there again.
class KeptEnvironment {
 public:
  explicit KeptEnvironment(const char* name) : name_(name), value_(env(name)), set_(std::getenv(name) != nullptr) {}
  ~KeptEnvironment() {
    if (set_ && env(name_) != value_) ::setenv(name_, value_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string value_;
  bool set_;
};

// (user, password) from the environment, as smbclient takes them.
std::pair<std::string, std::string> login_from_environment(const std::string& url_user) {
  const std::string from_env = env("USER");
  const size_t cut = from_env.find('%');
  const std::string user = url_user.empty() ? from_env.substr(0, cut) : url_user;
  if (!env("PASSWD").empty()) return {user, env("PASSWD")};
  return {user, cut != std::string::npos && user == from_env.substr(0, cut) ? from_env.substr(cut + 1) : ""};
}

class SmbEngine final : public SynchronousEngine {
 public:
  explicit SmbEngine(const Target& target) : path_(target.path), url_(parse(target.path)) {
    std::lock_guard<std::mutex> one_at_a_time(contexts());
    if (open_contexts > 0)
      throw InputError(
          "--threads: the smb engine reads from one thread per process (libsmbclient's calls share "
          "state between threads); use --procs N for N clients at once");
    std::tie(user_, password_) = login_from_environment(url_.user);
    const KeptEnvironment kept("USER");
    ctx_ = smbc_new_context();
    if (!ctx_) throw IoError("libsmbclient: cannot create a context for " + path_);
    ++open_contexts;
    smbc_setOptionUserData(ctx_, this);
    smbc_setFunctionAuthDataWithContext(ctx_, login);
    smbc_setTimeout(ctx_, kTimeoutMs);
    smbc_setOptionUseKerberos(ctx_, false);
    if (!smbc_init_context(ctx_)) {
      const int err = errno;
      release();
      throw IoError("libsmbclient: cannot start a context (" + errno_text(err) + ")");
    }
    // one there (O_RDWR: a handle opened write-only may not ask its size); or, where the target is
    // to be made (create_size), a new one: never one that is there (O_EXCL)
    const int flags = target.create_size                      ? O_RDWR | O_CREAT | O_EXCL
                      : target.direction == Direction::kWrite ? O_RDWR
                                                              : O_RDONLY;
    file_ = smbc_getFunctionOpen(ctx_)(ctx_, path_.c_str(), flags, 0);
    if (!file_) {
      const int err = errno;
      release();
      if (err == ENOENT && !target.create_size) throw Missing("PATH " + path_ + ": " + refusal(err));
      throw InputError("PATH " + path_ + ": " + refusal(err));
    }
    struct stat st;
    if (smbc_getFunctionFstat(ctx_)(ctx_, file_, &st) != 0) {
      const int err = errno;
      close();  // (the lock is held)
      throw InputError("PATH " + path_ + ": cannot ask its size (" + errno_text(err) + ")");
    }
    size_ = target.create_size ? target.create_size : uint64_t(st.st_size);  // new: what its writes will make it
  }
  ~SmbEngine() override {
    std::lock_guard<std::mutex> one_at_a_time(contexts());
    close();
  }

  uint64_t size() const override { return size_; }
  uint64_t connections() const override { return 1; }
  int sync() override { return -ENOTSUP; }  // no FLUSH in libsmbclient (gdsbench's Python refuses fsync first)
  std::map<std::string, std::string> describe() const override {
    return {{"url", path_},        {"protocol", "smb"},   {"probe", "fstat"},
            {"server_ip", host()}, {"share", url_.share}, {"libsmbclient", smbc_version()}};
  }

 private:
  int64_t transfer(const IoRequest& r) override {
    if (smbc_getFunctionLseek(ctx_)(ctx_, file_, off_t(r.offset), SEEK_SET) < 0) return -errno;
    uint32_t got = 0;
    while (got < r.length) {  // a read may return less than asked before the file's end
      const ssize_t n = r.direction == Direction::kWrite
                            ? smbc_getFunctionWrite(ctx_)(ctx_, file_, r.buf + got, r.length - got)
                            : smbc_getFunctionRead(ctx_)(ctx_, file_, r.buf + got, r.length - got);
      if (n < 0) return -errno;
      if (n == 0) break;
      got += uint32_t(n);
    }
    return got;
  }

  // libsmbclient asks for the login when it connects to a share.
  static void login(SMBCCTX* ctx, const char*, const char*, char*, int, char* user, int user_len, char* password,
                    int password_len) {
    auto* self = static_cast<SmbEngine*>(smbc_getOptionUserData(ctx));
    std::snprintf(user, size_t(user_len), "%s", self->user_.c_str());
    std::snprintf(password, size_t(password_len), "%s", self->password_.c_str());
  }

  std::string refusal(int err) const {
    const std::string server = url_.server;
    switch (err) {
      case ENOENT:
        return "no such file on share " + url_.share + " of " + server;
      case EEXIST:
        return "a file of that name is there already (gdsbench makes a file on a share only where none is)";
      case EACCES:
      case EPERM:
        return "access denied by " + server + " (as user " + (user_.empty() ? "guest" : user_) +
               "; set $USER to user%password, or $PASSWD, as smbclient reads them)";
      case ECONNREFUSED:
        return "cannot connect to " + server + " (connection refused; a port other than 445: smb://SERVER:PORT/...)";
      case ETIMEDOUT:
        return "no answer from " + server + " within " + std::to_string(kTimeoutMs / 1000) + " s";
      default:
        return "cannot open it (" + errno_text(err) + ")";
    }
  }

  std::string host() const { return url_.server.substr(0, url_.server.rfind(':')); }

  void close() {
    if (!ctx_) return;
    if (file_) smbc_getFunctionClose(ctx_)(ctx_, file_);
    release();
  }

  void release() {  // (under contexts())
    smbc_free_context(ctx_, 1);
    ctx_ = nullptr;
    --open_contexts;
  }

  std::string path_;
  SmbUrl url_;
  std::string user_, password_;
  SMBCCTX* ctx_ = nullptr;
  SMBCFILE* file_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace

const EngineInfo kSmbEngine = {"smb",
                               kSmbAbout,
                               kSmbCan,
                               [](const Target& target, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
                                 return std::make_unique<SmbEngine>(target);
                               },
                               []() { return std::string(); },
                               {},
                               smb_schemes};

}  // namespace gds

#else

namespace gds {

const EngineInfo kSmbEngine = {
    "smb",
    kSmbAbout,
    kSmbCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError("--engine smb: this gdsbench was built without libsmbclient");
    },
    []() { return std::string("built without libsmbclient (apt-get install libsmbclient-dev, then rebuild)"); },
    {},
    smb_schemes};

}  // namespace gds

#endif
