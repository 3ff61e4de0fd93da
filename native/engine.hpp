// The engine contract, after fio's ioengine_ops: an engine opens its target
// (a local file, an HTTP(S), S3 or FTP object for the curl engine, a file on an NFS server or SMB share for nfs and
// smb), moves bytes between it and caller-owned buffers in the direction each request says, and knows nothing of
// timing, statistics or offsets. The transfer loop (transfer.hpp) owns all of that.
//
//   queue(r)      hand over one request; the engine may do it at once (psync),
//                 or start it with others when it has enough (io_uring's
//                 submit_batch)
//   reap(min,..)  start whatever is still queued, wait until at least `min`
//                 requests have finished, and return the finished ones
//
// A finished request has result = bytes moved, or -errno.
//
// A new engine is one file in engines/ defining its EngineInfo (options
// included), plus one line in engines/registry.cpp (and one in
// CMakeLists.txt if it needs a library).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gds {

// Which way bytes go: from the target into memory, or from memory to the target.
enum class Direction : unsigned { kRead = 1, kWrite = 2 };
const char* direction_name(Direction d);
Direction parse_direction(const std::string& name);  // InputError if unknown

struct IoRequest {
  Direction direction = Direction::kRead;
  char* buf = nullptr;         // what the engine reads into or writes from (host, pinned staging or device memory)
  char* device_dst = nullptr;  // bounce modes: the request's twin in GPU memory, copied to or from buf
  unsigned slot = 0;           // index of this request in its worker
  uint64_t offset = 0;
  uint32_t length = 0;
  int64_t result = 0;
  uint64_t submit_ns = 0;
  uint64_t first_byte_ns = 0;  // set by engines that see it (curl): issue (the first try's) to the first body byte
  bool reread = false;         // its block was read before in this run (a later pass): not a first read
};

// What an engine is handed to open.
struct Target {
  std::string path;       // a local file's path, or a URL (Opens::kUrl, kNfsFile, kSmbFile)
  bool direct = false;    // O_DIRECT
  bool uncached = false;  // buffered, its pages not kept (RWF_DONTCACHE): Capabilities::buffered_flags
  int fadvise = 0;        // posix_fadvise advice for a buffered local file's descriptor (--fadvise-hint); 0: none
  Direction direction = Direction::kRead;
  // A write that makes a new object of this many bytes, never one that is there (curl: S3's
  // If-None-Match), rather than writing into one it looks at first; 0: the target is there.
  uint64_t create_size = 0;
  std::string create_mark;  // the new object's gdsbench mark (gdsbench.system.object_store's MARK)
};

class Engine {
 public:
  virtual ~Engine() = default;
  // The target's size in bytes (UINT64_MAX for an engine that opens none).
  virtual uint64_t size() const { return UINT64_MAX; }
  // Connections opened for its requests (0 for an engine that opens none).
  virtual uint64_t connections() const { return 0; }
  // Requests it tried again after a failure it may retry (curl's --retries), counted apart from ops.
  virtual uint64_t retries() const { return 0; }
  // Bytes of its reads copied into their buffers with streaming stores, the reads in flight past the cache
  // (copy.hpp's Landing: the curl and NFS engines copy what their libraries received); every read it
  // completed counts, those of a ramp or drained after the measured window too.
  virtual uint64_t streamed_bytes() const { return 0; }
  // What it learned of its target when opening it (a server's address, its protocol), for the record.
  virtual std::map<std::string, std::string> describe() const { return {}; }
  // Read another target from now on, keeping what it holds open (a server's connections), where
  // it can: what a data loader does going from one object to the next. Its size is then unknown
  // (UINT64_MAX): the caller knows it. False: open the engine again.
  virtual bool retarget(const Target&) { return false; }
  virtual void queue(IoRequest* r) = 0;
  // Make what it has written durable (fsync(2)): 0, or -errno. Only engines that write have anything to sync.
  virtual int sync() { return 0; }
  // Whether its writes land only at sync() (an object uploaded in parts: curl): the worker then
  // syncs at the end of its writes, asked (--fsync-end) or not.
  virtual bool writes_need_sync() const { return false; }
  // The GPU memory its requests will use, for an engine that registers it (cuFile).
  virtual void register_buffer(void*, size_t) {}
  // The host memory its requests will use (host buffers, or the staging of a bounce): `slots`
  // buffers of slot_bytes from base, request slot i's at base + i x slot_bytes, for an engine that
  // registers them (io_uring's --fixedbufs).
  virtual void register_host_buffers(char*, size_t, unsigned) {}
  virtual unsigned reap(unsigned min, IoRequest** done, unsigned max) = 0;
};

