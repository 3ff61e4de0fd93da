// nfs: a file on an NFS server read and written in user space through libnfs
// (the client fio's engines/nfs.c uses), no kernel mount between: each worker
// thread has its own libnfs context (one TCP connection to the server), with
// up to `depth` requests in flight through libnfs's async calls, driven by
// poll() on the context's socket. nfs://SERVER/EXPORT/PATH?version=4 as libnfs
// parses it (its own arguments: version=3|4, nfsport=N, uid=, gid=).
//
// An RPC carries at most 1 MiB here (libnfs 4.0 does not split an NFSv4 read,
// and drops a connection whose answer exceeds its PDU limit), so a larger
// request goes as several RPCs in flight together, done when the last lands.
// libnfs hands a read's bytes in its own buffer: they are copied once into the
// request's, as the curl engine copies a body.
//
// Writes are libnfs's: UNSTABLE WRITEs (the server may hold them in memory, as
// a kernel client's writes without O_SYNC), made durable by sync(), a COMMIT.
// libnfs before 5.0 cannot encode an NFSv4 WRITE (sahlberg/libnfs pull request
// 319), so there a write over NFSv4 is refused when the engine opens: NFSv3.
#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kNfsCan = {
    Opens::kNfsFile,      /*supports_direct=*/false, /*buffered_flags=*/false, /*max_depth=*/1024, kReadWrite,
    /*gpu_buffers=*/false};
constexpr const char* kNfsAbout =
    "a file on an NFS server read and written through libnfs, in user space (no kernel mount), requests in flight "
    "per thread";
inline std::vector<std::pair<std::string, std::string>> nfs_schemes() { return {{"nfs://", "nfs"}}; }
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBNFS
#include <fcntl.h>
#include <nfsc/libnfs-raw-nfs.h>  // NF3REG, NF3DIR: a directory entry's type
#include <nfsc/libnfs.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include "../copy.hpp"