// A local file the engine opened, closed with it: InputError naming the path
// and why where it cannot be opened.
class LocalFile {
 public:
  explicit LocalFile(const Target& target);
  ~LocalFile();
  LocalFile(const LocalFile&) = delete;
  LocalFile& operator=(const LocalFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  int sync() const;  // fsync(2): 0, or -errno
  // The flags each read or write asks with (preadv2's, io_uring's rw_flags): RWF_DONTCACHE where
  // the target is uncached, else none.
  int rw_flags() const { return rw_flags_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  int rw_flags_ = 0;
};

// An engine whose requests finish inside queue() (pread, cuFileRead): depth 1,
// concurrency from threads. reap() hands back the one finished request.
class SynchronousEngine : public Engine {
 public:
  void queue(IoRequest* r) final {
    r->result = transfer(*r);
    done_ = r;
  }
  unsigned reap(unsigned, IoRequest** done, unsigned max) final {
    if (!done_ || max == 0) return 0;
    done[0] = done_;
    done_ = nullptr;
    return 1;
  }

 protected:
  // Move r.length bytes at r.offset between the target and r.buf, as r.direction
  // says; bytes moved, or -errno.
  virtual int64_t transfer(const IoRequest& r) = 0;

 private:
  IoRequest* done_ = nullptr;
};

// What an engine can do, as fio's ioengine_ops flags say it: the Python layer
// plans from these (gdsbench.job.spec.ENGINE_INFO), never from engine names.
// What kind of target an engine opens.
// kNfsFile, kSmbFile: a file on an NFS server or an SMB share, read without a mount (the nfs and smb engines).
enum class Opens { kNothing, kLocalFile, kUrl, kNfsFile, kSmbFile };
const char* opens_name(Opens o);  // "nothing", "local file", "url", "nfs file", "smb file": as ENGINE_INFO says

struct Capabilities {
  Opens opens;           // kNothing: reads nothing (null)
  bool supports_direct;  // honours O_DIRECT
  bool buffered_flags;   // honours Target::uncached and Target::fadvise: its own descriptor of a local file
  unsigned max_depth;    // largest queue depth (1: concurrency only from threads)
  unsigned directions;   // Direction values it does, or-ed
  bool gpu_buffers;      // reads into and writes from GPU memory itself (--mode gds)
  // Registers those buffers with cuFile whatever the job asks (else only where its gds_register option asks)
  bool registers_gpu_buffers = false;
  bool does(Direction d) const { return directions & unsigned(d); }
  // Whether it makes a target new (Target::create_size): an object or a file on a server
  // (curl: one PUT or upload; nfs and smb: a file they create); a local file is prepare's.
  bool creates() const { return opens == Opens::kUrl || opens == Opens::kNfsFile || opens == Opens::kSmbFile; }
};

// An option an engine declares for itself, as fio's engines do theirs
// (FIO_OPT_C_ENGINE): the Python option table gathers them beside the job's
// own (gdsbench/job/spec.py), so each gets its flag, sweep key, results column
// and line in docs/options.md, and is refused with any other engine.
struct EngineOption {
  const char* name;  // the JobSpec field and results column (submit_batch); the flag is --submit-batch
  const char* kind;  // "int", "bool", "size" (bytes) or "duration" (ns; its flag drops the _ns of its name)
  const char* help;
  uint64_t fallback;   // the default
  uint64_t low, high;  // an int's bounds
  bool at_most_depth;  // an int that may not exceed --qd either
};

// A job's values of its engine's options, by name (Job::engine_options).
using OptionValues = std::map<std::string, uint64_t>;

struct EngineInfo {
  const char* name;
  const char* about;
  Capabilities can;
  // Opens the target and sets up for `depth` requests in flight; on the thread
  // that will use it (io_uring's ring is single-issuer).
  std::unique_ptr<Engine> (*open)(const Target& target, unsigned depth, const OptionValues& options);
  // Why the engine cannot run here ("" when it can).
  std::string (*unavailable_reason)();
  std::vector<EngineOption> options;
  // The URL schemes it reads, each with the protocol that reads it (("s3://", "s3"), ...), for an
  // engine that opens a URL; nullptr: none.
  std::vector<std::pair<std::string, std::string>> (*schemes)() = nullptr;
  // Every file under a folder it reads (a URL: nfs://SERVER/EXPORT/DIR/), at any depth: (its path under
  // the folder, its size), in no set order; nullptr: it lists none (an S3 prefix is listed in Python).
  std::vector<std::pair<std::string, uint64_t>> (*list)(const std::string& folder) = nullptr;

  // The value of one of its options: as the job set it, else its default.
  uint64_t option(const OptionValues& values, const std::string& name) const;
};

constexpr unsigned kReadOnly = unsigned(Direction::kRead);
constexpr unsigned kReadWrite = unsigned(Direction::kRead) | unsigned(Direction::kWrite);

// Every engine, in the order listed by `gdsbench info` (engines/registry.cpp).
const std::vector<EngineInfo>& engines();
const EngineInfo& engine_by_name(const std::string& name);

// Defined by each engine's own file.
extern const EngineInfo kNullEngine;
extern const EngineInfo kPsyncEngine;
extern const EngineInfo kIoUringEngine;
extern const EngineInfo kCuFileEngine;
extern const EngineInfo kCuFileBatchEngine;
extern const EngineInfo kCuFileAsyncEngine;
extern const EngineInfo kCurlEngine;
extern const EngineInfo kNfsEngine;
extern const EngineInfo kSmbEngine;

}  // namespace gds