namespace gds {
namespace {

constexpr uint64_t kMaxRpc = 1 << 20;  // bytes one READ carries
constexpr int kTimeoutMs = 30000;  // libnfs's RPC timeout: a server that stops answering fails the run within a minute
constexpr int kPollMs = 100;       // libnfs checks its timeouts when serviced: at least this often
constexpr int kNewFileMode = 0644;

// libnfs's arguments in a URL, from its ? on ("" where it has none): the same for every file a context reads.
std::string arguments(const std::string& url) {
  const size_t query = url.find('?');
  return query == std::string::npos ? "" : url.substr(query);
}

// Whether the URL asks for NFSv4 (libnfs's own default is NFSv3): version=4 among its arguments.
bool asks_nfsv4(const std::string& url) {
  const std::string args = arguments(url);
  return ("&" + (args.empty() ? args : args.substr(1)) + "&").find("&version=4&") != std::string::npos;
}

// libnfs's major version, from the version it was built with ("4.0.0": 4).
int libnfs_major() { return std::atoi(GDSBENCH_LIBNFS_VERSION); }

// libnfs's words for its last failure (it may have none: NULL).
std::string error_of(struct nfs_context* nfs) {
  const char* words = nfs_get_error(nfs);
  return words && *words ? words : "no reason given";
}

// A new libnfs context as gdsbench uses one: libnfs's RPC timeout, no silent reconnects, and a client
// name of its own. NFSv4 knows a client by its name: libnfs names every context of a process alike, so a
// second thread's would take over the first's lease (its reads then fail NFS4ERR_EXPIRED).
struct nfs_context* new_context(const std::string& url) {
  struct nfs_context* nfs = nfs_init_context();
  if (!nfs) throw IoError("libnfs: cannot create a context for " + url);
  nfs_set_timeout(nfs, kTimeoutMs);
  nfs_set_autoreconnect(nfs, 0);  // a lost connection fails the run, not a silent pause
  static std::atomic<unsigned> contexts{0};
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  const std::string client =
      "gdsbench " + std::string(host) + " pid " + std::to_string(::getpid()) + " context " + std::to_string(contexts++);
  nfs4_set_client_name(nfs, client.c_str());
  return nfs;
}

// What an NFS URL names, as libnfs parses it: the server, the export it mounts, the file in it.
struct NfsUrl {
  std::string server, export_path, file;
};

// What url names, as libnfs parses it (folder: the URL's whole path is the export, and no file is
// named); nothing where libnfs cannot parse it.
std::optional<NfsUrl> parse(struct nfs_context* nfs, const std::string& url, bool folder) {
  struct nfs_url* parsed = folder ? nfs_parse_url_dir(nfs, url.c_str()) : nfs_parse_url_full(nfs, url.c_str());
  if (!parsed) return std::nullopt;
  auto text = [](const char* s) { return std::string(s ? s : ""); };
  NfsUrl out{text(parsed->server), text(parsed->path), text(parsed->file)};
  nfs_destroy_url(parsed);
  return out;
}

// The export `url` names mounted on nfs (folder: as parse says): InputError naming url, what failed,
// libnfs's words for it and the fix.
NfsUrl mount(struct nfs_context* nfs, const std::string& url, bool folder) {
  const std::optional<NfsUrl> parsed = parse(nfs, url, folder);
  if (!parsed)
    throw InputError("PATH " + url + ": not an NFS URL libnfs reads (" + error_of(nfs) +
                     "); write nfs://SERVER/EXPORT/" + (folder ? "DIR/" : "FILE") +
                     "?version=4 (a port: ?nfsport=N, not SERVER:N)");
  const NfsUrl& out = *parsed;
  const std::string& server = out.server;
  if (std::count(server.begin(), server.end(), ':') == 1)  // HOST:PORT, which libnfs 4.0 cannot resolve
    throw InputError("PATH " + url + ": libnfs takes a port as ?nfsport=N, not SERVER:N; write nfs://" +
                     server.substr(0, server.find(':')) + out.export_path + (folder ? "/?" : "/FILE?") +
                     "version=4&nfsport=" + server.substr(server.find(':') + 1));
  if (nfs_mount(nfs, server.c_str(), out.export_path.c_str()) != 0)
    throw InputError("PATH " + url + ": cannot reach export " + out.export_path + " on " + server + " (" +
                     error_of(nfs) +
                     "); is an NFS server there? NFSv4 asks port 2049 (another: ?nfsport=N), NFSv3 its portmapper");
  return out;
}

// Every file under `under` (a path in the mounted export, "" its top) at any depth, added to out as (its
// path from the top, its size), from READDIRPLUS's attributes: no LOOKUP or GETATTR a file.
void walk(struct nfs_context* nfs, const std::string& under, std::vector<std::pair<std::string, uint64_t>>& out) {
  struct nfsdir* dir = nullptr;
  const std::string here = under.empty() ? "/" : under;
  if (nfs_opendir(nfs, here.c_str(), &dir) != 0)
    throw IoError("libnfs: cannot list " + here + " (" + error_of(nfs) + ")");
  std::vector<std::string> folders;
  while (struct nfsdirent* entry = nfs_readdir(nfs, dir)) {
    const std::string name = entry->name;
    if (name == "." || name == "..") continue;
    if (entry->type == NF3DIR) folders.push_back(under + "/" + name);
    if (entry->type == NF3REG) out.emplace_back((under + "/" + name).substr(1), entry->size);
  }
  nfs_closedir(nfs, dir);
  for (const auto& folder : folders) walk(nfs, folder, out);
}

std::vector<std::pair<std::string, uint64_t>> list_folder(const std::string& folder) {
  std::unique_ptr<struct nfs_context, void (*)(struct nfs_context*)> nfs(new_context(folder), nfs_destroy_context);
  mount(nfs.get(), folder, /*folder=*/true);
  std::vector<std::pair<std::string, uint64_t>> files;
  walk(nfs.get(), "", files);
  return files;
}

// One RPC of a request: where its bytes go, and the request it belongs to.
struct Piece {
  class NfsEngine* engine;
  IoRequest* request;
  uint64_t at;  // its offset within the request
  uint32_t length;
};

class NfsEngine final : public Engine {
 public:
  explicit NfsEngine(const Target& target) : path_(target.path) {
    nfs_ = new_context(path_);
    NfsUrl url;
    try {
      url = mount(nfs_, path_, /*folder=*/false);
    } catch (...) {
      close();
      throw;
    }
    server_ = url.server;
    export_ = url.export_path;
    const std::string& file = url.file;
    const bool writes = target.direction == Direction::kWrite || target.create_size;
    if (writes && asks_nfsv4(path_) && libnfs_major() < 5) {
      close();
      throw InputError("PATH " + path_ +
                       ": libnfs " GDSBENCH_LIBNFS_VERSION
                       " cannot send an NFSv4 WRITE (fixed in libnfs 5.0); write over NFSv3 (?version=3: "
                       "the server's portmapper on port 111 finds its ports), or build gdsbench against libnfs 5 or "
                       "later");
    }
    // one there; or, where the target is to be made (create_size), a new one: never one that is there (O_EXCL)
    const int flags = target.create_size ? O_RDWR | O_CREAT | O_EXCL : writes ? O_RDWR : O_RDONLY;
    const int opened = nfs_open2(nfs_, file.c_str(), flags, kNewFileMode, &file_);
    if (opened != 0) {
      const std::string what = (target.create_size ? "cannot make " : "cannot open ") + file + " in export " + export_;
      if (opened == -ENOENT && !target.create_size) refuse<Missing>(what);
      refuse(what, opened == -EEXIST ? "; gdsbench makes a file on a server only where none is" : "");
    }
    struct nfs_stat_64 st;
    if (nfs_fstat64(nfs_, file_, &st) != 0) refuse("cannot stat it");
    size_ = target.create_size ? target.create_size : st.nfs_size;  // new: what its writes will make it
  }
  ~NfsEngine() override { close(); }

  uint64_t size() const override { return size_; }

  // Another file of the same export (a dataset's next), read on this mount and connection; its size is
  // then the caller's to know, as the contract says.
  bool retarget(const Target& target) override {
    if (target.direction != Direction::kRead || target.create_size || !outstanding_.empty()) return false;
    const std::optional<NfsUrl> url = parse(nfs_, target.path, /*folder=*/false);
    if (!url || url->server != server_ || url->export_path != export_ || url->file.empty() ||
        arguments(target.path) != arguments(path_))
      return false;  // opened anew, which says why where it cannot be
    struct nfsfh* next = nullptr;
    if (nfs_open2(nfs_, url->file.c_str(), O_RDONLY, 0, &next) != 0) return false;
    nfs_close(nfs_, file_);
    file_ = next;
    path_ = target.path;
    size_ = UINT64_MAX;
    return true;
  }
  uint64_t connections() const override { return 1; }
  uint64_t streamed_bytes() const override { return streamed_bytes_; }
  std::map<std::string, std::string> describe() const override {
    return {{"url", path_},         {"protocol", "nfs"}, {"probe", "GETATTR"},
            {"server_ip", server_}, {"export", export_}, {"libnfs", GDSBENCH_LIBNFS_VERSION}};
  }

  int sync() override { return nfs_fsync(nfs_, file_); }  // a COMMIT of the UNSTABLE writes: 0, or -errno

  void queue(IoRequest* r) override {
    r->result = 0;
    Outstanding& o = outstanding_[r];  // before its pieces are sent: each one's answer finds it
    if (r->direction == Direction::kRead) o.landing.start(r->length);
    uint64_t at = 0;
    do {  // a request of any length is at least one RPC
      auto* piece = new Piece{this, r, at, uint32_t(std::min<uint64_t>(kMaxRpc, r->length - at))};
      const int rc = r->direction == Direction::kWrite
                         ? nfs_pwrite_async(nfs_, file_, r->offset + at, piece->length, r->buf + at, landed, piece)
                         : nfs_pread_async(nfs_, file_, r->offset + at, piece->length, landed, piece);
      if (rc != 0) {
        delete piece;
        if (o.pieces == 0)
          outstanding_.erase(r);  // nothing sent: nothing will answer (its Landing ends with it)
        else
          r->result = -EIO;  // the pieces sent still answer; the request is a failure whatever they say
        throw IoError("libnfs: cannot send a request for " + path_ + " (" + error_of(nfs_) + ")");
      }
      ++o.pieces;
      at += piece->length;
    } while (at < r->length);
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    while (finished_.size() < min && !outstanding_.empty()) service();
    unsigned n = 0;
    while (n < max && !finished_.empty()) {
      done[n++] = finished_.front();
      finished_.pop_front();
    }
    return n;
  }

 private:
  // The target cannot be opened: the context closed, and one line naming PATH, what failed, libnfs's words
  // for it and the fix (`hint`).
  // (Missing: there is no such file.)
  template <class Error = InputError>
  [[noreturn]] void refuse(const std::string& what, const std::string& hint = "") {
    const std::string why = error_of(nfs_);
    close();
    throw Error("PATH " + path_ + ": " + what + " (" + why + ")" + hint);
  }

  // One RPC answered: its bytes copied (a read's), counted; its request finished with its last piece.
  static void landed(int status, struct nfs_context*, void* data, void* opaque) {
    auto* piece = static_cast<Piece*>(opaque);
    NfsEngine* self = piece->engine;
    IoRequest* r = piece->request;
    auto it = self->outstanding_.find(r);
    if (status < 0) {
      if (self->error_.empty()) self->error_ = data ? static_cast<const char*>(data) : errno_text(status);
      r->result = status;
    } else if (r->result >= 0) {
      if (status > 0 && r->direction == Direction::kRead)
        copy_received(r->buf + piece->at, static_cast<const char*>(data), size_t(status),
                      it->second.landing.past_cache());
      r->result += status;
    }
    delete piece;
    if (--it->second.pieces == 0) {
      self->streamed_bytes_ += it->second.landing.end(r->result > 0 ? uint64_t(r->result) : 0);
      self->outstanding_.erase(it);
      self->finished_.push_back(r);
    }
  }

  void service() {
    struct pollfd p = {nfs_get_fd(nfs_), short(nfs_which_events(nfs_)), 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (ready < 0 && errno != EINTR)
      throw IoError("poll on the NFS connection to " + server_ + ": " + errno_text(errno));
    if (nfs_service(nfs_, ready > 0 ? p.revents : 0) < 0)
      throw IoError("the NFS connection to " + server_ + " failed (" + error_of(nfs_) + ") with " + path_);
    if (!error_.empty()) throw IoError("NFS: " + error_ + " (" + path_ + ")");
  }

  void close() {
    if (!nfs_) return;
    if (file_) nfs_close(nfs_, file_);
    nfs_destroy_context(nfs_);  // answers still in flight are dropped with it
    nfs_ = nullptr;
    outstanding_.clear();  // answers dropped: their Landings end
  }

  std::string path_, server_, export_;
  struct nfs_context* nfs_ = nullptr;
  struct nfsfh* file_ = nullptr;
  uint64_t size_ = 0, streamed_bytes_ = 0;
  struct Outstanding {
    unsigned pieces = 0;  // not yet answered
    Landing landing;      // a read's bytes, counted while in flight (copy.hpp)
  };
  std::map<IoRequest*, Outstanding> outstanding_;
  std::deque<IoRequest*> finished_;
  std::string error_;  // the first failed RPC's words, thrown by the next service()
};

}  // namespace

const EngineInfo kNfsEngine = {"nfs",
                               kNfsAbout,
                               kNfsCan,
                               [](const Target& target, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
                                 return std::make_unique<NfsEngine>(target);
                               },
                               []() { return std::string(); },
                               {},
                               nfs_schemes,
                               list_folder};

}  // namespace gds

#else

namespace gds {

const EngineInfo kNfsEngine = {
    "nfs",
    kNfsAbout,
    kNfsCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError("--engine nfs: this gdsbench was built without libnfs");
    },
    []() { return std::string("built without libnfs (apt-get install libnfs-dev, then rebuild)"); },
    {},
    nfs_schemes};

}  // namespace gds

#endif
